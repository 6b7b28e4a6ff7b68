#include "memory_strategies/epoch_data.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "kernels/common/pixel_norm.h"  // normalize_pixel: the same expression as the GPU kernel

namespace memstrat {

std::vector<std::int32_t> shuffled_order(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>(i);
  std::uint64_t st = seed;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const std::int64_t j = static_cast<std::int64_t>(splitmix64(st) % static_cast<std::uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

EpochWriter::EpochWriter(const HostDataset& data, const StrategyOptions& opt)
    : data_(&data), opt_(opt) {}

std::size_t EpochWriter::image_bytes_per_sample() const {
  return static_cast<std::size_t>(features()) *
         (opt_.transfer == Transfer::U8 ? sizeof(std::uint8_t) : sizeof(float));
}

std::vector<std::int32_t> EpochWriter::order(int epoch) const {
  // static: one fixed shuffle; refresh: a new shuffle every epoch.
  const int e = refreshes() ? epoch : 0;
  return shuffled_order(samples(), opt_.seed * 0x100000001B3ull + static_cast<std::uint64_t>(e));
}

template <typename ImageAt, typename LabelAt>
void EpochWriter::write_each(int epoch, ImageAt image_at, LabelAt label_at) const {
  const std::vector<std::int32_t> ord = order(epoch);
  const int rows = data_->rows, cols = data_->cols, F = features();
  const bool shift = refreshes();
  const bool as_float = opt_.transfer == Transfer::F32;
  const std::uint64_t aug_seed = opt_.seed ^ (0xA5A5A5A5ull + static_cast<std::uint64_t>(epoch) * 0x9E37ull);

  auto work = [&](std::int64_t lo, std::int64_t hi) {
    std::vector<std::uint8_t> tmp(static_cast<std::size_t>(F));
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::uint8_t* src = data_->train_images.data() + static_cast<std::size_t>(ord[i]) * F;
      const std::uint8_t* px = src;
      if (shift) {
        // Per-sample shift derived from (seed, epoch, position): independent of threading.
        std::uint64_t st = aug_seed + static_cast<std::uint64_t>(i) * 0xD1B54A32D192ED03ull;
        const std::uint64_t r = splitmix64(st);
        const int dx = static_cast<int>(r % 5) - 2, dy = static_cast<int>((r / 5) % 5) - 2;
        for (int y = 0; y < rows; ++y)
          for (int x = 0; x < cols; ++x) {
            const int sy = y - dy, sx = x - dx;
            tmp[y * cols + x] =
                (sy >= 0 && sy < rows && sx >= 0 && sx < cols) ? src[sy * cols + sx] : 0;
          }
        px = tmp.data();
      }
      if (as_float) {
        float* dst = reinterpret_cast<float*>(image_at(i));
        for (int k = 0; k < F; ++k) dst[k] = kernels::normalize_pixel(px[k]);
      } else {
        std::memcpy(image_at(i), px, F);
      }
      *label_at(i) = data_->train_labels[static_cast<std::size_t>(ord[i])];
    }
  };

  const std::int64_t n = samples();
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const std::int64_t threads = std::min<std::int64_t>(hw, std::max<std::int64_t>(1, n / 4096));
  if (threads <= 1) {
    work(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (std::int64_t t = 0; t < threads; ++t) {
    const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
    if (lo < hi) pool.emplace_back(work, lo, hi);
  }
  for (auto& th : pool) th.join();
}

void EpochWriter::write(int epoch, void* images, std::int32_t* labels) const {
  const std::size_t per = image_bytes_per_sample();
  write_each(
      epoch,
      [&](std::int64_t i) {
        return static_cast<std::uint8_t*>(images) + static_cast<std::size_t>(i) * per;
      },
      [&](std::int64_t i) { return labels + i; });
}

void EpochWriter::write_packed(int epoch, void* blocks, const PackedLayout& layout) const {
  const BatchGeometry& g = layout.geom;
  if (g.samples != samples() || g.image_bytes_per_sample != image_bytes_per_sample())
    throw std::invalid_argument("EpochWriter::write_packed: the layout describes other data");
  auto* base = static_cast<std::uint8_t*>(blocks);
  write_each(
      epoch,
      [&](std::int64_t i) {
        const int b = static_cast<int>(i / g.batch);
        return base + layout.block_offset(b) +
               static_cast<std::size_t>(i - g.first(b)) * g.image_bytes_per_sample;
      },
      [&](std::int64_t i) {
        const int b = static_cast<int>(i / g.batch);
        return reinterpret_cast<std::int32_t*>(base + layout.block_offset(b) +
                                               layout.label_offset(b)) +
               (i - g.first(b));
      });
}

}  // namespace memstrat
