// mlp.cu: Mlp (see mlp.h): parameters, initialisation, and the two implementations of the
// training step.
//
// The fused one-hidden-layer step (train_step_fused), per batch of `rows` rows:
//   [u8 only] normalize_u8                       X = x_u8 / 255                (1 launch)
//   GEMM   H = relu(X·W1 + b1)                   cuBLASLt, RELU_BIAS epilogue  (1 launch*)
//   fused_head: logits, loss, correct, dlogits, dH = (dlogits·W2^T) ⊙ 1[H > 0] (1 launch)
//   GEMM   gW1 = X^T·dH                          cuBLASLt                      (1 launch*)
//   fused_update: dW2, db2, db1 and the momentum SGD step of W2, b2, b1, W1   (1 launch)
// (* plus a split-K reduction kernel if the algorithm cuBLASLt picked uses one.)
// The cuBLASLt algorithms are chosen in the constructor (cuBLASLt's heuristic query must not
// run inside a CUDA-graph capture) for every row count 1..max_batch when max_batch <=
// kLtPlanAllRowsUpTo (else for max_batch only), with the batch X declared at the alignment
// every strategy guarantees (x_alignment below), so one algorithm per row count serves every strategy's pointer (device, offset into a
// dataset, mapped host, managed). A row count without a plan (only possible when max_batch >
// kLtPlanAllRowsUpTo: the partial last batch) runs the two GEMMs on classic cuBLAS
// (cublasSgemm + bias_act, safe inside a capture). Which route a step takes depends only on
// rows and max_batch, so results never depend on timing, capture or pointers.
#include "experiments/core/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/nvtx.h"
#include "kernels/fused_mlp.h"
#include "kernels/fused_step.h"
#include "kernels/gemm_lt.h"
#include "kernels/kernels.h"

