// Compiled with -ffp-contract=off (CMakeLists.txt): a fused multiply-add rounds once where the
// numpy reference rounds twice, so contraction would make `heavy` differ from it in the last bit
// of a coordinate, and therefore, now and then, in a pixel. Every float expression below is
// written in the order memstrat_stream.py evaluates it; keep the two in step.
#include "memory_strategies/augment.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "memory_strategies/epoch_data.h"  // splitmix64

namespace memstrat {

namespace {

// Draw ranges. tan(7.5°) bounds t = tan(θ/2) for |θ| <= 15°; tan(10°) is a 10° shear.
constexpr float kHalfTanMax = 0.131652497587395853f;
constexpr float kScaleMin = 0.9f, kScaleMax = 1.1f;
constexpr float kShearMax = 0.176326980708464973f;
constexpr float kShiftMax = 2.0f;

/// Uniform in [lo, hi) from the top 24 bits of r: exact in float32 up to the final two roundings.
float uniform(std::uint64_t r, float lo, float hi) {
  const float u = static_cast<float>(r >> 40) * 0x1p-24f;
  return lo + (hi - lo) * u;
}

}  // namespace

std::string_view to_string(Augment a) {
  switch (a) {
    case Augment::None: return "none";
    case Augment::Light: return "light";
    case Augment::Heavy: return "heavy";
  }
  return "?";
}

std::optional<Augment> parse_augment(std::string_view s) {
  for (Augment a : {Augment::None, Augment::Light, Augment::Heavy})
    if (s == to_string(a)) return a;
  return std::nullopt;
}

std::uint64_t augment_stream(const AugmentKey& k) {
  const std::uint64_t epoch_seed =
      k.seed ^ (0xA5A5A5A5ull + static_cast<std::uint64_t>(k.epoch) * 0x9E37ull);
  return epoch_seed + static_cast<std::uint64_t>(k.index) * 0xD1B54A32D192ED03ull;
}

Shift light_shift(const AugmentKey& k) {
  std::uint64_t st = augment_stream(k);
  const std::uint64_t r = splitmix64(st);
  return {static_cast<int>(r % 5) - 2, static_cast<int>((r / 5) % 5) - 2};
}

AffineParams heavy_params(const AugmentKey& k) {
  std::uint64_t st = augment_stream(k);
  AffineParams p;
  p.half_tan = uniform(splitmix64(st), -kHalfTanMax, kHalfTanMax);
  p.scale = uniform(splitmix64(st), kScaleMin, kScaleMax);
  p.shear = uniform(splitmix64(st), -kShearMax, kShearMax);
  p.tx = uniform(splitmix64(st), -kShiftMax, kShiftMax);
  p.ty = uniform(splitmix64(st), -kShiftMax, kShiftMax);
  return p;
}

void shift_image(const std::uint8_t* src, int rows, int cols, Shift s, std::uint8_t* dst) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  if (s.dx <= -cols || s.dx >= cols || s.dy <= -rows || s.dy >= rows) {
    std::memset(dst, 0, n);
    return;
  }
  // In the flat image, dst(x, y) = src(x − dx, y − dy) is dst[i] = src[i − off] with
  // off = dy·cols + dx: one memcpy, zeros for the |off| bytes it leaves at the head or tail
  // (the |dy| rows from outside the image, less at most |dx| bytes of the row next to them),
  // then zeros for the |dx| columns that wrapped across a row edge (those bytes included).
  // Same bytes as the per-pixel definition (tested for every shift) at a fraction of its cost.
  const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(s.dy) * cols + s.dx;
  const std::size_t len = n - static_cast<std::size_t>(off < 0 ? -off : off);
  if (off >= 0) {
    std::memcpy(dst + off, src, len);
    std::memset(dst, 0, static_cast<std::size_t>(off));
  } else {
    std::memcpy(dst, src - off, len);
    std::memset(dst + len, 0, n - len);
  }
  if (s.dx != 0) {
    const int x0 = s.dx > 0 ? 0 : cols + s.dx, width = s.dx > 0 ? s.dx : -s.dx;
    for (int y = 0; y < rows; ++y)
      for (int x = x0; x < x0 + width; ++x) dst[static_cast<std::size_t>(y) * cols + x] = 0;
  }
}

void affine_warp(const std::uint8_t* src, int rows, int cols, const AffineParams& p,
                 std::uint8_t* dst) {
  // cos θ, sin θ from t = tan(θ/2) (see AffineParams), then A = (1/s)·[[1, −k], [0, 1]]·R(−θ).
  const float t = p.half_tan;
  const float t2 = t * t;
  const float den = 1.0f + t2;
  const float c = (1.0f - t2) / den;
  const float sn = (2.0f * t) / den;
  const float inv_s = 1.0f / p.scale;
  const float a00 = (c + p.shear * sn) * inv_s;
  const float a01 = (sn - p.shear * c) * inv_s;
  const float a10 = (-sn) * inv_s;
  const float a11 = c * inv_s;
  const float cx = static_cast<float>(cols - 1) * 0.5f;
  const float cy = static_cast<float>(rows - 1) * 0.5f;

  auto pixel = [&](int y, int x) -> float {
    return (y >= 0 && y < rows && x >= 0 && x < cols) ? static_cast<float>(src[y * cols + x])
                                                       : 0.0f;
  };
  for (int y = 0; y < rows; ++y) {
    const float v = (static_cast<float>(y) - cy) - p.ty;
    for (int x = 0; x < cols; ++x) {
      const float u = (static_cast<float>(x) - cx) - p.tx;
      const float sx = (a00 * u + a01 * v) + cx;
      const float sy = (a10 * u + a11 * v) + cy;
      const float x0 = std::floor(sx), y0 = std::floor(sy);
      const float fx = sx - x0, fy = sy - y0;  // exact: the fractional parts
      const int ix = static_cast<int>(x0), iy = static_cast<int>(y0);
      const float p00 = pixel(iy, ix), p01 = pixel(iy, ix + 1);
      const float p10 = pixel(iy + 1, ix), p11 = pixel(iy + 1, ix + 1);
      const float top = p00 + fx * (p01 - p00);
      const float bottom = p10 + fx * (p11 - p10);
      const float val = top + fy * (bottom - top);
      const float r = std::floor(val + 0.5f);
      dst[y * cols + x] = static_cast<std::uint8_t>(r < 0.0f ? 0.0f : (r > 255.0f ? 255.0f : r));
    }
  }
}

void augment_image(Augment a, const std::uint8_t* src, int rows, int cols, const AugmentKey& k,
                   std::uint8_t* dst) {
  switch (a) {
    case Augment::None:
      std::memcpy(dst, src, static_cast<std::size_t>(rows) * cols);
      return;
    case Augment::Light:
      shift_image(src, rows, cols, light_shift(k), dst);
      return;
    case Augment::Heavy:
      affine_warp(src, rows, cols, heavy_params(k), dst);
      return;
  }
}

}  // namespace memstrat
