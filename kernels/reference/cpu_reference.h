// cpu_reference.h: plain C++ references of the MLP's kernels (namespace memstrat::cpu_ref):
// those of the layer-by-layer path (kernels/layerwise/layer_kernels.h), the shared epilogues and
// uint8 normalisation (kernels/common/), the cuBLASLt path's fused kernels
// (kernels/lt_fused/fused_head_update.h), and compare(), the atol + rtol·|ref| checker the
// tests use. Built as its own library (memstrat_cpu_reference), linked by tests and tools only.
// GEMMs and reductions accumulate in double; the elementwise ops use the same float
// expressions as the GPU, so their results are bitwise identical to the kernels'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/epilogue.h"
#include "kernels/lt_fused/fused_head_update.h"

namespace memstrat::cpu_ref {

/// C[M×N] = A[M×K]·B[K×N] (+bias[N]) (ReLU), double accumulation.
void gemm_nn(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
             kernels::Epilogue ep);
/// C[M×N] = A[M×K]·B[N×K]^T, then C = (relu_mask > 0 ? C : 0) when relu_mask != nullptr.
void gemm_nt(const float* A, const float* B, float* C, int M, int N, int K, const float* relu_mask);
/// C[M×N] = A[K×M]^T·B[K×N].
void gemm_tn(const float* A, const float* B, float* C, int M, int N, int K);

/// out[i] = kernels::normalize_pixel(in[i]) (the product expression: bitwise the kernel's).
void normalize_u8(const std::uint8_t* in, float* out, std::size_t n);
/// C[i][j] = C[i][j] + bias[j] (bias may be nullptr), then ReLU (x < 0 ? 0 : x) if relu.
void bias_act(float* C, const float* bias, int M, int N, bool relu);
/// dA[i] = A[i] > 0 ? dA[i] : 0
void relu_backward(float* dA, const float* A, std::size_t n);
/// db[j] = sum_i dZ[i][j] (double accumulation).
void bias_grad(const float* dZ, float* db, int M, int N);
/// Same contract as kernels::softmax_xent, computed in double. Any output may be nullptr.
/// A label outside [0, C) gives loss NaN, correct 0 and no -1 term in the gradient.
void softmax_xent(const float* logits, const std::int32_t* labels, float* dlogits,
                  float* sample_loss, std::int32_t* sample_correct, int M, int C, float grad_scale);
/// Same float fma expressions as the kernel (bitwise identical):
/// momentum == 0: p = fma(-lr, g, p); else v = fma(momentum, v, g), p = fma(-lr, v, p).
void sgd_update(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                float momentum);
/// out[i] = gathered[i] + gathered[count + i] + ... (ranks slots, rank order, float adds left to
/// right): kernels::rank_sum's chain, bitwise. Throws std::invalid_argument unless ranks >= 1.
void rank_sum(const float* gathered, int ranks, std::size_t count, float* out);

/// Result of compare(): element i mismatches when !(|got-ref| <= atol + rtol·|ref|)
/// (so a NaN in `got` always mismatches; NaN vs NaN and equal infinities match).
struct CompareResult {
  std::size_t n = 0;
  std::size_t mismatches = 0;
  double max_abs_err = 0.0;      // over elements where both are finite
  double max_rel_err = 0.0;      // |got-ref| / |ref|, over finite elements with ref != 0
  std::string first_mismatches;  // "  [i] got=... ref=... |err|=... tol=...\n" lines
  bool ok() const { return mismatches == 0; }
};

CompareResult compare(const float* got, const float* ref, std::size_t n, double atol, double rtol,
                      std::size_t max_listed = 10);

/// Mean softmax cross-entropy of a one-hidden-layer ReLU MLP over `rows` samples, every
/// operation in double: the ground truth of the finite-difference gradient checks (CPU and GPU).
/// x[rows×in], w1[in×hidden], b1[hidden], w2[hidden×classes], b2[classes]; labels in [0, classes).
double mlp_mean_xent(const double* x, const std::int32_t* labels, int rows, int in, int hidden,
                     int classes, const double* w1, const double* b1, const double* w2,
                     const double* b2);

// ---- the cuBLASLt fused step (kernels/lt_fused/fused_head_update.h) -----------------------
/// Same contract as kernels::fused_head, composed of the references above: logits =
/// gemm_nn(H, W2, b2, Bias) (double sums, rounded to float), softmax_xent on those logits, and
/// dH = gemm_nt(dlogits, W2, mask = H) from the float dlogits it wrote. Any output may be
/// nullptr (dH is skipped without dlogits).
void fused_head(const float* H, const float* W2, const float* b2, const std::int32_t* labels,
                float* dlogits, float* dH, float* sample_loss, std::int32_t* sample_correct,
                int rows, int hidden, int classes, float grad_scale);
/// Same contract as kernels::fused_update: dW2 = gemm_tn(H, dlogits), db2 = bias_grad(dlogits),
/// db1 = bias_grad(dH) (double sums), then sgd_update of W2, b2, b1 and of W1 from gW1 (the
/// kernel's float fma expressions).
void fused_update(const kernels::FusedUpdateArgs& a);

}  // namespace memstrat::cpu_ref
