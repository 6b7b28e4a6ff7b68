// augment_math.h: the arithmetic of the augmentations (augment.h), one source for the host and the
// GPU (MEMSTRAT_HD): a sample's draws (augment_stream, light_shift, heavy_params), the inverse
// map of `heavy` (warp_map) and one output pixel of each kind (warp_sample, shift_pixel).
// augment.cpp builds the host functions of augment.h from it; augment_gpu.cu builds the kernel.
//
// Bitwise the same on both sides only under these rules, which the build enforces for the two
// files that include this header (CMakeLists.txt):
//  * no floating-point contraction: augment.cpp with -ffp-contract=off, augment_gpu.cu with
//    -fmad=false (device) and -Xcompiler=-ffp-contract=off (its host side); an FMA rounds once
//    where the numpy reference (memstrat_stream.py) rounds twice;
//  * IEEE float32 division and no flush of denormals on the device (-prec-div=true, -ftz=false;
//    never -use_fast_math); floorf and the int <-> float conversions are exact on both sides;
//  * the operation order written below; no device intrinsic (__fdividef, __fmul_rn ...).
// Everything sits in an unnamed namespace: each including file compiles its own copy under its
// own flags, so the linker can never hand augment.cpp a copy built with contraction.
// Include it only from files built under these rules.
#pragma once

#include <cmath>
#include <cstdint>

#include "memory_strategies/augment.h"  // AugmentKey, AffineParams, Shift
#include "memory_strategies/hd.h"
#include "memory_strategies/splitmix64.h"

