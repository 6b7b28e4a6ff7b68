#include "experiments/core/trainer.h"

#include <chrono>
#include <limits>
#include <string>

#include "common/nvtx.h"
#include "kernels/common/touch.h"
#include "kernels/single_launch/step_launcher.h"  // StepBatch
#include "memory_strategies/epoch_data.h"

namespace memstrat {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

std::uint64_t Trainer::setup_device_bytes(std::int64_t n_train, std::int64_t n_test,
                                          int features, int batches) {
  const std::uint64_t train = static_cast<std::uint64_t>(n_train) * (sizeof(float) + sizeof(std::int32_t));
  const std::uint64_t test = static_cast<std::uint64_t>(n_test) *
                             (static_cast<std::uint64_t>(features) * sizeof(float) +
                              sizeof(std::int32_t) + sizeof(float) + sizeof(std::int32_t));
  return train + test + static_cast<std::uint64_t>(batches) * sizeof(kernels::StepBatch);
}

Trainer::Trainer(Mlp& mlp, MemoryStrategy& strategy, const HostDataset& data,
                 const RunConfig& cfg, cudaStream_t compute)
    : mlp_(mlp),
      strategy_(strategy),
      compute_(compute),
      batch_(cfg.batch),
      batches_(batch_count(data.n_train(), cfg.batch)),
      n_train_(data.n_train()),
      graphs_(cfg.graphs == Graphs::On),
      trains_(cfg.trains()),
      features_(data.features()) {
  // The form first: a form asked for that cannot run is refused before anything is allocated.
  EpochFormInputs in;
  in.strategy = std::string(strategy_.name());
  in.own = {strategy_.acquire_ahead(), strategy_.launch_group(), strategy_.epoch_capturable()};
  in.multi_step = trains_ && mlp_.multi_step();  // no step to run many of in one launch
  in.step_kind = mlp_.step_kind();
  in.batches = batches_;
  if (cfg.launch_form != LaunchForm::Auto) {  // auto reads only the three answers above
    in.allowed = strategy_.launch_forms();
    if (cfg.launch_form == LaunchForm::ChunkKernels && in.allowed.launch_group < 1)
      in.cut_group = cut_launch_group(cfg, data.features(), data.n_train());
  }
  const EpochFormChoice choice = choose_epoch_form(cfg.launch_form, in);
  form_ = choice.form;
  group_ = choice.group;
  epoch_launch_off_reason_ = choice.off_reason;
  for (int b = 0; b <= batches_; ++b) {
    ready_.push_back(Event::create());
    data_.push_back(Event::create());
    done_.push_back(Event::create());
  }
  sample_loss_ = DeviceBuffer<float>(static_cast<std::size_t>(n_train_));
  sample_correct_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(n_train_));
  host_loss_pinned_ = PinnedBuffer<float>(static_cast<std::size_t>(n_train_));
  host_correct_pinned_ = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(n_train_));
  host_loss_.resize(static_cast<std::size_t>(n_train_));
  graphs_by_batch_.resize(static_cast<std::size_t>(batches_));
  if (is_kernel_form(form_)) {
    mlp_.reserve_steps(batches_);  // one table row per batch: each launch has its own rows
    views_.reserve(static_cast<std::size_t>(group_));
  }
  if (trains_)
    test_.emplace(mlp_, data, cfg.batch, compute_);
  else {
    touched_ = DeviceBuffer<double>(1);
    CUDA_CHECK(cudaMemsetAsync(touched_.data(), 0, touched_.bytes(), compute_));
  }
}

EvalResult Trainer::evaluate() {
  if (trains_) return test_->evaluate();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return EvalResult{nan, nan};
}

void Trainer::consume(int b, const BatchView& v) {
  if (!trains_) {
    kernels::touch_batch(v.x_u8, v.x_f32, v.y, v.rows, features_, touched_.data(), compute_);
  } else if (form_ == EpochForm::Graph) {  // being captured: the step goes into the epoch graph
    mlp_.train_step(v, sample_loss_.data(), sample_correct_.data());
  } else {
    step(b, v);
  }
}

void Trainer::step(int b, const BatchView& v) {
  if (!graphs_) {
    mlp_.train_step(v, sample_loss_.data(), sample_correct_.data());
    return;
  }
  CapturedStep& g = graphs_by_batch_[static_cast<std::size_t>(b)];
  if (!g.exec || !same_view(g.view, v)) {
    // Capture once per batch index (during the first epoch); the addresses a strategy hands out
    // for batch b are the same every epoch, so the graph is replayed from then on.
    g.exec = capture_graph(compute_, cudaStreamCaptureModeThreadLocal, [&] {
      mlp_.train_step(v, sample_loss_.data(), sample_correct_.data());
    });
    g.view = v;
  }
  CUDA_CHECK(cudaGraphLaunch(g.exec.get(), compute_));
}

void Trainer::record(cudaEvent_t e) {
  // In the graph form this runs only while the epoch is captured. A plain record there would
  // only order nodes inside the graph and never record at replay; an external event node records
  // the event every time the graph runs, so a replayed epoch is timed like an enqueued one.
  if (form_ == EpochForm::Graph)
    CUDA_CHECK(cudaEventRecordWithFlags(e, compute_, cudaEventRecordExternal));
  else
    CUDA_CHECK(cudaEventRecord(e, compute_));
}

