// pixel_norm.h: the uint8 -> float pixel normalisation v / 255 of the single-launch step
// (kernels/fused_step.cu), for host and device, with neither a division nor an int -> float
// conversion. Both matter on the GPU: the step normalises every pixel it loads (phases A and C,
// once per lane that reads it), and an I2F runs at 16 per clock per SM on cc 9.0 (an FADD or
// FFMA at 128): at batch 256 the conversions alone were ~9 µs of the step (ncu, H200).
//
//   m = as_float(0x4B000000 | v) = 2^23 + v exactly, so v = m - 2^23 exactly;
//   x = fmaf(v, hi, v * lo) with hi = fl(1/255), lo = fl(1/255 - hi).
// x equals static_cast<float>(v) / 255.0f (normalize_u8 and cpu_ref::normalize_pixel) bit for
// bit for all 256 values: tests/cpu/test_step_plan.cpp checks every value at every byte
// position, and the GPU tests check uint8 and float input give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>

namespace memstrat::kernels {

inline constexpr float kPixelHi = 0x1.010102p-8f;   // fl(1/255)
inline constexpr float kPixelLo = -0x1.fdfdfep-33f; // fl(1/255 - kPixelHi)

/// Byte `byte` (0..3, little-endian) of `word`, normalised to [0, 1] exactly as v / 255.0f.
__host__ __device__ __forceinline__ float pixel_norm(unsigned word, int byte) {
#ifdef __CUDA_ARCH__
  // One PRMT: bytes [v, 0, 0, 0x4B] from word and 0x4B000000.
  const float m = __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | static_cast<unsigned>(byte)));
#else
  const unsigned bits = 0x4B000000u | ((word >> (8 * byte)) & 0xFFu);
  float m;
  std::memcpy(&m, &bits, sizeof m);
#endif
  const float v = m - 8388608.0f;  // 2^23
  return fmaf(v, kPixelHi, v * kPixelLo);
}

}  // namespace memstrat::kernels
