// epoch_data.h: EpochWriter, the host-side producer of one epoch's training data: sample
// order (seeded shuffle), the refresh scenario's ±2 px shift augmentation (augment.h, `light`),
// and the transfer format (raw uint8 or normalised float). Every strategy writes its host copy
// through it, so all strategies see exactly the same bytes. write_rows is the one piece of code
// that turns rows of an epoch into bytes; the stream scenario's producers call it per batch.
#pragma once

#include <cstdint>
#include <vector>

#include "common/host_dataset.h"
#include "memory_strategies/augment.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/memory_strategy.h"
#include "memory_strategies/splitmix64.h"  // splitmix64: the shuffle's and the draws' generator

namespace memstrat {

/// Fisher-Yates permutation of [0, n) from splitmix64(seed). Documented in docs/strategies.md
/// so a baseline can reproduce it.
std::vector<std::int32_t> shuffled_order(std::int64_t n, std::uint64_t seed);

/// What rows of one epoch are made of: which samples (order), how they are augmented (keyed by
/// (seed, epoch, row)), and the transfer format they are written in. With shards > 1 the rows
/// are those of shard `shard`: its row i is the whole epoch's row whole_row(i) (the single-GPU
/// batches g·shards + shard of `batch` rows, in order), and that row's sample and augmentation
/// key are the whole epoch's, so that the shards together are the whole epoch's bytes.
struct EpochRows {
  const HostDataset* data = nullptr;
  const std::int32_t* order = nullptr;  // the whole epoch's order: row i is sample order[i]
  Augment augment = Augment::None;
  Transfer transfer = Transfer::U8;
  std::uint64_t seed = 0;
  int epoch = 0;
  int shard = 0;
  int shards = 1;
  int batch = 0;  // the single-GPU batch (shards > 1 only)
  /// The whole epoch's row of this shard's row i.
  std::int64_t whole_row(std::int64_t i) const {
    if (shards == 1) return i;
    return (i / batch) * shards * batch + static_cast<std::int64_t>(shard) * batch + i % batch;
  }
};

/// Bytes per sample image in the transfer format (features, or 4 * features for f32).
std::size_t transfer_bytes_per_sample(int features, Transfer t);

/// Rows [first, first + count) of the epoch: row first + r goes to images/labels row r (images in
/// the transfer format, labels int32). `scratch` holds one image (features bytes); only the
/// augmented f32 path uses it. No allocation, no shared state: any thread, any split of rows.
void write_rows(const EpochRows& e, std::int64_t first, std::int64_t count, void* images,
                std::int32_t* labels, std::uint8_t* scratch);

class EpochWriter {
 public:
  EpochWriter(const HostDataset& data, const StrategyOptions& opt);

  /// True when the host rewrites the whole epoch's data before each epoch (refresh scenario).
  bool refreshes() const { return opt_.scenario == Scenario::Refresh; }
  /// True when every epoch has its own order (refresh; stream, whose producers use it too).
  bool reshuffles() const { return opt_.scenario != Scenario::Static; }
  /// Rows of one epoch: the training set, or this instance's shard of it
  /// (StrategyOptions::shard of shards: shard_rows).
  std::int64_t samples() const { return samples_; }
  int features() const { return data_->features(); }
  /// Bytes of one sample's image in the transfer format (features or 4*features).
  std::size_t image_bytes_per_sample() const;
  std::size_t image_bytes() const { return image_bytes_per_sample() * samples(); }
  std::size_t label_bytes() const { return sizeof(std::int32_t) * samples(); }

  /// Write epoch `epoch`'s images (transfer format) and labels into host-writable memory.
  /// static: the same bytes for every epoch. refresh: a fresh shuffle + shift per epoch (the
  /// shift left to the GPU with --augment-device gpu: augment_after_copy.h). A
  /// shard: its rows of the whole epoch's, the same bytes the whole epoch has there.
  /// Multi-threaded over samples; deterministic regardless of thread count.
  void write(int epoch, void* images, std::int32_t* labels) const;
  /// The same bytes in the packed layout: sample i of batch b goes to block b of `blocks`
  /// (layout.block_offset(b)), its image at row i - first(b), its label in the block's label
  /// part. Written in place, no intermediate copy. `layout` must describe this writer's data
  /// (samples, image bytes per sample) at some batch size.
  void write_packed(int epoch, void* blocks, const PackedLayout& layout) const;

  /// The sample order epoch `epoch` uses (index into the original training set). With shards:
  /// the rows of the single-GPU batches g·shards + shard of the whole epoch's order, in order.
  std::vector<std::int32_t> order(int epoch) const;

 private:
  /// The whole epoch's order (static: one fixed shuffle; refresh and stream: a new shuffle
  /// every epoch), whatever the shard.
  std::vector<std::int32_t> whole_order(int epoch) const;
  /// This instance's rows of epoch `epoch` over the whole epoch's order `whole` (which must
  /// outlive the result).
  EpochRows rows_of(int epoch, const std::vector<std::int32_t>& whole) const;
  const HostDataset* data_;
  StrategyOptions opt_;
  std::int64_t samples_ = 0;
};

/// Rows of shard `shard` of `shards` of an epoch of `samples` rows in batches of `batch`: the rows
/// of the batches g·shards + shard (the last batch may be partial).
std::int64_t shard_rows(std::int64_t samples, int batch, int shard, int shards);

}  // namespace memstrat
