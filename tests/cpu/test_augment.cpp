// augment.h: the per-sample augmentations against hand-computed and independent references,
// their determinism, the refresh scenario's unchanged bytes on real MNIST, and the committed
// fixture that the numpy reproduction (experiments/baselines/memstrat_stream.py) is tested
// against. MEMSTRAT_WRITE_AUGMENT_FIXTURE=FILE rewrites that fixture from this code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "memory_strategies/augment.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/epoch_order.h"
#include "tests/support/mnist_test_data.h"

using namespace memstrat;

namespace {

constexpr int kSide = 28, kPixels = kSide * kSide;
using Image = std::vector<std::uint8_t>;

Image random_image(std::uint64_t seed) {
  Image im(kPixels);
  std::uint64_t st = seed;
  for (auto& p : im) p = static_cast<std::uint8_t>(splitmix64(st) >> 56);
  return im;
}

Image warp(const Image& src, const AffineParams& p) {
  Image out(kPixels);
  affine_warp(src.data(), kSide, kSide, p, out.data());
  return out;
}

/// A digit-like synthetic image: a ring and a stroke with soft edges (integer arithmetic).
Image synthetic_digit(std::uint64_t seed) {
  std::uint64_t st = seed;
  const int cx = 8 + static_cast<int>(splitmix64(st) % 12), cy = 8 + static_cast<int>(splitmix64(st) % 12);
  const int radius = 4 + static_cast<int>(splitmix64(st) % 6);
  const int x0 = static_cast<int>(splitmix64(st) % 28), x1 = static_cast<int>(splitmix64(st) % 28);
  Image im(kPixels, 0);
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const int d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
      const int ring = std::abs(d2 - radius * radius);  // 0 on the circle
      const int stroke_x = x0 + (x1 - x0) * y / 27;      // a slanted line
      const int line = std::abs(x - stroke_x) * 16;
      const int v = std::max(255 - ring * 12, 255 - line * 6);
      im[y * kSide + x] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
    }
  return im;
}

/// The refresh scenario's shift exactly as EpochWriter computed it before augment.h existed.
Image old_refresh_shift(const std::uint8_t* src, std::uint64_t seed, int epoch, std::int64_t i) {
  const std::uint64_t aug_seed =
      seed ^ (0xA5A5A5A5ull + static_cast<std::uint64_t>(epoch) * 0x9E37ull);
  std::uint64_t st = aug_seed + static_cast<std::uint64_t>(i) * 0xD1B54A32D192ED03ull;
  const std::uint64_t r = splitmix64(st);
  const int dx = static_cast<int>(r % 5) - 2, dy = static_cast<int>((r / 5) % 5) - 2;
  Image tmp(kPixels);
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const int sy = y - dy, sx = x - dx;
      tmp[y * kSide + x] =
          (sy >= 0 && sy < kSide && sx >= 0 && sx < kSide) ? src[sy * kSide + sx] : 0;
    }
  return tmp;
}

std::uint64_t fnv1a(const void* p, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::string hex(const Image& im) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : im) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

}  // namespace

TEST(Augment, NamesRoundTrip) {
  for (Augment a : {Augment::None, Augment::Light, Augment::Heavy})
    EXPECT_EQ(parse_augment(to_string(a)), a);
  EXPECT_FALSE(parse_augment("medium").has_value());
}

TEST(Augment, IdentityWarpAndNoneReturnTheInput) {
  const Image src = random_image(1);
  EXPECT_EQ(warp(src, AffineParams{}), src);
  Image out(kPixels);
  augment_image(Augment::None, src.data(), kSide, kSide, {3, 4, 5}, out.data());
  EXPECT_EQ(out, src);
}

TEST(Augment, QuarterTurnIsAnExactPixelPermutation) {
  // t = tan(45°) = 1 gives cos = 0, sin = 1 exactly: output (x, y) samples source (y, 27 - x),
  // i.e. the image turned by 90° about its centre, with no interpolation at all.
  const Image src = random_image(2);
  AffineParams p;
  p.half_tan = 1.0f;
  const Image out = warp(src, p);
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x)
      ASSERT_EQ(out[y * kSide + x], src[(kSide - 1 - x) * kSide + y]) << x << "," << y;
}

