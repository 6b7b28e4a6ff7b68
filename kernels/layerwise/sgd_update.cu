// sgd_update.cu: sgd_update (see layer_kernels.h), the layer-by-layer path's SGD step over the
// whole flat parameter buffer.
//
// Kernel versions in this file (both grid-stride):
//   sgd_update_kernel     scalar, any alignment
//   sgd_update_x4_kernel  float4, when every pointer used is 16-byte aligned
// Every parameter is updated by the same fmaf expressions in both (those of cpu_ref::sgd_update
// and of common/sgd_step.cuh), so choosing by alignment never changes a result and the CPU
// reference is bitwise equal.
#include <cstddef>
#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/common/grid_stride.cuh"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat::kernels {
namespace {

using namespace grid_stride;  // NOLINT(build/namespaces): this file's launch shape

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
