// elementwise.cu: normalize_u8, bias_act, relu_backward, sgd_update (see kernels.h).
//
// Kernel versions in this file (all grid-stride):
//   normalize_u8_kernel    scalar, any alignment
//   normalize_u8_x4_kernel uchar4 -> float4, when in is 4-byte and out 16-byte aligned
//   bias_act_kernel        scalar over the flat M×N index
//   relu_backward_kernel   scalar, any alignment
//   relu_backward_x4_kernel float4, when both pointers are 16-byte aligned
//   sgd_update_kernel      scalar, any alignment
//   sgd_update_x4_kernel   float4, when every pointer used is 16-byte aligned
//
// Every element is computed by the same float expression in the scalar and the x4 kernels,
// so choosing a path by pointer alignment never changes a result (no reductions here).
// The expressions are the ones in kernels/cpu_reference.cpp, so results are bitwise equal
// to the CPU reference (sgd uses explicit fmaf on both sides).
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/kernels.h"

namespace memstrat::kernels {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // grid-stride beyond this

unsigned blocks_for(std::size_t work) {
  return static_cast<unsigned>(std::min<std::size_t>((work + kThreads - 1) / kThreads, kMaxBlocks));
}

bool aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// Same expression as cpu_ref::normalize_pixel.
__device__ __forceinline__ float normalize_one(std::uint8_t v) {
  return static_cast<float>(v) / 255.0f;
}
__device__ __forceinline__ float relu_grad_one(float d, float a) { return a > 0.f ? d : 0.f; }

// ---- normalize_u8 ------------------------------------------------------------------------
__global__ void normalize_u8_kernel(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                    std::size_t n) {
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) out[i] = normalize_one(in[i]);
}

__global__ void normalize_u8_x4_kernel(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                       std::size_t n) {
  const std::size_t n4 = n / 4;
  const uchar4* in4 = reinterpret_cast<const uchar4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (std::size_t i = thread_index(); i < n4; i += thread_stride()) {
    const uchar4 v = in4[i];
    out4[i] =
        make_float4(normalize_one(v.x), normalize_one(v.y), normalize_one(v.z), normalize_one(v.w));
  }
  for (std::size_t i = n4 * 4 + thread_index(); i < n; i += thread_stride())
    out[i] = normalize_one(in[i]);
}

// ---- bias_act ----------------------------------------------------------------------------
__global__ void bias_act_kernel(float* C, const float* __restrict__ bias, std::size_t total, int N,
                                bool relu) {
  for (std::size_t i = thread_index(); i < total; i += thread_stride()) {
    float v = C[i];
    if (bias != nullptr) v = v + bias[i % static_cast<std::size_t>(N)];
    if (relu) v = v < 0.f ? 0.f : v;
    C[i] = v;
  }
}

// ---- relu_backward -----------------------------------------------------------------------
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

// ---- sgd_update --------------------------------------------------------------------------
// One parameter. momentum == 0: p -= lr*g. momentum > 0: v = momentum*v + g; p -= lr*v.
// Explicit fmaf so that the CPU reference (std::fma) is bitwise identical.
__device__ __forceinline__ void sgd_one(float& p, float g, float* v, float lr, float momentum) {
  if (v != nullptr) {
    *v = fmaf(momentum, *v, g);
    p = fmaf(-lr, *v, p);
  } else {
    p = fmaf(-lr, g, p);
  }
}

// velocity == nullptr means plain SGD (momentum == 0).
__global__ void sgd_update_kernel(float* __restrict__ p, const float* __restrict__ g,
                                  float* __restrict__ vel, std::size_t n, float lr,
                                  float momentum) {
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) {
    float pi = p[i];
    if (vel != nullptr) {
      float vi = vel[i];
      sgd_one(pi, g[i], &vi, lr, momentum);
      vel[i] = vi;
    } else {
      sgd_one(pi, g[i], nullptr, lr, momentum);
    }
    p[i] = pi;
  }
}

__global__ void sgd_update_x4_kernel(float* __restrict__ p, const float* __restrict__ g,
                                     float* __restrict__ vel, std::size_t n, float lr,
                                     float momentum) {
  const std::size_t n4 = n / 4;
  float4* p4 = reinterpret_cast<float4*>(p);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  float4* v4 = reinterpret_cast<float4*>(vel);
  for (std::size_t i = thread_index(); i < n4; i += thread_stride()) {
    float4 pv = p4[i];
    const float4 gv = g4[i];
    if (vel != nullptr) {
      float4 vv = v4[i];
      sgd_one(pv.x, gv.x, &vv.x, lr, momentum);
      sgd_one(pv.y, gv.y, &vv.y, lr, momentum);
      sgd_one(pv.z, gv.z, &vv.z, lr, momentum);
      sgd_one(pv.w, gv.w, &vv.w, lr, momentum);
      v4[i] = vv;
    } else {
      sgd_one(pv.x, gv.x, nullptr, lr, momentum);
      sgd_one(pv.y, gv.y, nullptr, lr, momentum);
      sgd_one(pv.z, gv.z, nullptr, lr, momentum);
      sgd_one(pv.w, gv.w, nullptr, lr, momentum);
    }
    p4[i] = pv;
  }
  for (std::size_t i = n4 * 4 + thread_index(); i < n; i += thread_stride()) {
    float pi = p[i];
    if (vel != nullptr) {
      float vi = vel[i];
      sgd_one(pi, g[i], &vi, lr, momentum);
      vel[i] = vi;
    } else {
      sgd_one(pi, g[i], nullptr, lr, momentum);
    }
    p[i] = pi;
  }
}

}  // namespace

void normalize_u8(const std::uint8_t* in, float* out, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  if (aligned(in, 4) && aligned(out, 16)) {
    normalize_u8_x4_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(in, out, n);
  } else {
    normalize_u8_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  }
  CUDA_CHECK_LAST();
}

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

void sgd_update(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                float momentum, cudaStream_t s) {
  if (!(momentum >= 0.f)) throw std::invalid_argument("sgd_update: momentum must be >= 0");
  if (n == 0) return;
  float* vel = momentum > 0.f ? velocity : nullptr;
  if (momentum > 0.f && velocity == nullptr)
    throw std::invalid_argument("sgd_update: momentum > 0 needs a velocity buffer");
  if (aligned(params, 16) && aligned(grads, 16) && (vel == nullptr || aligned(vel, 16))) {
    sgd_update_x4_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(params, grads, vel, n, lr,
                                                                      momentum);
  } else {
    sgd_update_kernel<<<blocks_for(n), kThreads, 0, s>>>(params, grads, vel, n, lr, momentum);
  }
  CUDA_CHECK_LAST();
}

}  // namespace memstrat::kernels