TEST(Augment, HalfPixelShiftAveragesNeighboursRoundingHalfUp) {
  const Image src = random_image(3);
  AffineParams p;
  p.tx = 0.5f;  // output x samples source x - 0.5
  const Image out = warp(src, p);
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const int left = x > 0 ? src[y * kSide + x - 1] : 0, right = src[y * kSide + x];
      ASSERT_EQ(out[y * kSide + x], (left + right + 1) / 2) << x << "," << y;
    }
}

TEST(Augment, TenDegreeRotationMatchesADoublePrecisionBilinearReference) {
  // An independent reference: angle through std::cos/std::sin in double, bilinear in double.
  // float32 vs double can only move a value across a .5 rounding boundary: at most 1 apart.
  const Image src = synthetic_digit(11);
  const double theta = 10.0 * M_PI / 180.0;
  AffineParams p;
  p.half_tan = static_cast<float>(std::tan(theta / 2));
  const Image out = warp(src, p);
  int exact = 0;
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const double u = x - 13.5, v = y - 13.5;
      const double sx = std::cos(theta) * u + std::sin(theta) * v + 13.5;
      const double sy = -std::sin(theta) * u + std::cos(theta) * v + 13.5;
      const int ix = static_cast<int>(std::floor(sx)), iy = static_cast<int>(std::floor(sy));
      const double fx = sx - ix, fy = sy - iy;
      auto px = [&](int yy, int xx) {
        return (yy >= 0 && yy < kSide && xx >= 0 && xx < kSide) ? src[yy * kSide + xx] : 0;
      };
      const double val = (1 - fx) * (1 - fy) * px(iy, ix) + fx * (1 - fy) * px(iy, ix + 1) +
                         (1 - fx) * fy * px(iy + 1, ix) + fx * fy * px(iy + 1, ix + 1);
      const int want = static_cast<int>(std::floor(val + 0.5));
      ASSERT_LE(std::abs(out[y * kSide + x] - want), 1) << x << "," << y << " val " << val;
      exact += out[y * kSide + x] == want;
    }
  EXPECT_GE(exact, kPixels - 8);
  EXPECT_NE(out, src);
}

TEST(Augment, ShiftMatchesThePerPixelDefinitionForEveryShift) {
  // dst(x, y) = src(x − dx, y − dy) or 0, pixel by pixel: the definition shift_image's row
  // copies must reproduce, on square and non-square images and for shifts past the border.
  for (auto [rows, cols] : {std::pair{kSide, kSide}, std::pair{5, 9}, std::pair{9, 1}}) {
    Image src(static_cast<std::size_t>(rows) * cols);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(1 + i % 251);
    for (int dy = -rows - 1; dy <= rows + 1; ++dy)
      for (int dx = -cols - 1; dx <= cols + 1; ++dx) {
        Image want(src.size()), got(src.size(), 0xAB);
        for (int y = 0; y < rows; ++y)
          for (int x = 0; x < cols; ++x) {
            const int sy = y - dy, sx = x - dx;
            want[y * cols + x] =
                (sy >= 0 && sy < rows && sx >= 0 && sx < cols) ? src[sy * cols + sx] : 0;
          }
        shift_image(src.data(), rows, cols, {dx, dy}, got.data());
        ASSERT_EQ(got, want) << rows << "x" << cols << " dx " << dx << " dy " << dy;
      }
  }
}

