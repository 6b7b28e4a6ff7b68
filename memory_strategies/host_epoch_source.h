// host_epoch_source.h: HostEpochSource, what every strategy holds: the epoch's data written into
// the strategy's own host storage through one EpochWriter (so every strategy moves exactly the
// same bytes), the one rule for when it is written (once at attach for static data, at every
// begin_epoch for refresh), the batch geometry, the transfer format and the compute stream.
// The host storage is laid out split (images, labels: bind) or packed (one block per batch:
// bind_packed); batch_geometry.h describes both.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "common/host_dataset.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// Batch b of geometry `g` in a buffer that holds batch b alone: images (in the transfer format
/// `t`) at `images`, its labels at `labels`.
BatchView batch_view(Transfer t, const BatchGeometry& g, const void* images,
                     const std::int32_t* labels, int b);

/// A strategy's member (composition, not a base class). Use in attach:
///   source_.configure(data, opt, compute);  // first: geometry and sizes, allocates nothing
///   ... allocate host storage of image_bytes() + label_bytes(), device buffers, streams ...
///   source_.bind(host_images, host_labels); // last: static data is written here
/// (or, packed: allocate packed().total_bytes() and source_.bind_packed(host_blocks)),
/// and call source_.begin_epoch(epoch) from the strategy's begin_epoch.
class HostEpochSource {
 public:
  void configure(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute);

  /// The host storage the epoch's data goes into: images in the transfer format (image_bytes())
  /// and samples() int32 labels, owned by the strategy and alive as long as it. Static data is
  /// written into it now, as part of set-up.
  void bind(void* images, std::int32_t* labels);
  /// The same for the packed layout: packed().total_bytes() of host storage, 16-byte aligned.
  void bind_packed(void* blocks);
  /// From the strategy's begin_epoch, with the GPU idle. Refresh: rewrites the bound host
  /// storage with epoch `epoch`'s data and returns true; static: nothing to do, returns false.
  bool begin_epoch(int epoch);

  const BatchGeometry& geometry() const { return geom_; }
  /// The packed layout of this geometry (valid after configure, whichever layout is bound).
  PackedLayout packed() const { return PackedLayout{geom_}; }
  cudaStream_t compute() const { return compute_; }
  bool refreshes() const { return writer_->refreshes(); }
  /// True when all of an epoch's data is in the host storage before the epoch starts (static:
  /// since bind; refresh: since begin_epoch) and nothing writes it while the epoch runs: the
  /// scenarios in which a captured epoch graph may be replayed (MemoryStrategy::epoch_capturable).
  bool written_before_epoch() const {
    return scenario_ == Scenario::Static || scenario_ == Scenario::Refresh;
  }
  std::int64_t samples() const { return geom_.samples; }
  /// Bytes of one epoch's images (transfer format) and labels.
  std::size_t image_bytes() const { return writer_->image_bytes(); }
  std::size_t label_bytes() const { return writer_->label_bytes(); }

  /// Batch b in storage laid out like the whole epoch (the host copy, a device mirror of it, or
  /// its mapped or managed alias): pointers offset by the geometry.
  BatchView epoch_view(const void* images, const std::int32_t* labels, int b) const;
  /// Batch b in a buffer that holds batch b alone (a device batch slot).
  BatchView slot_view(const void* images, const std::int32_t* labels, int b) const;
  /// Batch b in a buffer that holds its packed block alone (one copy filled it).
  BatchView packed_slot_view(const void* block, int b) const;
  /// Batch b in storage laid out like the whole epoch, packed.
  BatchView packed_epoch_view(const void* blocks, int b) const;

 private:
  void write(int epoch);  // into whichever storage is bound
  std::optional<EpochWriter> writer_;
  BatchGeometry geom_;
  Transfer transfer_ = Transfer::U8;
  Scenario scenario_ = Scenario::Static;
  cudaStream_t compute_ = nullptr;
  void* images_ = nullptr;  // bound host storage: split (images_, labels_) ...
  std::int32_t* labels_ = nullptr;
  void* blocks_ = nullptr;  // ... or packed
};

}  // namespace memstrat
