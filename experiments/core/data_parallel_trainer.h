// data_parallel_trainer.h: DataParallelTrainer, the epoch loop of data-parallel training
// (--gpus N, --emulate-gpus N). Every global batch of N × --batch rows is cut into N shards
// (ShardPlan); each shard's gradients are computed by a replica (an Mlp whose step computes
// gradients apart from its update: choose_gradient_step, i.e. the single-launch step's
// gradients-only launch where --fused takes it, else the layer-by-layer step), combined
// (GradientReduction), and every replica applies the same update.
//   --gpus N: N replicas, one per GPU (--device .. --device + N - 1), each with its own host
//     thread, compute stream, memory strategy (created and driven with its GPU current, over
//     its shard only: the single-GPU batches g·N + r, which it serves as its own epoch of
//     batches 0, 1, 2 ..., StrategyOptions::shard) and NCCL communicator (ncclCommInitAll).
//   --gpus N --processes per-gpu: one process per GPU, started by a launcher; each holds its
//     own rank's replica only (its GPU, strategy, thread, ncclCommInitRank at NCCL_COMM_ID:
//     process_rank.h) and runs the same epoch as that rank's thread does above. After each
//     epoch, outside its timed region, the processes sum their rows' losses (ncclAllReduce of
//     zeros and values: exact) and gather their figures (ncclAllGather), so every process holds
//     what one process would.
//   --emulate-gpus N: one replica on one GPU computes the N shards in turn (the single-GPU batch
//     order), then sums them in rank order: the reference --gpus N --reduce exact equals bitwise.
// An epoch runs per batch (no one-launch forms); with --graphs on, on one GPU and with one process
// per GPU, each shard turn's gradients and each global batch's reduction and update replay CUDA
// graphs captured in epoch 1 (NCCL's collectives inside them), as the per-batch form of one GPU
// replays its steps; several GPUs in one process enqueue them (data_parallel_graphs says why).
// Epoch figures: the host clock of the slowest process over all its replicas; the events of the
// slowest replica (largest gpu_ms): ready -> data per shard is stall, done -> next ready idle,
// the rest (gradients, reduction, update) compute; the strategy figures summed over replicas.
// The test set is evaluated on rank 0's replica.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/host_dataset.h"
#include "experiments/core/epoch_loop.h"
#include "experiments/core/mlp.h"
#include "experiments/core/run_config.h"
#include "experiments/core/shard_plan.h"
#include "memory_strategies/replica_group.h"

namespace memstrat {

class DataParallelTrainer final : public EpochLoop {
 public:
  /// Builds every replica (device work: Mlp, strategy attach, buffers, communicators, one warm-up
  /// reduction so that NCCL's lazy set-up happens here, not in epoch 1). cfg.data_parallel()
  /// must hold and data_parallel_refusal(cfg) be "" (else std::invalid_argument).
  DataParallelTrainer(const RunConfig& cfg, const HostDataset& data);
  ~DataParallelTrainer() override;

  EpochResult run_epoch(int epoch) override;
  EvalResult evaluate() override;
  const std::vector<float>& last_sample_losses() const override { return host_loss_; }
  int batches() const override { return plan_.global_batches(); }
  std::int64_t batch_begin(int g) const override { return plan_.global_first(g); }
  int batch_rows(int g) const override { return plan_.global_rows(g); }
  EpochForm epoch_form() const override { return EpochForm::PerBatch; }
  const std::string& epoch_launch_off_reason() const override { return off_reason_; }

  /// This process's first replica's model: rank 0's, or, one process per GPU, its rank's (every
  /// replica holds the same parameters).
  Mlp& model();
  /// The GPU this process trains on first: --device, or, under --processes per-gpu, its local
  /// rank's (process_device). Throws std::invalid_argument when it cannot see that GPU.
  static int local_device(const RunConfig& cfg);
  int replicas() const { return static_cast<int>(replicas_.size()); }
  /// The step every replica runs and why the faster ones do not (choose_gradient_step).
  const StepChoice& step_choice() const { return step_; }

 private:
  struct Replica;  // data_parallel_trainer.cu
  struct Times;
  void run_replica(Replica& p, int epoch, Times& t);
  /// --processes per-gpu, after an epoch: every rank's kFigures figures, gathered (NCCL) from
  /// every process in rank order; `mine` this rank's.
  std::vector<double> gather_figures(Replica& p, const double* mine);
  static constexpr std::size_t kFigures = 24;
  /// Waits for p's stream; with several GPUs, polls NCCL's asynchronous error and the other
  /// replicas' failure, and aborts p's communicator when either stops the run.
  void wait(Replica& p);
  /// fn(i) for every replica i, each on its own host thread when there are several; rethrows
  /// the first exception once every thread ended.
  void on_replicas(const std::function<void(int)>& fn);

  ShardPlan plan_;
  int local_shards_;  // shards per replica: N (emulation) or 1
  bool sharded_;      // several GPUs: each serves its shard as its own epoch
  bool per_process_;  // --processes per-gpu: this process holds its own rank's replica only
  bool graphs_;       // the step replays CUDA graphs (data_parallel_graphs)
  /// The gradients' combination timed on its own (EpochResult::reduce_ms) in profiled runs only:
  /// its two events per step slow the step itself (guard_gpus.toml flags the runs that record them).
  bool time_reduce_;
  std::string off_reason_;
  StepChoice step_;  // every replica's step (choose_gradient_step)
  /// Several GPUs: what the ranks' strategies share (StrategyOptions::group); null otherwise.
  /// Declared before replicas_: destroyed after every strategy.
  std::unique_ptr<ReplicaGroup> group_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<float> host_loss_;
  std::atomic<bool> failed_{false};  // a replica's thread threw: the others stop waiting
};

}  // namespace memstrat
