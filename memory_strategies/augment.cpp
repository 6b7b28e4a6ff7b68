// Compiled with -ffp-contract=off (CMakeLists.txt): a fused multiply-add rounds once where the
// numpy reference rounds twice, so contraction would make `heavy` differ from it in the last bit
// of a coordinate, and therefore, now and then, in a pixel. The arithmetic itself is in
// augment_math.h, which the GPU kernel (augment_gpu.cu) compiles too; every float expression
// there is written in the order memstrat_stream.py evaluates it; keep the two in step.
#include "memory_strategies/augment.h"

#include <cstddef>
#include <cstring>

#include "memory_strategies/augment_math.h"

namespace memstrat {

std::string_view to_string(Augment a) {
  switch (a) {
    case Augment::None: return "none";
    case Augment::Light: return "light";
    case Augment::Heavy: return "heavy";
  }
  return "?";
}

std::string_view to_string(AugmentDevice d) { return d == AugmentDevice::Gpu ? "gpu" : "host"; }

std::optional<Augment> parse_augment(std::string_view s) {
  for (Augment a : {Augment::None, Augment::Light, Augment::Heavy})
    if (s == to_string(a)) return a;
  return std::nullopt;
}

std::uint64_t augment_stream(const AugmentKey& k) {
  return augment_math::augment_stream(k.seed, k.epoch, k.index);
}

Shift light_shift(const AugmentKey& k) {
  return augment_math::light_shift(k.seed, k.epoch, k.index);
}

AffineParams heavy_params(const AugmentKey& k) {
  return augment_math::heavy_params(k.seed, k.epoch, k.index);
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
  const augment_math::WarpMap m = augment_math::warp_map(p, rows, cols);
  for (int y = 0; y < rows; ++y) {
    const float v = augment_math::warp_v(m, y);
    for (int x = 0; x < cols; ++x)
      dst[y * cols + x] = augment_math::warp_sample(src, rows, cols, m, augment_math::warp_u(m, x), v);
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
