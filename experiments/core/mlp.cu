// mlp.cu: Mlp (see mlp.h): parameters, initialisation, and the choice of the one TrainStep.
#include "experiments/core/mlp.h"

#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "experiments/core/layerwise_step.h"
#include "experiments/core/lt_fused_step.h"
#include "experiments/core/single_launch_step.h"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat {

namespace {

std::unique_ptr<TrainStep> make_step(StepKind kind, const MlpConfig& cfg, const MlpBuffers& buf,
                                     const kernels::Gemm& gemm, cudaStream_t stream) {
  switch (kind) {
    case StepKind::SingleLaunch:
      return std::make_unique<SingleLaunchStep>(cfg, buf, stream);
    case StepKind::LtFused:
      return std::make_unique<LtFusedStep>(cfg, buf, gemm, stream);
    case StepKind::Layerwise:
      return std::make_unique<LayerwiseStep>(cfg, buf, gemm, stream);
    case StepKind::Auto:  // a request, never a choice
      break;
  }
  throw std::logic_error("Mlp: no step implementation for '" + std::string(to_string(kind)) + "'");
}

}  // namespace

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

  choice_ = choose_step(cfg_, kernels::step_unsupported_here);
  step_ = make_step(choice_.kind, cfg_, buffers(), gemm_, stream_);
}

Mlp::~Mlp() = default;

MlpBuffers Mlp::buffers() const {
  MlpBuffers b;
  b.params = params_.data();
  b.grads = grads_.data();
  b.velocity = velocity_.data();
  b.count = params_.size();
  b.w_off = w_off_;
  b.b_off = b_off_;
  b.x = xbuf_.data();
  for (const DeviceBuffer<float>& a : act_) b.act.push_back(a.data());
  for (const DeviceBuffer<float>& d : dz_) b.dz.push_back(d.data());
  return b;
}

void Mlp::check_rows(int rows, const char* who) const {
  if (rows < 0 || rows > cfg_.max_batch)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(rows) +
                                " rows (max_batch is " + std::to_string(cfg_.max_batch) + ")");
}

void Mlp::train_step(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  check_rows(b.rows, "Mlp::train_step");
  step_->train(b, sample_loss, sample_correct);
}

void Mlp::shard_gradients(const BatchView& b, float grad_scale, float* grads, float* sample_loss,
                          std::int32_t* sample_correct) {
  check_rows(b.rows, "Mlp::shard_gradients");
  step_->gradients(b, grad_scale, grads, sample_loss, sample_correct);
}

void Mlp::evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                   std::int32_t* sample_correct) {
  check_rows(rows, "Mlp::evaluate");
  step_->evaluate(x, y, rows, sample_loss, sample_correct);
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
    if (pos == 0 || pos != tok.size() || v <= 0 || v > kMaxHiddenSize)
      throw std::invalid_argument("--hidden: '" + s +
                                  "' is not a comma-separated list of layer sizes in 1.." +
                                  std::to_string(kMaxHiddenSize) + " (e.g. 256 or 512,256)");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw std::invalid_argument("--hidden: empty (e.g. 256 or 512,256)");
  return out;
}

}  // namespace memstrat
