// lt_fused_step.cu: LtFusedStep (see lt_fused_step.h). Per batch of `rows` rows:
//   [u8 only] normalize_u8                       X = x_u8 / 255                (1 launch)
//   GEMM   H = relu(X·W1 + b1)                   cuBLASLt, RELU_BIAS epilogue  (1 launch*)
//   fused_head: logits, loss, correct, dlogits, dH = (dlogits·W2^T) ⊙ 1[H > 0] (1 launch)
//   GEMM   gW1 = X^T·dH                          cuBLASLt                      (1 launch*)
//   fused_update: dW2, db2, db1 and the momentum SGD step of W2, b2, b1, W1   (1 launch)
// (* plus a split-K reduction kernel if the algorithm cuBLASLt picked uses one.)
// The cuBLASLt algorithms are chosen in the constructor (cuBLASLt's heuristic query must not
// run inside a CUDA-graph capture) for every row count 1..max_batch when max_batch <=
// kLtPlanAllRowsUpTo (else for max_batch only), with the batch X declared at the alignment
// every strategy guarantees (x_alignment below), so one algorithm per row count serves every
// strategy's pointer (device, offset into a dataset, mapped host, managed). A row count
// without a plan (only possible when max_batch > kLtPlanAllRowsUpTo: the partial last batch)
// runs the two GEMMs on classic cuBLAS (cublasSgemm + bias_act, safe inside a capture). Which
// route a step takes depends only on rows and max_batch, so results never depend on timing,
// capture or pointers.
#include "experiments/core/lt_fused_step.h"

#include <cstddef>

#include "common/nvtx.h"
#include "kernels/common/pixel_norm.h"
#include "kernels/lt_fused/fused_head_update.h"

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

}  // namespace

LtFusedStep::LtFusedStep(const MlpConfig& cfg, const MlpBuffers& buf, const kernels::Gemm& gemm,
                         cudaStream_t stream)
    : cfg_(cfg), buf_(buf), gemm_(gemm), stream_(stream), lt_(cfg.tf32, stream) {
  const int F = cfg_.layers[0], Hd = cfg_.layers[1];
  // Plan (choose the algorithms) now: never during a graph capture.
  lt_min_rows_ = cfg_.max_batch <= kLtPlanAllRowsUpTo ? 1 : cfg_.max_batch;
  for (int rows = lt_min_rows_; rows <= cfg_.max_batch; ++rows) {
    lt_.prepare_nn(rows, Hd, F, buf_.b(0), kernels::Epilogue::BiasRelu, x_alignment(F));
    lt_.prepare_tn(F, Hd, rows, x_alignment(F));
  }
}

void LtFusedStep::forward(const float* x, int rows) {
  const int F = cfg_.layers[0], Hd = cfg_.layers[1];
  if (rows >= lt_min_rows_) {  // planned (rows <= max_batch is checked by the Mlp)
    lt_.nn(x, buf_.w(0), buf_.act[1], rows, Hd, F, buf_.b(0), kernels::Epilogue::BiasRelu,
           x_alignment(F));
  } else {
    gemm_.nn(x, buf_.w(0), buf_.act[1], rows, Hd, F, buf_.b(0), kernels::Epilogue::BiasRelu);
  }
}

void LtFusedStep::train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) {
  const int rows = b.rows;
  const int F = cfg_.layers[0], Hd = cfg_.layers[1], C = cfg_.layers[2];
  float* V = buf_.velocity;
  float* H = buf_.act[1];
  float* dH = buf_.dz[1];
  float* dlogits = buf_.dz[2];
  float* gW1 = buf_.grads + buf_.w_off[0];
  const float* x = b.x_f32;
  {
    NvtxRange r(Phase::Forward, "forward");
    if (!x) {
      kernels::normalize_u8(b.x_u8, buf_.x, static_cast<std::size_t>(rows) * F, stream_);
      x = buf_.x;
    }
    forward(x, rows);
    // Loss, dlogits (with the 1/rows factor of the mean loss) and dH from the old W2.
    kernels::fused_head(H, buf_.w(1), buf_.b(1), b.y, dlogits, dH, sample_loss + b.first_sample,
                        sample_correct + b.first_sample, rows, Hd, C,
                        1.0f / static_cast<float>(rows), stream_);
  }
  {
    NvtxRange r(Phase::Backward, "backward");
    if (rows >= lt_min_rows_) {
      lt_.tn(x, dH, gW1, F, Hd, rows, 0.f, x_alignment(F));
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
    u.W2 = buf_.w(1);
    u.b2 = buf_.b(1);
    u.b1 = buf_.b(0);
    u.vW2 = V + buf_.w_off[1];
    u.vb2 = V + buf_.b_off[1];
    u.vb1 = V + buf_.b_off[0];
    u.W1 = buf_.w(0);
    u.gW1 = gW1;
    u.vW1 = V + buf_.w_off[0];
    u.n_w1 = static_cast<std::size_t>(F) * Hd;
    u.rows = rows;
    u.hidden = Hd;
    u.classes = C;
    u.lr = cfg_.lr;
    u.momentum = cfg_.momentum;
    kernels::fused_update(u, stream_);
  }
}

void LtFusedStep::evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                           std::int32_t* sample_correct) {
  forward(x, rows);
  kernels::fused_head(buf_.act[1], buf_.w(1), buf_.b(1), y, nullptr, nullptr, sample_loss,
                      sample_correct, rows, cfg_.layers[1], cfg_.layers[2], 1.0f, stream_);
}

}  // namespace memstrat
