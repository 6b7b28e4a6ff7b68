#include "experiments/mlp.h"

#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/nvtx.h"
#include "kernels/kernels.h"

namespace memstrat {

Mlp::Mlp(const MlpConfig& cfg, cudaStream_t stream)
    : cfg_(cfg), stream_(stream), gemm_(cfg.gemm, cfg.tf32, stream) {
  if (cfg_.layers.size() < 2) throw std::invalid_argument("Mlp: need at least input and output sizes");
  for (int n : cfg_.layers)
    if (n <= 0) throw std::invalid_argument("Mlp: every layer size must be > 0");
  if (cfg_.max_batch <= 0) throw std::invalid_argument("Mlp: batch must be > 0");
  const int L = layer_count();
  std::size_t n = 0;
  for (int l = 0; l < L; ++l) {
    w_off_.push_back(n);
    n += static_cast<std::size_t>(cfg_.layers[l]) * cfg_.layers[l + 1];
    b_off_.push_back(n);
    n += static_cast<std::size_t>(cfg_.layers[l + 1]);
  }
  params_ = DeviceBuffer<float>(n);
  grads_ = DeviceBuffer<float>(n);
  velocity_ = DeviceBuffer<float>(n);
  CUDA_CHECK(cudaMemsetAsync(velocity_.data(), 0, velocity_.bytes(), stream_));
  CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
  const std::size_t B = static_cast<std::size_t>(cfg_.max_batch);
  xbuf_ = DeviceBuffer<float>(B * cfg_.layers[0]);
  act_.emplace_back();  // act_[0] unused: the input is the batch itself
  dz_.emplace_back();
  for (int l = 1; l <= L; ++l) {
    act_.emplace_back(B * cfg_.layers[l]);
    dz_.emplace_back(B * cfg_.layers[l]);
  }
  // He initialisation (normal, std = sqrt(2 / fan_in)), biases zero; fixed seed.
  std::vector<float> h(n, 0.0f);
  std::mt19937_64 rng(cfg_.seed);
  for (int l = 0; l < L; ++l) {
    std::normal_distribution<float> dist(0.0f, std::sqrt(2.0f / static_cast<float>(cfg_.layers[l])));
    const std::size_t cnt = static_cast<std::size_t>(cfg_.layers[l]) * cfg_.layers[l + 1];
    for (std::size_t i = 0; i < cnt; ++i) h[w_off_[l] + i] = dist(rng);
  }
  set_parameters(h);
}

void Mlp::forward(const float* x, int rows) {
  const int L = layer_count();
  const float* in = x;
  for (int l = 0; l < L; ++l) {
    const bool last = l + 1 == L;
    gemm_.nn(in, params_.data() + w_off_[l], act_[l + 1].data(), rows, cfg_.layers[l + 1],
             cfg_.layers[l], params_.data() + b_off_[l],
             last ? kernels::Epilogue::Bias : kernels::Epilogue::BiasRelu);
    in = act_[l + 1].data();
  }
}

void Mlp::train_step(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  const int rows = b.rows;
  const int L = layer_count();
  const int C = cfg_.layers.back();
  const float* x = b.x_f32;
  {
    NvtxRange r(Phase::Forward, "forward");
    if (!x) {
      kernels::normalize_u8(b.x_u8, xbuf_.data(), static_cast<std::size_t>(rows) * cfg_.layers[0],
                            stream_);
      x = xbuf_.data();
    }
    forward(x, rows);
    // Mean loss over the batch: the gradient carries the 1/rows factor.
    kernels::softmax_xent(act_[L].data(), b.y, dz_[L].data(), sample_loss + b.first_sample,
                          sample_correct + b.first_sample, rows, C, 1.0f / static_cast<float>(rows),
                          stream_);
  }
  {
    NvtxRange r(Phase::Backward, "backward");
    for (int l = L - 1; l >= 0; --l) {
      const float* input = l == 0 ? x : act_[l].data();
      const int in = cfg_.layers[l], out = cfg_.layers[l + 1];
      gemm_.tn(input, dz_[l + 1].data(), grads_.data() + w_off_[l], in, out, rows);
      kernels::bias_grad(dz_[l + 1].data(), grads_.data() + b_off_[l], rows, out, stream_);
      if (l > 0)  // dA = dZ · W^T, masked by the ReLU of layer l's output
        gemm_.nt(dz_[l + 1].data(), params_.data() + w_off_[l], dz_[l].data(), rows, in, out,
                 act_[l].data());
    }
  }
  {
    NvtxRange r(Phase::Update, "update");
    kernels::sgd_update(params_.data(), grads_.data(), velocity_.data(), params_.size(), cfg_.lr,
                        cfg_.momentum, stream_);
  }
}

void Mlp::evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                   std::int32_t* sample_correct) {
  forward(x, rows);
  kernels::softmax_xent(act_[layer_count()].data(), y, nullptr, sample_loss, sample_correct, rows,
                        cfg_.layers.back(), 1.0f, stream_);
}

std::vector<float> Mlp::parameters() const {
  std::vector<float> h(params_.size());
  CUDA_CHECK(cudaMemcpyAsync(h.data(), params_.data(), params_.bytes(), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return h;
}

void Mlp::set_parameters(const std::vector<float>& p) {
  if (p.size() != params_.size())
    throw std::invalid_argument("Mlp::set_parameters: expected " + std::to_string(params_.size()) +
                                " values, got " + std::to_string(p.size()));
  CUDA_CHECK(cudaMemcpyAsync(params_.data(), p.data(), params_.bytes(), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

double Mlp::train_flops_per_sample() const {
  double f = 0.0;
  for (int l = 0; l < layer_count(); ++l) {
    const double mk = static_cast<double>(cfg_.layers[l]) * cfg_.layers[l + 1];
    f += 2.0 * mk;              // forward
    f += 2.0 * mk;              // weight gradient
    if (l > 0) f += 2.0 * mk;   // input gradient (not needed for the first layer)
  }
  return f;
}

std::vector<int> parse_hidden(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    std::size_t pos = 0;
    long v = 0;
    try {
      v = std::stol(tok, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != tok.size() || v <= 0 || v > 65536)
      throw std::invalid_argument("--hidden: '" + s +
                                  "' is not a comma-separated list of layer sizes in 1..65536 "
                                  "(e.g. 256 or 512,256)");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw std::invalid_argument("--hidden: empty (e.g. 256 or 512,256)");
  return out;
}

}  // namespace memstrat
