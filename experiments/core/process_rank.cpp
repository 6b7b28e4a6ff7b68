#include "experiments/core/process_rank.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace memstrat {

namespace {

struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  const char* local;
};

constexpr Launcher kLaunchers[] = {
    {"memstrat", "MEMSTRAT_RANK", "MEMSTRAT_WORLD_SIZE", "MEMSTRAT_LOCAL_RANK"},  // rank_spawn.h
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"srun (Slurm)", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"mpirun (MPICH, PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
};

int whole_number(const char* name, const char* value, int min) {
  const std::string s = value;
  std::size_t used = 0;
  long v = -1;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < min || v > 1000000)
    throw std::invalid_argument("--processes per-gpu: " + std::string(name) + "='" + s +
                                "' is not a whole number >= " + std::to_string(min));
  return static_cast<int>(v);
}

}  // namespace

ProcessRank process_rank_from(const EnvReader& env) {
  for (const Launcher& l : kLaunchers) {
    const char* rank = env(l.rank);
    if (rank == nullptr) continue;
    const char* size = env(l.size);
    if (size == nullptr)
      throw std::invalid_argument("--processes per-gpu: " + std::string(l.rank) + " is set but " +
                                  l.size + " is not; start memstrat with " + l.name);
    ProcessRank p;
    p.rank = whole_number(l.rank, rank, 0);
    p.world = whole_number(l.size, size, 1);
    if (p.rank >= p.world)
      throw std::invalid_argument("--processes per-gpu: " + std::string(l.rank) + "=" +
                                  std::to_string(p.rank) + " is not below " + l.size + "=" +
                                  std::to_string(p.world));
    // One process per host has no local rank variable under some launchers: its rank there is 0.
    const char* local = env(l.local);
    p.local_rank = local == nullptr ? 0 : whole_number(l.local, local, 0);
    p.launcher = std::string(l.name) + " (" + l.rank + ", " + l.size + ", " + l.local + ")";
    const char* id = env("NCCL_COMM_ID");
    const std::string comm = id == nullptr ? "" : id;
    const std::size_t colon = comm.rfind(':');
    if (comm.empty() || colon == std::string::npos || colon == 0 || colon + 1 == comm.size())
      throw std::invalid_argument(
          "--processes per-gpu: set NCCL_COMM_ID=HOST:PORT in every process's environment (the "
          "same in all): where rank 0's NCCL bootstrap listens, a free port on rank 0's host, "
          "e.g. NCCL_COMM_ID=$(hostname):29600" +
          std::string(comm.empty() ? "" : "; got '" + comm + "'"));
    whole_number("the port of NCCL_COMM_ID", comm.substr(colon + 1).c_str(), 1);
    p.comm_id = comm;
    return p;
  }
  std::string names;
  for (const Launcher& l : kLaunchers) names += std::string(names.empty() ? "" : ", ") + l.rank;
  throw std::invalid_argument(
      "--processes per-gpu: no launcher's rank in the environment (" + names +
      "); start one process per GPU with torchrun, mpirun or srun (or start memstrat alone: it "
      "starts them), or run --processes one");
}

bool launcher_rank_set(const EnvReader& env) {
  for (const Launcher& l : kLaunchers)
    if (env(l.rank) != nullptr) return true;
  return false;
}

ProcessRank process_rank_from_environment() {
  return process_rank_from([](const char* n) -> const char* { return std::getenv(n); });
}

int process_device(int first, int local_rank, int visible) {
  if (first + local_rank < visible) return first + local_rank;
  if (visible == 1 && first == 0) return 0;
  throw std::invalid_argument("--processes per-gpu: local rank " + std::to_string(local_rank) +
                              " from --device " + std::to_string(first) + " needs GPU " +
                              std::to_string(first + local_rank) + ", and this process sees " +
                              std::to_string(visible) + " (CUDA_VISIBLE_DEVICES)");
}

}  // namespace memstrat
