// single_launch_step.cu: SingleLaunchStep (see single_launch_step.h).
#include "experiments/core/single_launch_step.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "common/nvtx.h"

namespace memstrat {

namespace {
bool same_batch(const kernels::StepBatch& a, const kernels::StepBatch& b) {
  return a.x == b.x && a.labels == b.labels && a.sample_loss == b.sample_loss &&
         a.sample_correct == b.sample_correct && a.rows == b.rows && a.grad_scale == b.grad_scale;
}
}  // namespace

SingleLaunchStep::SingleLaunchStep(const MlpConfig& cfg, const MlpBuffers& buf, cudaStream_t stream)
    : cfg_(cfg),
      buf_(buf),
      stream_(stream),
      launcher_(cfg.layers[0], cfg.layers[1], cfg.layers[2], cfg.max_batch, /*blocks_per_sm=*/0,
                cfg.step_free_blocks),
      partial_(kernels::step_partial_floats(cfg.max_batch, cfg.layers[0], cfg.layers[1])) {
  // gradients() hands the kernel the Mlp's flat layout as its own (W1, b1, W2, b2).
  if (buf.count != kernels::step_grad_floats(cfg.layers[0], cfg.layers[1], cfg.layers[2]) ||
      buf.w_off[0] != 0 || buf.b_off[0] + cfg.layers[1] != buf.w_off[1])
    throw std::logic_error("SingleLaunchStep: the Mlp's flat layout is not W1, b1, W2, b2");
}

kernels::StepArgs SingleLaunchStep::args(int rows) const {
  kernels::StepArgs a;
  a.rows = rows;
  a.in = cfg_.layers[0];
  a.hidden = cfg_.layers[1];
  a.classes = cfg_.layers[2];
  a.W1 = buf_.w(0);
  a.b1 = buf_.b(0);
  a.W2 = buf_.w(1);
  a.b2 = buf_.b(1);
  a.H = buf_.act[1];
  a.partial = partial_.data();
  return a;
}

kernels::StepArgs SingleLaunchStep::train_args(int rows) const {
  float* V = buf_.velocity;
  kernels::StepArgs a = args(rows);
  a.vW1 = V + buf_.w_off[0];
  a.vb1 = V + buf_.b_off[0];
  a.vW2 = V + buf_.w_off[1];
  a.vb2 = V + buf_.b_off[1];
  a.dH = buf_.dz[1];
  a.dlogits = buf_.dz[2];
  a.lr = cfg_.lr;
  a.momentum = cfg_.momentum;
  a.train = true;
  return a;
}

void SingleLaunchStep::launch(const BatchView& b, float grad_scale, float* grads,
                              float* sample_loss, std::int32_t* sample_correct) {
  kernels::StepArgs a = train_args(b.rows);
  a.x_f32 = b.x_f32;
  a.x_u8 = b.x_f32 ? nullptr : b.x_u8;
  a.labels = b.y;
  a.sample_loss = sample_loss + b.first_sample;
  a.sample_correct = sample_correct + b.first_sample;
  a.grad_scale = grad_scale;
  if (grads != nullptr)
    launcher_.run_gradients(a, grads, stream_);
  else
    launcher_.run(a, stream_);
}

void SingleLaunchStep::train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  NvtxRange r(Phase::Forward, "step (single launch)");
  // Mean loss over the batch: the gradient carries the 1/rows factor.
  launch(b, 1.0f / static_cast<float>(b.rows > 0 ? b.rows : 1), nullptr, sample_loss,
         sample_correct);
}

void SingleLaunchStep::gradients(const BatchView& b, float grad_scale, float* grads,
                                 float* sample_loss, std::int32_t* sample_correct) {
  NvtxRange r(Phase::Forward, "gradients (single launch)");
  if (grads == nullptr) throw std::invalid_argument("Mlp::shard_gradients: grads is required");
  if (b.rows == 0) {  // the launcher launches nothing for no rows: the gradient of none is zero
    CUDA_CHECK(cudaMemsetAsync(grads, 0, buf_.count * sizeof(float), stream_));
    return;
  }
  launch(b, grad_scale, grads, sample_loss, sample_correct);
}

void SingleLaunchStep::update(const float* grads) { update_parameters(cfg_, buf_, grads, stream_); }

void SingleLaunchStep::evaluate(const float* x, const std::int32_t* y, int rows,
                                float* sample_loss, std::int32_t* sample_correct) {
  kernels::StepArgs a = args(rows);
  a.x_f32 = x;
  a.labels = y;
  a.sample_loss = sample_loss;
  a.sample_correct = sample_correct;
  a.train = false;
  launcher_.run(a, stream_);
}

void SingleLaunchStep::reserve_steps(int n) {
  if (n < 1) throw std::invalid_argument("Mlp::reserve_steps: n must be >= 1");
  steps_dev_ = DeviceBuffer<kernels::StepBatch>(static_cast<std::size_t>(n));
  steps_pinned_ = PinnedBuffer<kernels::StepBatch>(static_cast<std::size_t>(n));
  steps_host_.assign(static_cast<std::size_t>(n), kernels::StepBatch{});  // nothing uploaded
}

void SingleLaunchStep::train_steps(const std::vector<BatchView>& views, float* sample_loss,
                                   std::int32_t* sample_correct, int first) {
  if (views.empty()) return;
  if (first < 0 || static_cast<std::size_t>(first) + views.size() > steps_dev_.size())
    throw std::invalid_argument("Mlp::train_steps: rows " + std::to_string(first) + ".." +
                                std::to_string(first + static_cast<int>(views.size()) - 1) +
                                " of the step table, reserve_steps() made room for " +
                                std::to_string(steps_dev_.size()));
  const bool u8 = views.front().x_f32 == nullptr;
  std::vector<kernels::StepBatch> t;
  t.reserve(views.size());
  for (const BatchView& v : views) {
    if ((v.x_f32 == nullptr) != u8)
      throw std::invalid_argument("Mlp::train_steps: every batch of one launch has the same input type");
    t.push_back(launcher_.batch(u8 ? static_cast<const void*>(v.x_u8) : v.x_f32, u8, v.y,
                                sample_loss + v.first_sample, sample_correct + v.first_sample,
                                v.rows));
  }
  // The rows are uploaded when they differ from those on the device (the first epoch: a
  // strategy hands out the same addresses every epoch).
  const auto row = steps_host_.begin() + first;
  bool same = true;
  for (std::size_t i = 0; same && i < t.size(); ++i) same = same_batch(t[i], row[i]);
  kernels::StepBatch* dev = steps_dev_.data() + first;
  if (!same) {
    // No earlier upload from these staging rows is still in flight.
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy(t.begin(), t.end(), steps_pinned_.data() + first);
    CUDA_CHECK(cudaMemcpyAsync(dev, steps_pinned_.data() + first,
                               t.size() * sizeof(kernels::StepBatch), cudaMemcpyHostToDevice, stream_));
    std::copy(t.begin(), t.end(), row);
  }
  NvtxRange r(Phase::Forward, "steps (one launch)");
  kernels::StepArgs a = train_args(cfg_.max_batch);
  if (u8)
    a.x_u8 = views.front().x_u8;
  else
    a.x_f32 = views.front().x_f32;
  launcher_.run_steps(a, dev, static_cast<int>(views.size()), stream_);
}

}  // namespace memstrat
