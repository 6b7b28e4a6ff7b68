// pixel_norm.h: the uint8 -> float pixel normalisation v / 255, the one expression every path
// and the host share (bitwise), in its three forms:
//  * normalize_pixel(v): static_cast<float>(v) / 255.0f, on host and device. The host uses it
//    for float batches (memory_strategies/epoch_data.cpp) and the test set (Trainer); the
//    normalize_u8 kernels use it on the device; so a uint8 batch normalised on the GPU and a
//    float batch normalised on the host carry the same bits.
//  * normalize_u8(in, out, n, s): that expression over a buffer (normalize_u8.cu; the
//    layer-by-layer and cuBLASLt paths' first launch for a uint8 batch).
//  * pixel_norm(word, byte): the same bits without a division or an int -> float conversion,
//    for the single-launch step (single_launch/), which normalises every pixel it loads
//    (phases A and C, once per lane that reads it). Both matter on the GPU: an I2F runs at 16
//    per clock per SM on cc 9.0 (an FADD or FFMA at 128): at batch 256 the conversions alone
//    were ~9 µs of the step (ncu, H200).
//
//      m = as_float(0x4B000000 | v) = 2^23 + v exactly, so v = m - 2^23 exactly;
//      x = fmaf(v, hi, v * lo) with hi = fl(1/255), lo = fl(1/255 - hi).
//    x equals normalize_pixel(v) bit for bit for all 256 values: tests/cpu/test_step_plan.cpp
//    checks every value at every byte position, and the GPU tests check uint8 and float input
//    give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace memstrat::kernels {

/// u8 pixel -> [0, 1]: the reference expression (host and device, bitwise the same).
__host__ __device__ inline float normalize_pixel(std::uint8_t v) { return static_cast<float>(v) / 255.0f; }

/// out[i] = normalize_pixel(in[i]) for i < n.
void normalize_u8(const std::uint8_t* in, float* out, std::size_t n, cudaStream_t s);

inline constexpr float kPixelHi = 0x1.010102p-8f;   // fl(1/255)
inline constexpr float kPixelLo = -0x1.fdfdfep-33f; // fl(1/255 - kPixelHi)

/// Byte `byte` (0..3, little-endian) of `word`, normalised to [0, 1] exactly as normalize_pixel.
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
