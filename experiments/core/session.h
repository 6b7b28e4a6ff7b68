// session.h: Session, one training run built from one RunConfig. It opens the device and the
// built-in profiler, builds the compute stream, the Mlp, the memory strategy and the Trainer
// (the profiler's set-up window), runs every epoch (a window each, then an evaluation outside
// it), writes the run's side files (--export-init, --loss-curve, --trace), prints progress, and
// returns the typed record. Writing the record (--json) is left to the caller.
#pragma once

#include <functional>
#include <iosfwd>
#include <vector>

#include "common/host_dataset.h"
#include "experiments/core/device_check.h"
#include "experiments/core/record.h"
#include "experiments/core/run_config.h"

namespace memstrat {

/// Receives each epoch's per-sample training losses, in that epoch's sample order.
using SampleLossSink = std::function<void(int epoch, const std::vector<float>& losses)>;

class Session {
 public:
  /// `data` is the training set (load_run_data, or a test's); both must outlive the session.
  Session(const RunConfig& cfg, const HostDataset& data);

  /// Runs it. Before anything is measured, throws DeviceUnavailable (no GPU, or the strategy or
  /// the asked launch form is waived on this device) or std::invalid_argument (no such --device;
  /// or, before any device work, a --launch-form the strategy, scenario or step cannot run). A failure after the
  /// record was started does not throw: the record comes back with status Failed and the
  /// error. Progress, the end-of-run tables and the trace note go to `out` unless cfg.quiet,
  /// the summary line always; warnings go to `err`. `sink`, when set, gets every epoch's
  /// per-sample losses.
  RunRecord run(std::ostream& out, std::ostream& err, const SampleLossSink& sink = {});

 private:
  struct Pipeline;  // stream, Mlp, strategy and Trainer of one run (session.cpp)
  Pipeline set_up(RunRecord& rec, CuptiProfiler& prof);
  void run_epochs(Pipeline& p, RunRecord& rec, CuptiProfiler& prof, std::ostream& out,
                  std::ostream& err, const SampleLossSink& sink);

  const RunConfig& cfg_;
  const HostDataset& data_;
};

}  // namespace memstrat
