// layer_kernels.h: the kernels of the layer-by-layer step (Mlp's path for any depth and either
// GEMM backend), one op per file in kernels/layerwise/:
//   gemm_tiled.cu    gemm_nn_tiled / gemm_nt_tiled / gemm_tn_tiled, the custom SGEMMs of the
//                    tiled backend (Gemm with GemmBackend::Tiled, kernels/common/gemm.h)
//   bias_grad.cu     bias_grad
//   softmax_xent.cu  softmax_xent
//   sgd_update.cu    sgd_update over the flat parameter buffer
// The path also uses kernels/common/: normalize_u8 (pixel_norm.h), Gemm and the epilogues
// bias_act / relu_backward (epilogue.h). Row-major everywhere. Each launcher takes an explicit
// stream and checks the launch (CUDA_CHECK_LAST). CPU references: kernels/reference/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/epilogue.h"

namespace memstrat::kernels {

// ---- custom tiled GEMMs (gemm_tiled.cu) -------------------------------------------------
/// C[M×N] = A[M×K] · B[K×N]  (+ bias) (ReLU)                      forward: Z = X·W + b
void gemm_nn_tiled(const float* A, const float* B, float* C, int M, int N, int K,
                   const float* bias, Epilogue ep, cudaStream_t s);
/// C[M×N] = A[M×K] · B[N×K]^T, then, if relu_mask != nullptr, C *= (relu_mask[M×N] > 0)
///                                                          backward: dA = dZ·W^T ⊙ 1[A>0]
void gemm_nt_tiled(const float* A, const float* B, float* C, int M, int N, int K,
                   const float* relu_mask, cudaStream_t s);
/// C[M×N] = A[K×M]^T · B[K×N]                                    backward: dW = X^T·dZ
void gemm_tn_tiled(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s);

// ---- reductions and the update -----------------------------------------------------------
/// db[j] = sum_i dZ[i][j], fixed summation order (deterministic)
void bias_grad(const float* dZ, float* db, int M, int N, cudaStream_t s);
/// Row-wise softmax + cross-entropy. For every row i < M:
///   sample_loss[i] = -log softmax(logits[i])[labels[i]]
///   sample_correct[i] = argmax(logits[i]) == labels[i]   (first maximum wins)
///   dlogits[i][j] = (softmax_j - 1[j == label]) * grad_scale  (grad_scale = 1/batch rows)
/// dlogits may be nullptr (evaluation).
void softmax_xent(const float* logits, const std::int32_t* labels, float* dlogits,
                  float* sample_loss, std::int32_t* sample_correct, int M, int C,
                  float grad_scale, cudaStream_t s);
/// SGD over one flat parameter buffer. momentum == 0: p -= lr*g.
/// momentum > 0: v = momentum*v + g; p -= lr*v.
void sgd_update(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                float momentum, cudaStream_t s);

}  // namespace memstrat::kernels
