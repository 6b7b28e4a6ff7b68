// main.cpp: the thin `memstrat` executable: parse, dispatch, turn escaped exceptions into a
// message and a non-zero exit.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/commands.h"
#include "experiments/cli/options.h"
#include "experiments/cli/rank_spawn.h"

int main(int argc, char** argv) {
  using namespace memstrat;
  CliRequest req;
  if (auto code = parse_cli(argc, argv, req, std::cout, std::cerr)) return *code;
  try {
    // --processes per-gpu with no launcher: start the ranks, one process per GPU, and wait.
    if (req.command == Command::Train && req.run.spawn_ranks)
      return spawn_ranks("/proc/self/exe", std::vector<std::string>(argv, argv + argc),
                         req.run.gpus, free_local_port(), std::cerr);
    switch (req.command) {
      case Command::List: return run_list(std::cout);
      case Command::Info: return run_info(req, std::cout, std::cerr);
      case Command::Describe: return run_describe(req, std::cout);
      case Command::Train: return run_train(req, std::cout, std::cerr);
      case Command::Primitives: return run_primitives_command(req, std::cout, std::cerr);
    }
  } catch (const std::exception& e) {
    std::cerr << "memstrat: error: " << e.what() << "\n";
    return kExitRunFailed;
  }
  return kExitRunFailed;
}
