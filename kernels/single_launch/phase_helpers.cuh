// phase_helpers.cuh: device helpers every phase of the single-launch step uses: the loads of X
// (float, or uint8 normalised on load) and of the launch's own buffers, float4 components, and
// the profiling stamp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/pixel_norm.h"
#include "kernels/single_launch/layout.h"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat::kernels::single_launch {
namespace {  // step_launcher.cu's translation unit only (internal linkage, as the kernels)

constexpr unsigned kFull = 0xffffffffu;

// ---- loads ---------------------------------------------------------------------------------
// Every global load in the hot loops is unconditional (indices are clamped into the buffer,
// and what a clamped load brings is never stored): a load under a branch makes ptxas wait for
// it at the join, which serialised the loads and cost 3-5x (measured with step_bench).
//
// X is never written during a launch: the read-only path is safe for it. A uint8 X is loaded
// four pixels to a 32-bit word and normalised with pixel_norm (kernels/common/pixel_norm.h: the
// bits of v / 255.0f without a division or an int -> float conversion).
template <typename XT>
struct XLoad;
template <>
struct XLoad<float> {
  using Raw = float4;
  static __device__ __forceinline__ Raw load(const float* p) {
    return __ldg(reinterpret_cast<const float4*>(p));
  }
  static __device__ __forceinline__ float4 value(const Raw& r) { return r; }
};
template <>
struct XLoad<std::uint8_t> {
  using Raw = unsigned;  // 4 pixels
  static __device__ __forceinline__ Raw load(const std::uint8_t* p) {
    return __ldg(reinterpret_cast<const unsigned*>(p));
  }
  static __device__ __forceinline__ float4 value(const Raw& r) {
    return make_float4(pixel_norm(r, 0), pixel_norm(r, 1), pixel_norm(r, 2), pixel_norm(r, 3));
  }
};
// Buffers written by this kernel: plain (coherent) loads.
__device__ __forceinline__ float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ float comp(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ float& comp(float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <typename XT>
__device__ __forceinline__ const XT* x_of(const StepArgs& a);
template <>
__device__ __forceinline__ const float* x_of<float>(const StepArgs& a) {
  return a.x_f32;
}
template <>
__device__ __forceinline__ const std::uint8_t* x_of<std::uint8_t>(const StepArgs& a) {
  return a.x_u8;
}

// Profiling (StepArgs::stamps): block blockIdx.x passed point `point` (a StepStamp) now.
__device__ __forceinline__ void stamp(const StepArgs& a, int point) {
  if (a.stamps == nullptr) return;  // grid-uniform
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    a.stamps[static_cast<std::size_t>(point) * gridDim.x + blockIdx.x] = t;
  }
}

}  // namespace
}  // namespace memstrat::kernels::single_launch
