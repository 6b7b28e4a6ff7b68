// gpu_test_support.h: what the GPU tests share: skip without a device or MNIST ($MEMSTRAT_DATA,
// else the checkout's data/mnist), the data set loaded once, and runs built through Session
// exactly as `memstrat train` builds them, returning the typed record and every epoch's
// per-sample loss curve.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_raii.h"
#include "common/mnist.h"
#include "experiments/core/session.h"
#include "memory_strategies/registry.h"
#include "tests/support/mnist_test_data.h"  // mnist_dir, mnist

namespace memstrat::testing {

#define MEMSTRAT_REQUIRE_GPU()                                                        \
  do {                                                                                \
    std::string why_;                                                                 \
    if (!::memstrat::cuda_device_available(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

#define MEMSTRAT_REQUIRE_GPU_AND_MNIST()                                              \
  do {                                                                                \
    MEMSTRAT_REQUIRE_GPU();                                                           \
    if (::memstrat::testing::mnist_dir().empty())                                     \
      GTEST_SKIP() << "MNIST not found: set MEMSTRAT_DATA to the MNIST directory";    \
  } while (0)

/// The CLI's defaults, shortened to two epochs, quiet, without the profiler.
inline RunConfig short_run(std::string_view strategy = "resident") {
  RunConfig c;
  c.strategy = find_strategy(strategy);
  if (c.strategy == nullptr) throw std::invalid_argument("unknown strategy '" + std::string(strategy) + "'");
  c.epochs = 2;
  c.profile = false;
  c.quiet = true;
  return c;
}

/// The epoch form of a capturable strategy with --launch-form auto and the single-launch step:
/// double-buffer-graph and zero-copy-staged hand out a chunk's batches together (launch_group),
/// so each chunk's steps run in one kernel launch; every other one is captured as one epoch graph.
/// A strategy that is another's data path on one GPU (one_gpu_as: host-shared-ring is
/// double-buffer-graph's there) takes that strategy's form.
inline EpochForm captured_form(std::string_view strategy) {
  const StrategyEntry* e = find_strategy(strategy);
  const std::string_view s = e != nullptr && !e->one_gpu_as.empty() ? e->one_gpu_as : strategy;
  return s == "double-buffer-graph" || s == "zero-copy-staged" ? EpochForm::ChunkKernels
                                                                : EpochForm::Graph;
}

/// Runs `c` on MNIST through Session; a failed run throws with its error.
inline RunRecord run_session(const RunConfig& c, const SampleLossSink& sink = {}) {
  std::ostringstream out, err;
  RunRecord r = Session(c, mnist()).run(out, err, sink);
  if (r.status == RunStatus::Failed)
    throw std::runtime_error(std::string(c.strategy->name) + " failed: " + r.error + "\n" + err.str());
  return r;
}

struct RunOutput {
  std::vector<std::vector<float>> sample_loss;  // per epoch, per sample
  std::vector<EpochResult> epochs;
  EvalResult test;
  bool epoch_launch = false;  // whether the trainer ran each epoch in one launch
  EpochForm epoch_form = EpochForm::PerBatch;  // ... of which form
  std::string step;           // the step implementation that ran (config.step)
};

/// Runs `c` on `data` through Session (a failed run throws with its error); the whole record
/// goes to `record` where given.
inline RunOutput train_run_on(const HostDataset& data, const RunConfig& c,
                              RunRecord* record = nullptr) {
  RunOutput out;
  std::ostringstream o, err;
  RunRecord r = Session(c, data).run(o, err, [&](int, const std::vector<float>& losses) {
    out.sample_loss.push_back(losses);
  });
  if (r.status == RunStatus::Failed)
    throw std::runtime_error(std::string(c.strategy->name) + " failed: " + r.error + "\n" + err.str());
  for (const EpochRecord& e : r.epochs) out.epochs.push_back(e.train);
  out.test = r.totals->final_test;
  out.epoch_launch = r.epoch_launch->on;
  out.epoch_form = r.epoch_launch->form;
  out.step = r.step->step;
  if (record != nullptr) *record = std::move(r);
  return out;
}

inline RunOutput train_run(const RunConfig& c) { return train_run_on(mnist(), c); }

/// The --fused request that forces step implementation `step` (a record's config.step).
inline FusedMode fused_mode_for(const std::string& step) {
  if (step == "single-launch") return FusedMode::Single;
  if (step == "cublaslt-fused") return FusedMode::Lt;
  if (step == "layer-by-layer") return FusedMode::Off;
  throw std::invalid_argument("no --fused mode runs step '" + step + "'");
}

/// Runs of one reference configuration, one per step implementation: the reference a
/// strategy's run is compared with runs the same step (--fused on picks the step per strategy:
/// the layer-by-layer one where the batch is read in place from host memory, and the steps
/// differ in fp32 summation order).
class ResidentReference {
 public:
  /// `base`: the configuration; its strategy is replaced by `reference` (resident by default).
  explicit ResidentReference(RunConfig base, std::string_view reference = "resident")
      : base_(std::move(base)) {
    base_.strategy = find_strategy(reference);
  }
  /// Resident's run with the step `got` ran.
  const RunOutput& for_step_of(const RunOutput& got) {
    auto it = runs_.find(got.step);
    if (it != runs_.end()) return it->second;
    RunConfig c = base_;
    c.fused = fused_mode_for(got.step);
    RunOutput ref = train_run(c);
    if (ref.step != got.step)
      throw std::runtime_error(std::string(base_.strategy->name) + " did not run the " +
                               got.step + " step: " + ref.step);
    return runs_.emplace(got.step, std::move(ref)).first->second;
  }

 private:
  RunConfig base_;
  std::map<std::string, RunOutput> runs_;
};

/// "" when bitwise equal, else where they first differ.
inline std::string first_difference(const RunOutput& a, const RunOutput& b) {
  if (a.sample_loss.size() != b.sample_loss.size()) return "different epoch counts";
  for (std::size_t e = 0; e < a.sample_loss.size(); ++e) {
    const auto &x = a.sample_loss[e], &y = b.sample_loss[e];
    if (x.size() != y.size()) return "different sample counts";
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0)
        return "epoch " + std::to_string(e + 1) + " sample " + std::to_string(i) + ": " +
               std::to_string(x[i]) + " vs " + std::to_string(y[i]);
  }
  return "";
}

}  // namespace memstrat::testing
