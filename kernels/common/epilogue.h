// epilogue.h: what a GEMM does after its product (Epilogue), and the two elementwise kernels
// that apply an epilogue after a GEMM that does not fuse it: bias_act (+ bias, ReLU; after a
// cuBLAS forward GEMM, in Gemm and in GemmLt's unfused fallback) and relu_backward (the ReLU
// mask after Gemm's cuBLAS nt GEMM). Row-major; each launcher takes an explicit stream and
// checks the launch. CPU references: cpu_ref::bias_act / cpu_ref::relu_backward.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace memstrat::kernels {

/// What the GEMM does after the product: nothing, + bias[N] per row, or + bias then ReLU.
enum class Epilogue { None, Bias, BiasRelu };

/// C[M×N] += bias[N] per row, then ReLU if relu (the cuBLAS path's epilogue)
void bias_act(float* C, const float* bias, int M, int N, bool relu, cudaStream_t s);
/// dA[i] *= (A[i] > 0)
void relu_backward(float* dA, const float* A, std::size_t n, cudaStream_t s);

}  // namespace memstrat::kernels
