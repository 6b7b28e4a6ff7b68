// run_outputs.h: the files a run writes besides its record and the console: the --export-init
// directory (initial weights and sample order for the baselines) and the --loss-curve CSV.
#pragma once

#include <fstream>
#include <string>

#include "common/host_dataset.h"
#include "experiments/core/mlp.h"
#include "experiments/core/run_config.h"
#include "experiments/core/trainer.h"

namespace memstrat {

/// Writes the initial weights (init_params.f32), the epoch-1 sample order (order_epoch1.i32) and
/// a manifest.json describing both into `dir`, for the baselines to start from the same state.
void export_init(const std::string& dir, const Mlp& mlp, const HostDataset& data,
                 const RunConfig& c);

/// --loss-curve: one CSV line per batch, "epoch,batch,mean loss of the batch's samples".
class LossCurveWriter {
 public:
  explicit LossCurveWriter(const std::string& path);  // truncates, writes the header
  /// The epoch `trainer` just ran, from its per-sample losses and its batch layout.
  void write_epoch(int epoch, const EpochLoop& trainer);

 private:
  std::ofstream out_;
};

}  // namespace memstrat