namespace memstrat {

namespace {

// The alignment declared for X. Every strategy hands out batch b at base + b*B*row_bytes with
// a base from cudaMalloc / cudaHostAlloc / cudaMallocManaged / page-aligned host memory
// (>= 256-byte aligned), so the largest power of two dividing a row's bytes, capped at 16,
// holds for every batch of every strategy (16 for MNIST floats: 3136 = 16 * 196). Declaring
// only 4 bytes cost fast algorithms (an H200 picked a 9.5 us gemmSN kernel at batch 8).
// GemmLt checks the declared alignment on every call, so a strategy that broke it would fail
// loudly rather than silently change algorithms. W1 / W2 / H / dH / gW1 are our own buffers.
kernels::LtAlignment x_alignment(int features) {
  unsigned a = 16;
  while ((static_cast<unsigned>(features) * sizeof(float)) % a != 0) a /= 2;
  return kernels::LtAlignment{a, 16, 16};
}
// Up to this max_batch every row count gets a cuBLASLt plan at construction (2 heuristic
// queries each, microseconds apiece).
constexpr int kLtPlanAllRowsUpTo = 1024;

std::string fused_off(const MlpConfig& c) {
  if (!c.fused) return "off in the configuration";
  if (c.layers.size() != 3) return "the fused step needs exactly one hidden layer";
  if (c.gemm != kernels::GemmBackend::Cublas) return "the fused step needs the cuBLAS backend";
  return kernels::fused_mlp_unsupported(c.layers[1], c.layers[2]);
}

std::string single_off(const MlpConfig& c) {
  if (!c.fused) return "off in the configuration";
  if (!c.single_launch) return "single-launch step off in the configuration";
  if (c.layers.size() != 3) return "the single-launch step needs exactly one hidden layer";
  if (c.gemm != kernels::GemmBackend::Cublas)
    return "the single-launch step stands in for the cuBLAS backend only";
  if (c.tf32) return "TF32 asks for tensor-core GEMMs; the single-launch step is fp32 only";
  if (std::string why = kernels::step_unsupported(c.layers[0], c.layers[1], c.layers[2]);
      !why.empty())
    return why;
  const long long work = static_cast<long long>(c.max_batch) * c.layers[1];
  if (!c.single_launch_any_size && work > kSingleLaunchMaxWork)
    return "batch × hidden = " + std::to_string(work) + " > " +
           std::to_string(kSingleLaunchMaxWork) +
           ": cuBLASLt is faster there (--fused single forces the single-launch step)";
  return "";
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

  fused_off_reason_ = fused_off(cfg_);
  single_off_reason_ = single_off(cfg_);
  if (single_off_reason_.empty())
    single_off_reason_ = kernels::step_unsupported_here(cfg_.layers[1], cfg_.layers[2]);
  if (single_off_reason_.empty()) {
    step_ = std::make_unique<kernels::FusedStep>(cfg_.layers[0], cfg_.layers[1], cfg_.layers[2],
                                                 cfg_.max_batch);
    partial_ = DeviceBuffer<float>(
        kernels::step_partial_floats(cfg_.max_batch, cfg_.layers[0], cfg_.layers[1]));
    fused_off_reason_.clear();
  } else if (fused_off_reason_.empty()) {
    lt_ = std::make_unique<kernels::GemmLt>(cfg_.tf32, stream_);
    const int F = cfg_.layers[0], Hd = cfg_.layers[1];
    // Plan (choose the algorithms) now: never during a graph capture.
    lt_min_rows_ = cfg_.max_batch <= kLtPlanAllRowsUpTo ? 1 : cfg_.max_batch;
    for (int rows = lt_min_rows_; rows <= cfg_.max_batch; ++rows) {
      lt_->prepare_nn(rows, Hd, F, params_.data() + b_off_[0], kernels::Epilogue::BiasRelu,
                      x_alignment(F));
      lt_->prepare_tn(F, Hd, rows, x_alignment(F));
    }
  }
}

Mlp::~Mlp() = default;

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
  if (b.rows < 0 || b.rows > cfg_.max_batch)
    throw std::invalid_argument("Mlp::train_step: " + std::to_string(b.rows) +
                                " rows (max_batch is " + std::to_string(cfg_.max_batch) + ")");
  if (step_) {
    train_step_single(b, sample_loss, sample_correct);
    return;
  }
  if (lt_) {
    train_step_fused(b, sample_loss, sample_correct);
    return;
  }
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

std::string Mlp::step_kind() const {
  if (step_) return "single-launch";
  if (lt_) return "cublaslt-fused";
  return "layer-by-layer";
}

// The parts of a single-launch step's arguments that training and evaluation share.
kernels::StepArgs Mlp::single_args(int rows) {
  float* P = params_.data();
  kernels::StepArgs a;
  a.rows = rows;
  a.in = cfg_.layers[0];
  a.hidden = cfg_.layers[1];
  a.classes = cfg_.layers[2];
  a.W1 = P + w_off_[0];
  a.b1 = P + b_off_[0];
  a.W2 = P + w_off_[1];
  a.b2 = P + b_off_[1];
  a.H = act_[1].data();
  a.partial = partial_.data();
  return a;
}

// A training step's arguments without the batch (velocities, gradient workspaces, lr).
kernels::StepArgs Mlp::single_train_args(int rows) {
  float* V = velocity_.data();
  kernels::StepArgs a = single_args(rows);
  a.vW1 = V + w_off_[0];
  a.vb1 = V + b_off_[0];
  a.vW2 = V + w_off_[1];
  a.vb2 = V + b_off_[1];
  a.dH = dz_[1].data();
  a.dlogits = dz_[2].data();
  a.lr = cfg_.lr;
  a.momentum = cfg_.momentum;
  a.train = true;
  return a;
}

void Mlp::train_step_single(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  NvtxRange r(Phase::Forward, "step (single launch)");
  kernels::StepArgs a = single_train_args(b.rows);
  a.x_f32 = b.x_f32;
  a.x_u8 = b.x_f32 ? nullptr : b.x_u8;
  a.labels = b.y;
  a.sample_loss = sample_loss + b.first_sample;
  a.sample_correct = sample_correct + b.first_sample;
  a.grad_scale = 1.0f / static_cast<float>(b.rows > 0 ? b.rows : 1);
  step_->run(a, stream_);
}

void Mlp::reserve_steps(int n) {
  if (!step_) throw std::logic_error("Mlp::reserve_steps: only the single-launch step runs several steps per launch");
  if (n < 1) throw std::invalid_argument("Mlp::reserve_steps: n must be >= 1");
  steps_dev_ = DeviceBuffer<kernels::StepBatch>(static_cast<std::size_t>(n));
  steps_pinned_ = PinnedBuffer<kernels::StepBatch>(static_cast<std::size_t>(n));
  steps_host_.clear();
}

namespace {
bool same_batch(const kernels::StepBatch& a, const kernels::StepBatch& b) {
  return a.x == b.x && a.labels == b.labels && a.sample_loss == b.sample_loss &&
         a.sample_correct == b.sample_correct && a.rows == b.rows && a.grad_scale == b.grad_scale;
}
}  // namespace

void Mlp::train_steps(const std::vector<BatchView>& views, float* sample_loss,
                      std::int32_t* sample_correct) {
  if (!step_) throw std::logic_error("Mlp::train_steps: only the single-launch step runs several steps per launch");
  if (views.empty()) return;
  if (views.size() > steps_dev_.size())
    throw std::invalid_argument("Mlp::train_steps: " + std::to_string(views.size()) +
                                " steps, reserve_steps() made room for " +
                                std::to_string(steps_dev_.size()));
  const bool u8 = views.front().x_f32 == nullptr;
  std::vector<kernels::StepBatch> t;
  t.reserve(views.size());
  for (const BatchView& v : views) {
    if ((v.x_f32 == nullptr) != u8)
      throw std::invalid_argument("Mlp::train_steps: every batch of one launch has the same input type");
    t.push_back(step_->batch(u8 ? static_cast<const void*>(v.x_u8) : v.x_f32, u8, v.y,
                             sample_loss + v.first_sample, sample_correct + v.first_sample, v.rows));
  }
  // The table is uploaded when it differs from the one on the device (the first epoch: a
  // strategy hands out the same addresses every epoch).
  bool same = t.size() == steps_host_.size();
  for (std::size_t i = 0; same && i < t.size(); ++i) same = same_batch(t[i], steps_host_[i]);
  if (!same) {
    // The previous upload from the staging buffer finished: every epoch drains the stream.
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy(t.begin(), t.end(), steps_pinned_.data());
    CUDA_CHECK(cudaMemcpyAsync(steps_dev_.data(), steps_pinned_.data(),
                               t.size() * sizeof(kernels::StepBatch), cudaMemcpyHostToDevice, stream_));
    steps_host_ = std::move(t);
  }
  NvtxRange r(Phase::Forward, "steps (one launch)");
  kernels::StepArgs a = single_train_args(cfg_.max_batch);
  if (u8)
    a.x_u8 = views.front().x_u8;
  else
    a.x_f32 = views.front().x_f32;
  step_->run_steps(a, steps_dev_.data(), static_cast<int>(views.size()), stream_);
}

void Mlp::forward_fused(const float* x, int rows) {
  const int F = cfg_.layers[0], Hd = cfg_.layers[1];
  const float* W1 = params_.data() + w_off_[0];
  const float* b1 = params_.data() + b_off_[0];
  if (rows >= lt_min_rows_) {  // planned (rows <= max_batch is checked by the callers)
    lt_->nn(x, W1, act_[1].data(), rows, Hd, F, b1, kernels::Epilogue::BiasRelu, x_alignment(F));
  } else {
    gemm_.nn(x, W1, act_[1].data(), rows, Hd, F, b1, kernels::Epilogue::BiasRelu);
  }
}

void Mlp::train_step_fused(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  const int rows = b.rows;
  const int F = cfg_.layers[0], Hd = cfg_.layers[1], C = cfg_.layers[2];
  float* P = params_.data();
  float* V = velocity_.data();
  float* H = act_[1].data();
  float* dH = dz_[1].data();
  float* dlogits = dz_[2].data();
  float* gW1 = grads_.data() + w_off_[0];
  const float* x = b.x_f32;
  {
    NvtxRange r(Phase::Forward, "forward");
    if (!x) {
      kernels::normalize_u8(b.x_u8, xbuf_.data(), static_cast<std::size_t>(rows) * F, stream_);
      x = xbuf_.data();
    }
    forward_fused(x, rows);
    // Loss, dlogits (with the 1/rows factor of the mean loss) and dH from the old W2.
    kernels::fused_head(H, P + w_off_[1], P + b_off_[1], b.y, dlogits, dH,
                        sample_loss + b.first_sample, sample_correct + b.first_sample, rows, Hd, C,
                        1.0f / static_cast<float>(rows), stream_);
  }
  {
    NvtxRange r(Phase::Backward, "backward");
    if (rows >= lt_min_rows_) {
      lt_->tn(x, dH, gW1, F, Hd, rows, 0.f, x_alignment(F));
    } else {
      gemm_.tn(x, dH, gW1, F, Hd, rows);
    }
  }
  {
    NvtxRange r(Phase::Update, "update");
    kernels::FusedUpdateArgs u;
    u.H = H;
    u.dlogits = dlogits;
    u.dH = dH;
    u.W2 = P + w_off_[1];
    u.b2 = P + b_off_[1];
    u.b1 = P + b_off_[0];
    u.vW2 = V + w_off_[1];
    u.vb2 = V + b_off_[1];
    u.vb1 = V + b_off_[0];
    u.W1 = P + w_off_[0];
    u.gW1 = gW1;
    u.vW1 = V + w_off_[0];
    u.n_w1 = static_cast<std::size_t>(F) * Hd;
    u.rows = rows;
    u.hidden = Hd;
    u.classes = C;
    u.lr = cfg_.lr;
    u.momentum = cfg_.momentum;
    kernels::fused_update(u, stream_);
  }
}

void Mlp::evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                   std::int32_t* sample_correct) {
  if (rows < 0 || rows > cfg_.max_batch)
    throw std::invalid_argument("Mlp::evaluate: " + std::to_string(rows) + " rows (max_batch is " +
                                std::to_string(cfg_.max_batch) + ")");
  if (step_) {
    kernels::StepArgs a = single_args(rows);
    a.x_f32 = x;
    a.labels = y;
    a.sample_loss = sample_loss;
    a.sample_correct = sample_correct;
    a.train = false;
    step_->run(a, stream_);
    return;
  }
  if (lt_) {
    forward_fused(x, rows);
    kernels::fused_head(act_[1].data(), params_.data() + w_off_[1], params_.data() + b_off_[1], y,
                        nullptr, nullptr, sample_loss, sample_correct, rows, cfg_.layers[1],
                        cfg_.layers[2], 1.0f, stream_);
    return;
  }
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