TEST(Augment, HeavyDrawsStayInTheirRangesAndCoverThem) {
  float lo[5] = {1e9f, 1e9f, 1e9f, 1e9f, 1e9f}, hi[5] = {-1e9f, -1e9f, -1e9f, -1e9f, -1e9f};
  for (int i = 0; i < 20000; ++i) {
    const AffineParams p = heavy_params({5, 1 + i % 3, i});
    const float v[5] = {p.half_tan, p.scale, p.shear, p.tx, p.ty};
    for (int k = 0; k < 5; ++k) lo[k] = std::min(lo[k], v[k]), hi[k] = std::max(hi[k], v[k]);
  }
  const float want_lo[5] = {-0.13165250f, 0.9f, -0.17632698f, -2.f, -2.f};
  const float want_hi[5] = {0.13165250f, 1.1f, 0.17632698f, 2.f, 2.f};
  for (int k = 0; k < 5; ++k) {
    EXPECT_GE(lo[k], want_lo[k]) << k;
    EXPECT_LT(hi[k], want_hi[k] + 1e-6f) << k;
    const float span = want_hi[k] - want_lo[k];
    EXPECT_LT(lo[k], want_lo[k] + 0.01f * span) << k;  // the draws reach both ends
    EXPECT_GT(hi[k], want_hi[k] - 0.01f * span) << k;
  }
  // |θ| <= 15°: θ = 2·atan(t).
  EXPECT_NEAR(2 * std::atan(0.131652497587395853) * 180 / M_PI, 15.0, 1e-9);
}

TEST(Augment, DifferentEpochOrRowGiveDifferentDraws) {
  const Image src = synthetic_digit(5);
  std::set<std::uint64_t> heavy_images;
  std::set<std::pair<int, int>> shifts;
  for (int epoch = 1; epoch <= 3; ++epoch)
    for (int row = 0; row < 40; ++row) {
      Image out(kPixels);
      augment_image(Augment::Heavy, src.data(), kSide, kSide, {9, epoch, row}, out.data());
      heavy_images.insert(fnv1a(out.data(), out.size()));
    }
  for (int row = 0; row < 1000; ++row) {
    const Shift s = light_shift({9, 1, row});
    shifts.insert({s.dx, s.dy});
  }
  EXPECT_EQ(heavy_images.size(), 120u);
  EXPECT_EQ(shifts.size(), 25u);
  const AffineParams a = heavy_params({9, 1, 7}), b = heavy_params({9, 2, 7}),
                     c = heavy_params({9, 1, 8}), d = heavy_params({10, 1, 7});
  EXPECT_NE(a.half_tan, b.half_tan);
  EXPECT_NE(a.half_tan, c.half_tan);
  EXPECT_NE(a.half_tan, d.half_tan);
}

TEST(Augment, SameBytesFromOneOrManyThreads) {
  constexpr int kN = 2000;
  std::vector<Image> src;
  for (int i = 0; i < 16; ++i) src.push_back(synthetic_digit(100 + i));
  for (Augment a : {Augment::Light, Augment::Heavy}) {
    auto run = [&](int threads) {
      Image out(static_cast<std::size_t>(kN) * kPixels);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (int i = t; i < kN; i += threads)
            augment_image(a, src[i % 16].data(), kSide, kSide, {21, 4, i},
                          out.data() + static_cast<std::size_t>(i) * kPixels);
        });
      for (auto& th : pool) th.join();
      return out;
    };
    const Image one = run(1);
    EXPECT_EQ(run(3), one) << to_string(a);
    EXPECT_EQ(run(8), one) << to_string(a);
  }
}

