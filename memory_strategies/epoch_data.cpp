#include "memory_strategies/epoch_data.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "kernels/common/pixel_norm.h"  // normalize_pixel: the same expression as the GPU kernel
#include "memory_strategies/epoch_order.h"

namespace memstrat {

std::vector<std::int32_t> shuffled_order(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  shuffle_into(p.data(), n, seed);
  return p;
}

std::size_t transfer_bytes_per_sample(int features, Transfer t) {
  return static_cast<std::size_t>(features) * pixel_bytes(t);
}

void write_rows(const EpochRows& e, std::int64_t first, std::int64_t count, void* images,
                std::int32_t* labels, std::uint8_t* scratch) {
  const HostDataset& d = *e.data;
  const int F = d.features();
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int64_t row = e.whole_row(first + r);
    const std::int32_t sample = e.order[row];
    const std::uint8_t* src = d.train_images.data() + static_cast<std::size_t>(sample) * F;
    const AugmentKey key{e.seed, e.epoch, row};
    if (e.transfer == Transfer::U8) {
      std::uint8_t* dst = static_cast<std::uint8_t*>(images) + static_cast<std::size_t>(r) * F;
      augment_image(e.augment, src, d.rows, d.cols, key, dst);
    } else {
      const std::uint8_t* px = src;
      if (e.augment != Augment::None) {
        augment_image(e.augment, src, d.rows, d.cols, key, scratch);
        px = scratch;
      }
      float* dst = static_cast<float*>(images) + static_cast<std::size_t>(r) * F;
      for (int k = 0; k < F; ++k) dst[k] = kernels::normalize_pixel(px[k]);
    }
    labels[r] = d.train_labels[static_cast<std::size_t>(sample)];
  }
}

std::int64_t shard_rows(std::int64_t samples, int batch, int shard, int shards) {
  std::int64_t rows = 0;
  for (std::int64_t first = static_cast<std::int64_t>(shard) * batch; first < samples;
       first += static_cast<std::int64_t>(shards) * batch)
    rows += std::min<std::int64_t>(batch, samples - first);
  return rows;
}

EpochWriter::EpochWriter(const HostDataset& data, const StrategyOptions& opt)
    : data_(&data), opt_(opt), samples_(data.n_train()) {
  if (opt.shards == 1 && opt.shard == 0) return;
  if (opt.shards < 1 || opt.shard < 0 || opt.shard >= opt.shards || opt.batch < 1)
    throw std::invalid_argument("EpochWriter: shard " + std::to_string(opt.shard) + " of " +
                                std::to_string(opt.shards) + " does not exist");
  // A shard's rows take the whole epoch's order and augmentation keys (EpochRows::whole_row), in
  // every scenario (the stream scenario's producers shard the same way: batch_producer.h).
  samples_ = shard_rows(data.n_train(), opt.batch, opt.shard, opt.shards);
}

std::size_t EpochWriter::image_bytes_per_sample() const {
  return transfer_bytes_per_sample(features(), opt_.transfer);
}

std::vector<std::int32_t> EpochWriter::order(int epoch) const {
  std::vector<std::int32_t> whole = whole_order(epoch);
  if (opt_.shards == 1) return whole;
  std::vector<std::int32_t> mine;
  mine.reserve(static_cast<std::size_t>(samples_));
  const std::int64_t n = data_->n_train(), batch = opt_.batch;
  for (std::int64_t first = opt_.shard * batch; first < n; first += opt_.shards * batch)
    mine.insert(mine.end(), whole.begin() + first, whole.begin() + std::min(n, first + batch));
  return mine;
}

namespace {
/// Runs work(lo, hi, scratch) over [0, n) on up to 16 threads (at least `grain` items each);
/// each thread has its own one-image scratch buffer. The split never changes the bytes written.
template <typename Work>
void parallel_rows(std::int64_t n, std::int64_t grain, int features, Work work) {
  auto run = [&](std::int64_t lo, std::int64_t hi) {
    std::vector<std::uint8_t> scratch(static_cast<std::size_t>(features));
    work(lo, hi, scratch.data());
  };
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const std::int64_t threads = std::min<std::int64_t>(hw, std::max<std::int64_t>(1, n / grain));
  if (threads <= 1) {
    run(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (std::int64_t t = 0; t < threads; ++t) {
    const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
    if (lo < hi) pool.emplace_back(run, lo, hi);
  }
  for (auto& th : pool) th.join();
}
}  // namespace

EpochRows EpochWriter::rows_of(int epoch, const std::vector<std::int32_t>& whole) const {
  // Refresh shifts on the host unless the GPU does (--augment-device gpu: the copying strategies
  // move the raw rows and augment them after the copy, augment_after_copy.h).
  const bool host_shift = refreshes() && opt_.augment_device == AugmentDevice::Host;
  return EpochRows{data_,       whole.data(), host_shift ? Augment::Light : Augment::None,
                   opt_.transfer, opt_.seed,  epoch,
                   opt_.shard,  opt_.shards, opt_.batch};
}

std::vector<std::int32_t> EpochWriter::whole_order(int epoch) const {
  return shuffled_order(data_->n_train(), epoch_order_seed(opt_.seed, reshuffles() ? epoch : 0));
}

void EpochWriter::write(int epoch, void* images, std::int32_t* labels) const {
  const std::vector<std::int32_t> ord = whole_order(epoch);
  const EpochRows rows = rows_of(epoch, ord);
  const std::size_t row_bytes = image_bytes_per_sample();
  parallel_rows(samples(), 4096, features(),
                [&](std::int64_t lo, std::int64_t hi, std::uint8_t* scratch) {
                  write_rows(rows, lo, hi - lo, static_cast<std::uint8_t*>(images) + lo * row_bytes,
                             labels + lo, scratch);
                });
}

void EpochWriter::write_packed(int epoch, void* blocks, const PackedLayout& layout) const {
  const BatchGeometry& g = layout.geom;
  if (g.samples != samples() || g.image_bytes_per_sample != image_bytes_per_sample())
    throw std::invalid_argument("EpochWriter::write_packed: the layout describes other data");
  const std::vector<std::int32_t> ord = whole_order(epoch);
  const EpochRows rows = rows_of(epoch, ord);
  auto* base = static_cast<std::uint8_t*>(blocks);
  // A batch's rows are contiguous inside its block: one write_rows per batch.
  const std::int64_t grain = std::max<std::int64_t>(1, 4096 / std::max(1, g.batch));
  parallel_rows(g.batches(), grain, features(),
                [&](std::int64_t lo, std::int64_t hi, std::uint8_t* scratch) {
                  for (std::int64_t b64 = lo; b64 < hi; ++b64) {
                    const int b = static_cast<int>(b64);
                    std::uint8_t* block = base + layout.block_offset(b);
                    write_rows(rows, g.first(b), g.rows(b), block,
                               reinterpret_cast<std::int32_t*>(block + layout.label_offset(b)),
                               scratch);
                  }
                });
}

}  // namespace memstrat
