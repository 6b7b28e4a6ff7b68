// commands.h: what `memstrat list`, `info`, `describe`, `train` and `primitives` do: thin calls into core/.
// Each returns the process exit code: 0 ok, 1 the run failed, 2 bad usage or input, 3 no GPU /
// strategy waived.
#pragma once

#include <iosfwd>

#include "common/exit_codes.h"
#include "experiments/cli/options.h"

namespace memstrat {

int run_list(std::ostream& out);
int run_info(const CliRequest& req, std::ostream& out, std::ostream& err);
int run_describe(const CliRequest& req, std::ostream& out);
int run_train(const CliRequest& req, std::ostream& out, std::ostream& err);
int run_primitives_command(const CliRequest& req, std::ostream& out, std::ostream& err);

}  // namespace memstrat
