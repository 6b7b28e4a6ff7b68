// epilogue.cu: bias_act and relu_backward (see epilogue.h).
//
// Kernel versions in this file (all grid-stride):
//   bias_act_kernel          scalar over the flat M×N index
//   relu_backward_kernel     scalar, any alignment
//   relu_backward_x4_kernel  float4, when both pointers are 16-byte aligned
// The scalar and float4 versions compute every element with the same expression, so choosing
// by alignment never changes a result; the expressions are those of cpu_ref::bias_act /
// cpu_ref::relu_backward (bitwise equal).
#include <cstddef>
#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/common/epilogue.h"
#include "kernels/common/grid_stride.cuh"

namespace memstrat::kernels {
namespace {

using namespace grid_stride;  // NOLINT(build/namespaces): this file's launch shape

__device__ __forceinline__ float relu_grad_one(float d, float a) { return a > 0.f ? d : 0.f; }

__global__ void bias_act_kernel(float* C, const float* __restrict__ bias, std::size_t total, int N,
                                bool relu) {
  for (std::size_t i = thread_index(); i < total; i += thread_stride()) {
    float v = C[i];
    if (bias != nullptr) v = v + bias[i % static_cast<std::size_t>(N)];
    if (relu) v = v < 0.f ? 0.f : v;
    C[i] = v;
  }
}

__global__ void relu_backward_kernel(float* dA, const float* A, std::size_t n) {
  for (std::size_t i = thread_index(); i < n; i += thread_stride())
    dA[i] = relu_grad_one(dA[i], A[i]);
}

__global__ void relu_backward_x4_kernel(float* dA, const float* A, std::size_t n) {
  const std::size_t n4 = n / 4;
  float4* d4 = reinterpret_cast<float4*>(dA);
  const float4* a4 = reinterpret_cast<const float4*>(A);
  for (std::size_t i = thread_index(); i < n4; i += thread_stride()) {
    float4 d = d4[i];
    const float4 a = a4[i];
    d.x = relu_grad_one(d.x, a.x);
    d.y = relu_grad_one(d.y, a.y);
    d.z = relu_grad_one(d.z, a.z);
    d.w = relu_grad_one(d.w, a.w);
    d4[i] = d;
  }
  for (std::size_t i = n4 * 4 + thread_index(); i < n; i += thread_stride())
    dA[i] = relu_grad_one(dA[i], A[i]);
}

}  // namespace

void bias_act(float* C, const float* bias, int M, int N, bool relu, cudaStream_t s) {
  if (M < 0 || N < 0) throw std::invalid_argument("bias_act: negative matrix dimension");
  if (M == 0 || N == 0 || (bias == nullptr && !relu)) return;
  const std::size_t total = static_cast<std::size_t>(M) * N;
  bias_act_kernel<<<blocks_for(total), kThreads, 0, s>>>(C, bias, total, N, relu);
  CUDA_CHECK_LAST();
}

void relu_backward(float* dA, const float* A, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  if (aligned(dA, 16) && aligned(A, 16)) {
    relu_backward_x4_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(dA, A, n);
  } else {
    relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dA, A, n);
  }
  CUDA_CHECK_LAST();
}

}  // namespace memstrat::kernels
