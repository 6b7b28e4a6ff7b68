// run_files.h: the files a run reads and writes besides its record: the training data (read and
// checked before any device work), the output paths (checked writable before training, so that
// hours of training never end in "cannot write"), the --export-init directory and the
// --loss-curve CSV.
#pragma once

#include <fstream>
#include <string>

#include "common/host_dataset.h"
#include "experiments/core/mlp.h"
#include "experiments/core/run_config.h"
#include "experiments/core/trainer.h"

namespace memstrat {

/// The data set of `c`: --data (or $MEMSTRAT_DATA, data/mnist), loaded, validated and cut to
/// --train-samples / --test-samples. Throws DataError for a bad directory or file and
/// std::invalid_argument when the batch is larger than the training set.
HostDataset load_run_data(const RunConfig& c);

/// Throws std::invalid_argument naming the option when --json cannot be appended to, or
/// --trace / --loss-curve cannot be written.
void check_outputs(const RunConfig& c);

/// Writes the initial weights (init_params.f32), the epoch-1 sample order (order_epoch1.i32) and
/// a manifest.json describing both into `dir`, for the baselines to start from the same state.
void export_init(const std::string& dir, const Mlp& mlp, const HostDataset& data,
                 const RunConfig& c);

/// --loss-curve: one CSV line per batch, "epoch,batch,mean loss of the batch's samples".
class LossCurveWriter {
 public:
  explicit LossCurveWriter(const std::string& path);  // truncates, writes the header
  /// The epoch `trainer` just ran, from its per-sample losses and its batch layout.
  void write_epoch(int epoch, const Trainer& trainer);

 private:
  std::ofstream out_;
};

}  // namespace memstrat