TEST(Augment, LightIsTheRefreshShiftUnchangedOnRealMnist) {
  MEMSTRAT_REQUIRE_MNIST();
  const HostDataset& d = memstrat::testing::mnist();
  // Sample by sample against the formula EpochWriter used before augment.h existed...
  for (std::uint64_t seed : {1ull, 7ull})
    for (int epoch : {1, 2, 9})
      for (std::int64_t i = 0; i < d.n_train(); i += 97) {
        const std::uint8_t* src = d.train_images.data() + (i * 7919 % d.n_train()) * kPixels;
        Image got(kPixels);
        augment_image(Augment::Light, src, kSide, kSide, {seed, epoch, i}, got.data());
        ASSERT_EQ(got, old_refresh_shift(src, seed, epoch, i)) << seed << " " << epoch << " " << i;
      }
  // ...and whole refresh epochs against digests written by the EpochWriter of that time.
  struct Golden {
    std::uint64_t seed;
    Transfer transfer;
    int epoch;
    std::uint64_t fnv;
  };
  const Golden golden[] = {
      {1, Transfer::U8, 1, 0x3c8f100b0295cfffull},  {1, Transfer::U8, 2, 0x841a3e817490196cull},
      {1, Transfer::U8, 5, 0xddff7e5c9872bf4aull},  {1, Transfer::F32, 1, 0x199d3d4667b2eba8ull},
      {1, Transfer::F32, 2, 0x2418e719fd04b9e0ull}, {7, Transfer::U8, 1, 0xde47639319002a21ull},
      {7, Transfer::F32, 5, 0x5a4691fc7c9d6cf7ull},
  };
  if (d.n_train() != 60000) GTEST_SKIP() << "the digests are of the full 60000-sample set";
  for (const Golden& g : golden) {
    StrategyOptions o;
    o.scenario = Scenario::Refresh;
    o.transfer = g.transfer;
    o.seed = g.seed;
    EpochWriter w(d, o);
    std::vector<std::uint8_t> img(w.image_bytes());
    std::vector<std::int32_t> lab(w.samples());
    w.write(g.epoch, img.data(), lab.data());
    const std::uint64_t h = fnv1a(lab.data(), lab.size() * 4, fnv1a(img.data(), img.size()));
    EXPECT_EQ(h, g.fnv) << "seed " << g.seed << " epoch " << g.epoch;
  }
}

// The fixture the numpy reproduction is tested against (tests/experiments/baselines/): 16
// synthetic sources (no MNIST bytes are committed), their light and heavy outputs and draws,
// and the first rows of a few epoch orders. This test checks that the C++ still produces it.
namespace {

const char* kFixture = MEMSTRAT_SOURCE_DIR "/tests/experiments/baselines/fixtures/augment_cpp.json";

/// Σ b[i]·(2i+1)·φ mod 2⁶⁴ over a byte string: any single changed byte changes it, and numpy
/// computes it in one vectorised line.
std::uint64_t checksum(const std::uint8_t* b, std::size_t n) {
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < n; ++i) h += b[i] * (2 * i + 1) * 0x9E3779B97F4A7C15ull;
  return h;
}

/// Checksums of the first rows of real MNIST epochs, augmented as the stream scenario writes
/// them (u8): the bytes themselves stay out of the repository.
nlohmann::json mnist_checksums() {
  const HostDataset& d = memstrat::testing::mnist();
  constexpr std::int64_t kRows = 4096;
  nlohmann::json out = nlohmann::json::array();
  for (Augment a : {Augment::Light, Augment::Heavy})
    for (int epoch : {1, 2}) {
      EpochOrder order(d.n_train(), 1);
      order.set_epoch(epoch);
      const EpochRows rows{&d, order.order(), a, Transfer::U8, 1, epoch};
      std::vector<std::uint8_t> img(kRows * kPixels), scratch(kPixels);
      std::vector<std::int32_t> lab(kRows);
      write_rows(rows, 0, kRows, img.data(), lab.data(), scratch.data());
      out.push_back({{"augment", std::string(to_string(a))}, {"seed", 1}, {"epoch", epoch},
                     {"n_train", d.n_train()}, {"rows", kRows},
                     {"checksum", std::to_string(checksum(img.data(), img.size()))}});
    }
  return out;
}