void Trainer::enqueue_batches() {
  for (int b = 0; b < batches_; ++b) {
    NvtxRange br(Phase::Batch, "batch " + std::to_string(b));
    record(ready_[b]);
    const BatchView v = strategy_.acquire(b);
    record(data_[b]);
    consume(b, v);
    record(done_[b]);
    strategy_.release(b);
  }
}

void Trainer::enqueue_epoch_launch() {
  for (int first = 0; first < batches_; first += group_) {
    const int end = std::min(batches_, first + group_);
    NvtxRange br(Phase::Batch, "batches " + std::to_string(first) + "-" + std::to_string(end - 1) +
                                   " (one launch)");
    CUDA_CHECK(cudaEventRecord(ready_[first], compute_));
    views_.clear();
    for (int b = first; b < end; ++b) views_.push_back(strategy_.acquire(b));
    CUDA_CHECK(cudaEventRecord(data_[first], compute_));
    mlp_.train_steps(views_, sample_loss_.data(), sample_correct_.data(), first);
    CUDA_CHECK(cudaEventRecord(done_[end - 1], compute_));
    for (int b = first; b < end; ++b) strategy_.release(b);
  }
}

void Trainer::launch_epoch_graph() {
  if (!epoch_graph_) {
    // Captured once, from the first epoch (the NVTX ranges of its batches, copies and steps are
    // opened now, while capturing). The strategy's contract (epoch_capturable) makes every
    // epoch's enqueues the same, and the Mlp's buffers, the events and the per-sample outputs
    // never move, so nothing the graph depends on changes: it is never captured again.
    NvtxRange cr(Phase::Batch, "capture epoch graph");
    epoch_graph_ = capture_graph(compute_, cudaStreamCaptureModeThreadLocal, [&] {
      enqueue_batches();
      strategy_.end_epoch();
    });
    ++epoch_graph_captures_;
  }
  NvtxRange br(Phase::Batch, "batches 0-" + std::to_string(batches_ - 1) + " (one graph)");
  CUDA_CHECK(cudaGraphLaunch(epoch_graph_.get(), compute_));
}

EpochResult Trainer::run_epoch(int epoch) {
  EpochResult r;
  r.epoch = epoch;
  NvtxRange er(Phase::Epoch, "epoch " + std::to_string(epoch));
  const auto t0 = Clock::now();
  {
    NvtxRange hr(Phase::HostPrep, "host-prep");
    strategy_.begin_epoch(epoch);
  }
  r.host_ms = ms_since(t0);
  switch (form_) {
    case EpochForm::Kernel:
    case EpochForm::ChunkKernels:
      enqueue_epoch_launch();
      strategy_.end_epoch();
      break;
    case EpochForm::Graph:
      launch_epoch_graph();  // end_epoch is in the graph
      break;
    case EpochForm::PerBatch:
      enqueue_batches();
      strategy_.end_epoch();
      break;
  }
  CUDA_CHECK(cudaStreamSynchronize(compute_));
  r.wall_ms = ms_since(t0);

  // Everything below is outside the timed region.
  r.gpu_ms = elapsed_ms(ready_[0], done_[batches_ - 1]);
  if (is_kernel_form(form_)) {
    for (int first = 0; first < batches_; first += group_) {  // per launch
      const int last = std::min(batches_, first + group_) - 1;
      r.stall_ms += elapsed_ms(ready_[first], data_[first]);
      r.compute_ms += elapsed_ms(data_[first], done_[last]);
      if (last + 1 < batches_) r.idle_ms += elapsed_ms(done_[last], ready_[last + 1]);
    }
  } else {
    for (int b = 0; b < batches_; ++b) {
      r.stall_ms += elapsed_ms(ready_[b], data_[b]);
      r.compute_ms += elapsed_ms(data_[b], done_[b]);
      if (b + 1 < batches_) r.idle_ms += elapsed_ms(done_[b], ready_[b + 1]);
    }
  }
  r.strategy = strategy_.stats();
  if (!trains_) {  // nothing trained: no loss, no accuracy (null in the record)
    r.train_loss = r.train_acc = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  CUDA_CHECK(cudaMemcpyAsync(host_loss_pinned_.data(), sample_loss_.data(), sample_loss_.bytes(),
                             cudaMemcpyDeviceToHost, compute_));
  CUDA_CHECK(cudaMemcpyAsync(host_correct_pinned_.data(), sample_correct_.data(),
                             sample_correct_.bytes(), cudaMemcpyDeviceToHost, compute_));
  CUDA_CHECK(cudaStreamSynchronize(compute_));
  double loss = 0, correct = 0;
  for (std::int64_t i = 0; i < n_train_; ++i) {
    host_loss_[i] = host_loss_pinned_[i];
    loss += host_loss_pinned_[i];
    correct += host_correct_pinned_[i];
  }
  r.train_loss = loss / static_cast<double>(n_train_);
  r.train_acc = correct / static_cast<double>(n_train_);
  return r;
}

}  // namespace memstrat
