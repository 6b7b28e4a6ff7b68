// augment.h: the per-sample training augmentations (none, light, heavy), each a pure function
// of (seed, epoch, index) and the source image, so the bytes of an epoch never depend on which
// thread, worker count or schedule produced them. `light` is the ±2 px shift of the refresh
// scenario; `heavy` is a random affine warp with bilinear sampling (rotation, scale, shear,
// translation), the standard MNIST augmentation, computed in float32 with a fixed operation
// order in a file compiled without floating-point contraction, so that
// experiments/baselines/memstrat_stream.py reproduces it bit for bit in numpy.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace memstrat {

enum class Augment { None, Light, Heavy };

std::string_view to_string(Augment a);
/// "none" | "light" | "heavy"; nullopt for anything else.
std::optional<Augment> parse_augment(std::string_view s);

/// Where the per-sample augmentation runs (--augment-device): on the host (write_rows,
/// epoch_data.h) or on the GPU (gather_augment, augment_gpu.h); the same bytes either way.
enum class AugmentDevice { Host, Gpu };
std::string_view to_string(AugmentDevice d);  // "host" | "gpu"

/// What a sample's random draws depend on. `index` is the sample's position in its epoch's
/// order (row b*batch + r of the epoch), not its index in the data set: the order is itself a
/// function of (seed, epoch), so this is the same information, and it is the key the refresh
/// scenario has always used.
struct AugmentKey {
  std::uint64_t seed = 0;
  int epoch = 0;
  std::int64_t index = 0;
};

/// The splitmix64 state a sample's draws start from (every kind draws from it in turn).
std::uint64_t augment_stream(const AugmentKey& k);

/// The inverse map of `heavy`: output pixel (x, y) samples the source at
///   (sx, sy) = A · (x − c − t) + c,  c = ((cols−1)/2, (rows−1)/2),
/// with A = (1/scale) · [[1, −shear], [0, 1]] · R(−θ) the inverse of "rotate by θ, shear x by
/// `shear`, scale by `scale`". cos θ and sin θ come from t = tan(θ/2) by the rational
/// (Weierstrass) form cos = (1−t²)/(1+t²), sin = 2t/(1+t²): only +, −, ×, ÷, each correctly
/// rounded in IEEE float32, so no libm call can differ between C++ and numpy.
struct AffineParams {
  float half_tan = 0.f;  // t = tan(θ/2), uniform in ±tan(7.5°): θ within ±15°
  float scale = 1.f;     // uniform in [0.9, 1.1]
  float shear = 0.f;     // x += shear·y, uniform in ±tan(10°)
  float tx = 0.f;        // translation in pixels, uniform in [−2, 2]
  float ty = 0.f;
};

/// The `heavy` draws of one sample: five splitmix64 values from augment_stream(k), in the field
/// order above, each u = (r >> 40)·2⁻²⁴ mapped to lo + (hi − lo)·u in float32.
AffineParams heavy_params(const AugmentKey& k);

/// The `light` draw of one sample: dx, dy in [−2, 2], from one splitmix64 value r:
/// dx = r mod 5 − 2, dy = (r / 5) mod 5 − 2.
struct Shift {
  int dx = 0;
  int dy = 0;
};
Shift light_shift(const AugmentKey& k);

/// dst(x, y) = src(x − dx, y − dy), 0 where that falls outside the image.
void shift_image(const std::uint8_t* src, int rows, int cols, Shift s, std::uint8_t* dst);

/// Bilinear resampling of src through the inverse map of `p` (see AffineParams); pixels outside
/// the source read as 0; the result is rounded half up and clamped to [0, 255].
void affine_warp(const std::uint8_t* src, int rows, int cols, const AffineParams& p,
                 std::uint8_t* dst);

/// One sample: dst = augmentation `a` of src under key k (None copies). dst must not alias
/// src. No allocation; safe to call from any number of threads at once.
void augment_image(Augment a, const std::uint8_t* src, int rows, int cols, const AugmentKey& k,
                   std::uint8_t* dst);

}  // namespace memstrat
