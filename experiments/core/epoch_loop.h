// epoch_loop.h: EpochLoop, what Session asks of the object that runs a run's epochs: Trainer
// (one GPU, trainer.h) or DataParallelTrainer (N shards per global batch, on N GPUs or emulated
// on one, data_parallel_trainer.h). Both report an epoch in the same EpochResult and keep the
// epoch's per-sample losses in the epoch's sample order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "experiments/core/test_evaluator.h"  // EvalResult
#include "memory_strategies/launch_forms.h"     // EpochForm
#include "memory_strategies/memory_strategy.h"  // StrategyStats

namespace memstrat {

/// One GPU's own figures of a data-parallel epoch on several GPUs (EpochResult::ranks).
struct RankTimes {
  int rank = 0;
  double gpu_ms = 0, stall_ms = 0, compute_ms = 0, idle_ms = 0;  // as EpochResult's, its events
  std::optional<double> reduce_ms;  // as EpochResult's: its gradients' combination, of compute_ms
  std::optional<double> copy_ms;  // its strategy's copies; none if it issues none
  std::uint64_t h2d_bytes = 0, peer_bytes = 0;
};

struct EpochResult {
  int epoch = 0;
  double wall_ms = 0;     // host clock: begin_epoch .. compute stream drained
  double host_ms = 0;     // host data preparation (begin_epoch)
  double gpu_ms = 0;      // events: first batch ready .. last batch done
  double stall_ms = 0;    // sum over batches: ready -> data (compute waits for the batch)
  double compute_ms = 0;  // sum over batches: data -> done (the MLP step)
  double idle_ms = 0;     // sum over batches: done -> next ready (GPU waits for the host)
  /// Data-parallel training (several GPUs, --emulate-gpus): the sum over global batches of the
  /// combination of the shards' gradients (GradientReduction::combine: the collective, and the
  /// wait for the other GPUs to reach it), part of compute_ms. Timed in profiled runs only (its
  /// events slow the step); none otherwise and on one GPU.
  std::optional<double> reduce_ms;
  StrategyStats strategy;
  double train_loss = 0;
  double train_acc = 0;
  /// Several GPUs (--gpus N > 1): every rank's own figures, rank order; the epoch's gpu_ms,
  /// stall_ms, compute_ms, idle_ms and reduce_ms above are the slowest rank's. Empty on one GPU
  /// and with --emulate-gpus (one GPU computes every shard).
  std::vector<RankTimes> ranks;
};

class EpochLoop {
 public:
  virtual ~EpochLoop() = default;
  virtual EpochResult run_epoch(int epoch) = 0;
  /// Test-set loss and accuracy (forward only, outside any timed region).
  virtual EvalResult evaluate() = 0;
  /// Per-sample losses of the last epoch, in that epoch's sample order.
  virtual const std::vector<float>& last_sample_losses() const = 0;
  /// The epoch's batch layout (the loss curve's rows): batch b holds samples [batch_begin(b),
  /// batch_begin(b) + batch_rows(b)) of the epoch's order; the last batch may be partial. A
  /// data-parallel loop's batches are its global batches.
  virtual int batches() const = 0;
  virtual std::int64_t batch_begin(int b) const = 0;
  virtual int batch_rows(int b) const = 0;
  virtual EpochForm epoch_form() const = 0;
  /// True when an epoch runs as one launch, of a kernel or of a graph.
  bool epoch_launch() const { return epoch_form() != EpochForm::PerBatch; }
  virtual const std::string& epoch_launch_off_reason() const = 0;
};

}  // namespace memstrat
