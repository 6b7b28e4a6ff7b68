// normalize_u8.cu: normalize_u8 (see pixel_norm.h), the uint8 -> float batch conversion of the
// layer-by-layer and cuBLASLt paths.
//
// Kernel versions in this file (both grid-stride):
//   normalize_u8_kernel    scalar, any alignment
//   normalize_u8_x4_kernel uchar4 -> float4, when in is 4-byte and out 16-byte aligned
// Every pixel goes through normalize_pixel in both, so the choice by alignment never changes a
// result, and the host (normalize_pixel) gets the same bits.
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/common/grid_stride.cuh"
#include "kernels/common/pixel_norm.h"

namespace memstrat::kernels {
namespace {

using namespace grid_stride;  // NOLINT(build/namespaces): this file's launch shape

__global__ void normalize_u8_kernel(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                    std::size_t n) {
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) out[i] = normalize_pixel(in[i]);
}

__global__ void normalize_u8_x4_kernel(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                       std::size_t n) {
  const std::size_t n4 = n / 4;
  const uchar4* in4 = reinterpret_cast<const uchar4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (std::size_t i = thread_index(); i < n4; i += thread_stride()) {
    const uchar4 v = in4[i];
    out4[i] =
        make_float4(normalize_pixel(v.x), normalize_pixel(v.y), normalize_pixel(v.z), normalize_pixel(v.w));
  }
  for (std::size_t i = n4 * 4 + thread_index(); i < n; i += thread_stride())
    out[i] = normalize_pixel(in[i]);
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

}  // namespace memstrat::kernels
