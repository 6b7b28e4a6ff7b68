// fused_head_update.h: the cuBLASLt fused step of the one-hidden-layer MLP (Mlp's
// "cublaslt-fused" path: 4 launches per step, 5 for a uint8 batch). Files of kernels/lt_fused/:
//   cublaslt_gemm.{h,cu}      GemmLt: the two GEMMs (H = relu(X·W1 + b1) with a fused epilogue,
//                             gW1 = X^T·dH), one cuBLASLt plan per problem chosen up front
//   fused_head_update.{h,cu}  the path's own kernels, declared below
// The path also uses kernels/common/: normalize_u8 (a uint8 batch), sgd_step.cuh, and Gemm
// (cuBLAS) for row counts without a cuBLASLt plan. The order of the launches is in
// experiments/core/lt_fused_step.cu.
//
// fused_head (logits + softmax cross-entropy + dlogits + dH in one pass over a row) and
// fused_update (the small layer's gradients, every bias gradient and the SGD step of all
// parameters in one launch). Row-major everywhere; each launcher takes an explicit stream and
// checks the launch. CPU references: cpu_ref::fused_head / cpu_ref::fused_update.
//
// Shapes: H [rows × hidden] (post-ReLU hidden activations), W2 [hidden × classes], b2 [classes],
// W1 [in × hidden], b1 [hidden]. Supported: 1 <= classes <= kFusedMaxClasses and
// classes·(hidden + 1) floats of W2 fit in 48 KiB of shared memory (see fused_mlp_unsupported).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace memstrat::kernels {

/// Most classes the fused kernels take (per-lane register arrays are sized by it).
inline constexpr int kFusedMaxClasses = 16;

/// "" when fused_head / fused_update take this shape, else the reason they don't.
std::string fused_mlp_unsupported(int hidden, int classes);

/// One warp per row r < rows (W2 staged in shared memory, transposed):
///  * logits = H[r]·W2 + b2 (fp32; lane l sums j = l, l+32, ...; a fixed xor-butterfly adds
///    the lanes)
///  * sample_loss[r], sample_correct[r]: as softmax_xent (first maximum wins; a label outside
///    [0, classes) gives NaN and 0)
///  * dlogits[r][c] = (softmax_c - 1[c == label])·grad_scale (skipped if dlogits == nullptr)
///  * dH[r][j] = H[r][j] > 0 ? sum_c dlogits[r][c]·W2[j][c] : 0, c = 0, 1, ... in order
///    (skipped if dlogits or dH == nullptr)
/// sample_loss / sample_correct may be nullptr. rows == 0 is a no-op.
void fused_head(const float* H, const float* W2, const float* b2, const std::int32_t* labels,
                float* dlogits, float* dH, float* sample_loss, std::int32_t* sample_correct,
                int rows, int hidden, int classes, float grad_scale, cudaStream_t s);

/// Everything fused_update reads and writes. Velocities may be nullptr when momentum == 0.
struct FusedUpdateArgs {
  const float* H = nullptr;        // [rows × hidden]
  const float* dlogits = nullptr;  // [rows × classes]
  const float* dH = nullptr;       // [rows × hidden]
  float* W2 = nullptr;             // [hidden × classes], updated in place
  float* b2 = nullptr;             // [classes]
  float* b1 = nullptr;             // [hidden]
  float* vW2 = nullptr;            // velocities of W2, b2, b1
  float* vb2 = nullptr;
  float* vb1 = nullptr;
  float* W1 = nullptr;         // [n_w1]; nullptr: no W1 step
  const float* gW1 = nullptr;  // its gradient (written by the dW1 GEMM)
  float* vW1 = nullptr;        // its velocity
  std::size_t n_w1 = 0;
  int rows = 0, hidden = 0, classes = 0;
  float lr = 0.f, momentum = 0.f;
};

/// In one launch (deterministic: fixed summation orders that depend only on rows, no atomics):
///  * dW2[j][c] = sum_r H[r][j]·dlogits[r][c], db2[c] = sum_r dlogits[r][c] and
///    db1[j] = sum_r dH[r][j]: thread (j, y) sums rows y, y+16, y+32, ... in order, then a
///    fixed tree adds the 16 partials;
///  * for (p, g, v) in (W2, dW2, vW2), (b2, db2, vb2), (b1, db1, vb1), (W1, gW1, vW1): the
///    sgd_update step, bitwise the same expressions: momentum > 0: v = fma(momentum, v, g),
///    p = fma(-lr, v, p); else p = fma(-lr, g, p).
/// rows == 0 gives zero gradients for W2, b2, b1.
void fused_update(const FusedUpdateArgs& a, cudaStream_t s);

}  // namespace memstrat::kernels