nlohmann::json make_fixture() {
  nlohmann::json samples = nlohmann::json::array();
  const std::int64_t rows[16] = {0, 1, 2, 255, 256, 4095, 59999, 60000,
                                 123457, 1 << 20, 99991, 7, 31, 4242, 65535, 3000000000LL};
  for (int s = 0; s < 16; ++s) {
    Image src;
    if (s < 12) {
      src = synthetic_digit(1000 + s);
    } else if (s == 12) {
      src.assign(kPixels, 255);  // clamping at the top
    } else if (s == 13) {
      src.resize(kPixels);  // checkerboard: every interpolation weight shows
      for (int i = 0; i < kPixels; ++i) src[i] = ((i / kSide + i % kSide) & 1) ? 255 : 0;
    } else if (s == 14) {
      src.resize(kPixels);
      for (int i = 0; i < kPixels; ++i) src[i] = static_cast<std::uint8_t>((i % kSide) * 9);
    } else {
      src.assign(kPixels, 0);
      src[13 * kSide + 14] = 200;
    }
    const AugmentKey key{7, 1 + s % 4, rows[s]};
    Image light(kPixels), heavy(kPixels);
    augment_image(Augment::Light, src.data(), kSide, kSide, key, light.data());
    augment_image(Augment::Heavy, src.data(), kSide, kSide, key, heavy.data());
    const AffineParams p = heavy_params(key);
    const Shift sh = light_shift(key);
    samples.push_back({{"epoch", key.epoch}, {"row", key.index}, {"source", hex(src)},
                       {"light", hex(light)}, {"heavy", hex(heavy)},
                       {"shift", {sh.dx, sh.dy}},
                       {"heavy_params_f32_bits",
                        {float_bits(p.half_tan), float_bits(p.scale), float_bits(p.shear),
                         float_bits(p.tx), float_bits(p.ty)}}});
  }
  nlohmann::json orders = nlohmann::json::array();
  for (auto [n, seed, epoch] : {std::tuple<std::int64_t, std::uint64_t, int>{1000, 7, 1},
                                {1000, 7, 2}, {60000, 1, 1}, {60000, 1, 3}}) {
    EpochOrder o(n, seed);
    o.set_epoch(epoch);
    orders.push_back({{"n", n}, {"seed", seed}, {"epoch", epoch},
                      {"first", std::vector<std::int32_t>(o.order(), o.order() + 32)}});
  }
  nlohmann::json fixture = {{"about", "C++ augmentations (memory_strategies/augment.cpp) and epoch orders "
                    "(epoch_order.cpp); written by tests/cpu/test_augment.cpp with "
                    "MEMSTRAT_WRITE_AUGMENT_FIXTURE=FILE"},
          {"rows", kSide}, {"cols", kSide}, {"seed", 7}, {"samples", samples},
          {"orders", orders}};
  if (!memstrat::testing::mnist_dir().empty()) fixture["mnist_checksums"] = mnist_checksums();
  return fixture;
}

}  // namespace

TEST(Augment, CommittedFixtureIsWhatThisCodeProduces) {
  const nlohmann::json now = make_fixture();
  if (const char* out = std::getenv("MEMSTRAT_WRITE_AUGMENT_FIXTURE"); out && *out) {
    ASSERT_TRUE(now.contains("mnist_checksums")) << "writing the fixture needs MNIST";
    std::ofstream f(out);
    f << now.dump(1) << "\n";
    ASSERT_TRUE(f.good()) << out;
    GTEST_SKIP() << "wrote " << out;
  }
  std::ifstream f(kFixture);
  ASSERT_TRUE(f.good()) << kFixture;
  const nlohmann::json committed = nlohmann::json::parse(f);
  ASSERT_EQ(committed["samples"].size(), now["samples"].size());
  for (std::size_t s = 0; s < now["samples"].size(); ++s)
    for (const char* key : {"source", "light", "heavy", "shift", "heavy_params_f32_bits"})
      EXPECT_EQ(committed["samples"][s][key], now["samples"][s][key]) << "sample " << s << " " << key;
  EXPECT_EQ(committed["orders"], now["orders"]);
  if (now.contains("mnist_checksums")) {
    EXPECT_EQ(committed["mnist_checksums"], now["mnist_checksums"]);
  }
}
