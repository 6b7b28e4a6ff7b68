// trainer.h: Trainer, the epoch loop. It asks the MemoryStrategy for each batch, runs the Mlp
// step on the compute stream, and times every epoch with CUDA events (three per batch: ready ->
// data -> done) and a host clock. An epoch runs in one of four forms (EpochForm,
// launch_forms.h), chosen once (choose_epoch_form, launch_request.h: --launch-form auto takes
// the form the strategy was built for, a form asked by name runs as asked or is refused):
//  - kernel: a strategy whose batches can all be acquired up front and the single-launch step:
//    it acquires every batch, runs all steps in ONE kernel launch and releases them; the events
//    then bracket the whole epoch (ready -> data: the acquires, data -> done: the launch).
//  - kernel-per-chunk: the same for each launch group in turn (the strategy's own launch_group:
//    the batches of one copied chunk; or, asked for where every batch can be acquired up front,
//    the batches of one --copy-chunk chunk): acquire the group, ONE launch for its steps, release
//    it; the events bracket each group.
//  - graph: a strategy that allows it (epoch_capturable): the first epoch's enqueues (every
//    acquire, step, release and end_epoch; begin_epoch stays outside, host work) are captured
//    into ONE CUDA graph, replayed as it is every later epoch. The per-batch events are external
//    event nodes of the graph, recorded at every replay, so the figures mean what they mean
//    per batch.
//  - per-batch: acquire, step (optionally replayed as a per-batch CUDA graph), release, enqueued
//    batch by batch.
// It never branches on which strategy it holds, only on what it says it allows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cuda_raii.h"
#include "experiments/core/captured_step.h"
#include "experiments/core/epoch_loop.h"
#include "experiments/core/launch_request.h"
#include "experiments/core/mlp.h"
#include "experiments/core/run_config.h"
#include "experiments/core/test_evaluator.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

class Trainer final : public EpochLoop {
 public:
  /// Device memory the constructor allocates (per-sample training losses and hits, the test set
  /// as floats and its results, a step table row per batch for the kernel forms), for a training
  /// set of n_train samples, a test set of n_test, `features` pixels and `batches` batches an
  /// epoch: what --device-budget's margin sets aside for it (device_budget.h). Pure.
  static std::uint64_t setup_device_bytes(std::int64_t n_train, std::int64_t n_test, int features,
                                          int batches);
  /// Allocates everything the loop needs (events, per-sample outputs, the test set on the
  /// device). `strategy` must already be attached. Reads cfg.batch, cfg.graphs (per-batch form
  /// only), cfg.launch_form (auto: each epoch as ONE launch where possible, the kernel form (the
  /// strategy's acquire_ahead() or, one launch per group, launch_group(), and the Mlp's
  /// multi_step()) before the graph form (the strategy's epoch_capturable());
  /// epoch_launch_off_reason() says why neither otherwise; a form by name: that form where the
  /// strategy's launch_forms() and the step allow it, else throws std::invalid_argument) and,
  /// for kernel-per-chunk asked of a strategy without groups of its own, cfg.copy_chunk_mib;
  /// cfg.consumer none: no kernel form, and touch_batch instead of each step.
  Trainer(Mlp& mlp, MemoryStrategy& strategy, const HostDataset& data, const RunConfig& cfg,
          cudaStream_t compute);
  EpochForm epoch_form() const override { return form_; }
  const std::string& epoch_launch_off_reason() const override { return epoch_launch_off_reason_; }
  /// How many times the epoch graph has been captured (graph form: 1 from the first epoch on).
  int epoch_graph_captures() const { return epoch_graph_captures_; }

  EpochResult run_epoch(int epoch) override;
  /// With --consumer none nothing trained: a loss and an accuracy that are not numbers (null in
  /// the record).
  EvalResult evaluate() override;
  const std::vector<float>& last_sample_losses() const override { return host_loss_; }
  int batches() const override { return batches_; }
  std::int64_t batch_begin(int b) const override { return static_cast<std::int64_t>(b) * batch_; }
  int batch_rows(int b) const override {
    return static_cast<int>(std::min<std::int64_t>(batch_, n_train_ - batch_begin(b)));
  }

 private:
  void step(int b, const BatchView& v);
  void consume(int b, const BatchView& v);  // the step, or with --consumer none touch_batch
  void record(cudaEvent_t e);   // on the compute stream; an external node in the epoch graph
  void enqueue_batches();       // one step per batch (per-batch form, or captured: graph form)
  void enqueue_epoch_launch();  // one launch per group_ batches (kernel, kernel-per-chunk forms)
  void launch_epoch_graph();    // graph form: captured the first time, then replayed
  EpochForm form_ = EpochForm::PerBatch;
  int group_ = 0;  // kernel forms: batches per launch (batches_ in the kernel form)
  std::string epoch_launch_off_reason_;
  GraphExec epoch_graph_;
  int epoch_graph_captures_ = 0;
  std::vector<BatchView> views_;
  Mlp& mlp_;
  MemoryStrategy& strategy_;
  cudaStream_t compute_;
  int batch_;
  int batches_;
  std::int64_t n_train_;
  bool graphs_;
  bool trains_;      // --consumer train
  int features_;
  DeviceBuffer<double> touched_;  // --consumer none: touch_batch's counter
  std::vector<Event> ready_, data_, done_;
  DeviceBuffer<float> sample_loss_;
  DeviceBuffer<std::int32_t> sample_correct_;
  PinnedBuffer<float> host_loss_pinned_;
  PinnedBuffer<std::int32_t> host_correct_pinned_;
  std::vector<float> host_loss_;
  std::optional<TestEvaluator> test_;  // built last: after the form is chosen
  // Per-batch form: graphs of the MLP step, keyed by batch index; recaptured if the view changes.
  std::vector<CapturedStep> graphs_by_batch_;
};

}  // namespace memstrat
