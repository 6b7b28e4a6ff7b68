// run_inputs.h: what a run needs before any device work, checked first so that a bad file or path
// is reported in milliseconds on any machine: the training data (the output paths:
// output_files.h).
#pragma once

#include <iosfwd>
#include <string>

#include "common/host_dataset.h"
#include "experiments/core/run_config.h"

namespace memstrat {

/// The data set of `c`: --data (or $MEMSTRAT_DATA, data/mnist), loaded, validated and cut to
/// --train-samples / --test-samples, then made --replicate copies of (replicated_set.h; a line a
/// second on `progress` while that runs, where given). Throws DataError for a bad directory or file and
/// std::invalid_argument when the directory's path is not UTF-8 (the record holds it), when the
/// batch is larger than the training set or, in the stream scenario, the slots (--prefetch x
/// one batch) would exceed kMaxSlotBytes, or the replicated set would not fit the host's available
/// memory (host_memory_refusal).
HostDataset load_run_data(const RunConfig& c, std::ostream* progress = nullptr);

}  // namespace memstrat
