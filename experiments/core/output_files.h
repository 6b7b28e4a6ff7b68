// output_files.h: the files a run writes (--json, --trace, --loss-curve, the --export-init
// directory), checked before any device work so that hours of training never end in "cannot
// write". The checks leave nothing behind: a file that did not exist is created to prove it can
// be, then removed again, so a run that stops early leaves no empty record file.
#pragma once

#include <string>

#include "experiments/core/run_config.h"

namespace memstrat {

/// Throws std::invalid_argument "<what>: ..." unless `path` can be written: an existing regular
/// file (or pipe) this process may write to, or a new file it may create. Refused: directories,
/// devices such as /dev/full (a write there fails only at the end of the run) and sockets.
/// An existing file is left as it is (opened without truncating); a new one is not left behind.
void check_output_file(const std::string& path, const char* what);

/// Throws std::invalid_argument "<what>: ..." unless `dir` is a directory this process may write
/// to, or can be created as one (its nearest existing ancestor is such a directory).
void check_output_dir(const std::string& dir, const char* what);

/// check_output_file for --json, --trace and --loss-curve and check_output_dir for
/// --export-init; throws std::invalid_argument when two of the files are the same file (the
/// later write would replace or interleave with the earlier one).
void check_outputs(const RunConfig& c);

}  // namespace memstrat
