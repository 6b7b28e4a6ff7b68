// run_inputs.h: what a run needs before any device work, checked first so that a bad file or path
// is reported in milliseconds on any machine: the training data, and the output paths (checked
// writable before training, so that hours of training never end in "cannot write").
#pragma once

#include <string>

#include "common/host_dataset.h"
#include "experiments/core/run_config.h"

namespace memstrat {

/// The data set of `c`: --data (or $MEMSTRAT_DATA, data/mnist), loaded, validated and cut to
/// --train-samples / --test-samples. Throws DataError for a bad directory or file and
/// std::invalid_argument when the batch is larger than the training set or, in the stream
/// scenario, the slots (--prefetch x one batch) would exceed kMaxSlotBytes.
HostDataset load_run_data(const RunConfig& c);

/// Throws std::invalid_argument "<what>: cannot open '<path>' ..." when `path` cannot be opened
/// for appending (the way append_jsonl opens it).
void check_appendable(const std::string& path, const char* what);

/// Throws std::invalid_argument naming the option when --json cannot be appended to, or
/// --trace / --loss-curve cannot be written.
void check_outputs(const RunConfig& c);

}  // namespace memstrat
