// layerwise_step.cu: LayerwiseStep (see layerwise_step.h).
#include "experiments/core/layerwise_step.h"

#include <cstddef>

#include "common/nvtx.h"
#include "kernels/common/pixel_norm.h"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat {

LayerwiseStep::LayerwiseStep(const MlpConfig& cfg, const MlpBuffers& buf,
                             const kernels::Gemm& gemm, cudaStream_t stream)
    : cfg_(cfg), buf_(buf), gemm_(gemm), stream_(stream) {}

void LayerwiseStep::forward(const float* x, int rows) {
  const int L = static_cast<int>(cfg_.layers.size()) - 1;
  const float* in = x;
  for (int l = 0; l < L; ++l) {
    const bool last = l + 1 == L;
    gemm_.nn(in, buf_.w(l), buf_.act[l + 1], rows, cfg_.layers[l + 1], cfg_.layers[l], buf_.b(l),
             last ? kernels::Epilogue::Bias : kernels::Epilogue::BiasRelu);
    in = buf_.act[l + 1];
  }
}

void LayerwiseStep::train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  // Mean loss over the batch: the gradient carries the 1/rows factor.
  gradients(b, 1.0f / static_cast<float>(b.rows), buf_.grads, sample_loss, sample_correct);
  update(buf_.grads);
}

void LayerwiseStep::gradients(const BatchView& b, float grad_scale, float* grads,
                              float* sample_loss, std::int32_t* sample_correct) {
  const int rows = b.rows;
  const int L = static_cast<int>(cfg_.layers.size()) - 1;
  const int C = cfg_.layers.back();
  const float* x = b.x_f32;
  {
    NvtxRange r(Phase::Forward, "forward");
    if (!x) {
      kernels::normalize_u8(b.x_u8, buf_.x, static_cast<std::size_t>(rows) * cfg_.layers[0],
                            stream_);
      x = buf_.x;
    }
    forward(x, rows);
    kernels::softmax_xent(buf_.act[L], b.y, buf_.dz[L], sample_loss + b.first_sample,
                          sample_correct + b.first_sample, rows, C, grad_scale, stream_);
  }
  {
    NvtxRange r(Phase::Backward, "backward");
    for (int l = L - 1; l >= 0; --l) {
      const float* input = l == 0 ? x : buf_.act[l];
      const int in = cfg_.layers[l], out = cfg_.layers[l + 1];
      gemm_.tn(input, buf_.dz[l + 1], grads + buf_.w_off[l], in, out, rows);
      kernels::bias_grad(buf_.dz[l + 1], grads + buf_.b_off[l], rows, out, stream_);
      if (l > 0)  // dA = dZ · W^T, masked by the ReLU of layer l's output
        gemm_.nt(buf_.dz[l + 1], buf_.w(l), buf_.dz[l], rows, in, out, buf_.act[l]);
    }
  }
}

void LayerwiseStep::update(const float* grads) { update_parameters(cfg_, buf_, grads, stream_); }

void LayerwiseStep::evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                             std::int32_t* sample_correct) {
  forward(x, rows);
  kernels::softmax_xent(buf_.act[cfg_.layers.size() - 1], y, nullptr, sample_loss, sample_correct,
                        rows, cfg_.layers.back(), 1.0f, stream_);
}

}  // namespace memstrat