namespace memstrat::augment_math {
namespace {

// Draw ranges. tan(7.5°) bounds t = tan(θ/2) for |θ| <= 15°; tan(10°) is a 10° shear.
constexpr float kHalfTanMax = 0.131652497587395853f;
constexpr float kScaleMin = 0.9f, kScaleMax = 1.1f;
constexpr float kShearMax = 0.176326980708464973f;
constexpr float kShiftMax = 2.0f;

/// Uniform in [lo, hi) from the top 24 bits of r: exact in float32 up to the final two roundings.
MEMSTRAT_HD inline float uniform(std::uint64_t r, float lo, float hi) {
  const float u = static_cast<float>(r >> 40) * 0x1p-24f;
  return lo + (hi - lo) * u;
}

/// The splitmix64 state a sample's draws start from (memstrat::augment_stream).
MEMSTRAT_HD inline std::uint64_t augment_stream(std::uint64_t seed, int epoch, std::int64_t index) {
  const std::uint64_t epoch_seed =
      seed ^ (0xA5A5A5A5ull + static_cast<std::uint64_t>(epoch) * 0x9E37ull);
  return epoch_seed + static_cast<std::uint64_t>(index) * 0xD1B54A32D192ED03ull;
}

/// memstrat::light_shift.
MEMSTRAT_HD inline Shift light_shift(std::uint64_t seed, int epoch, std::int64_t index) {
  std::uint64_t st = augment_stream(seed, epoch, index);
  const std::uint64_t r = splitmix64(st);
  return {static_cast<int>(r % 5) - 2, static_cast<int>((r / 5) % 5) - 2};
}

/// memstrat::heavy_params.
MEMSTRAT_HD inline AffineParams heavy_params(std::uint64_t seed, int epoch, std::int64_t index) {
  std::uint64_t st = augment_stream(seed, epoch, index);
  AffineParams p;
  p.half_tan = uniform(splitmix64(st), -kHalfTanMax, kHalfTanMax);
  p.scale = uniform(splitmix64(st), kScaleMin, kScaleMax);
  p.shear = uniform(splitmix64(st), -kShearMax, kShearMax);
  p.tx = uniform(splitmix64(st), -kShiftMax, kShiftMax);
  p.ty = uniform(splitmix64(st), -kShiftMax, kShiftMax);
  return p;
}

/// The inverse map of `heavy` for one sample (AffineParams): A and the centre, with the
/// translation kept apart so that (u, v) below are computed exactly as the reference does.
struct WarpMap {
  float a00, a01, a10, a11;
  float cx, cy;
  float tx, ty;
};

MEMSTRAT_HD inline WarpMap warp_map(const AffineParams& p, int rows, int cols) {
  // cos θ, sin θ from t = tan(θ/2) (see AffineParams), then A = (1/s)·[[1, −k], [0, 1]]·R(−θ).
  const float t = p.half_tan;
  const float t2 = t * t;
  const float den = 1.0f + t2;
  const float c = (1.0f - t2) / den;
  const float sn = (2.0f * t) / den;
  const float inv_s = 1.0f / p.scale;
  WarpMap m;
  m.a00 = (c + p.shear * sn) * inv_s;
  m.a01 = (sn - p.shear * c) * inv_s;
  m.a10 = (-sn) * inv_s;
  m.a11 = c * inv_s;
  m.cx = static_cast<float>(cols - 1) * 0.5f;
  m.cy = static_cast<float>(rows - 1) * 0.5f;
  m.tx = p.tx;
  m.ty = p.ty;
  return m;
}

/// The map's input for output row y (v) and column x (u): hoisted out of the column loop on the
/// host, computed per pixel on the GPU; the same float either way.
MEMSTRAT_HD inline float warp_v(const WarpMap& m, int y) {
  return (static_cast<float>(y) - m.cy) - m.ty;
}
MEMSTRAT_HD inline float warp_u(const WarpMap& m, int x) {
  return (static_cast<float>(x) - m.cx) - m.tx;
}

/// Source pixel (x, y) as a float, 0 outside the image.
MEMSTRAT_HD inline float pixel_or_zero(const std::uint8_t* src, int rows, int cols, int y, int x) {
  return (y >= 0 && y < rows && x >= 0 && x < cols) ? static_cast<float>(src[y * cols + x]) : 0.0f;
}

/// One output pixel of `heavy`: bilinear sample of src at A·(u, v) + c, rounded half up and
/// clamped to [0, 255].
MEMSTRAT_HD inline std::uint8_t warp_sample(const std::uint8_t* src, int rows, int cols,
                                            const WarpMap& m, float u, float v) {
  const float sx = (m.a00 * u + m.a01 * v) + m.cx;
  const float sy = (m.a10 * u + m.a11 * v) + m.cy;
  const float x0 = floorf(sx), y0 = floorf(sy);
  const float fx = sx - x0, fy = sy - y0;  // exact: the fractional parts
  const int ix = static_cast<int>(x0), iy = static_cast<int>(y0);
  const float p00 = pixel_or_zero(src, rows, cols, iy, ix);
  const float p01 = pixel_or_zero(src, rows, cols, iy, ix + 1);
  const float p10 = pixel_or_zero(src, rows, cols, iy + 1, ix);
  const float p11 = pixel_or_zero(src, rows, cols, iy + 1, ix + 1);
  const float top = p00 + fx * (p01 - p00);
  const float bottom = p10 + fx * (p11 - p10);
  const float val = top + fy * (bottom - top);
  const float r = floorf(val + 0.5f);
  return static_cast<std::uint8_t>(r < 0.0f ? 0.0f : (r > 255.0f ? 255.0f : r));
}

/// One output pixel of `light`: src(x − dx, y − dy), 0 where that falls outside the image (the
/// definition; the host's shift_image produces the same bytes with block copies).
MEMSTRAT_HD inline std::uint8_t shift_pixel(const std::uint8_t* src, int rows, int cols, Shift s,
                                            int y, int x) {
  const int sy = y - s.dy, sx = x - s.dx;
  return (sy >= 0 && sy < rows && sx >= 0 && sx < cols) ? src[sy * cols + sx] : 0;
}

}  // namespace
}  // namespace memstrat::augment_math
