// host_epoch_source.h: HostEpochSource, what every strategy holds: the epoch's data written into
// the strategy's own host storage through one EpochWriter (so every strategy moves exactly the
// same bytes), the one rule for when it is written (once at attach for static data, at every
// begin_epoch for refresh), the batch geometry, the transfer format and the compute stream.
// BatchGeometry says where batch b sits in an epoch's contiguous data.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "common/host_dataset.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// Where batch b sits in an epoch's contiguous sample order.
struct BatchGeometry {
  std::int64_t samples = 0;
  int batch = 0;
  std::size_t image_bytes_per_sample = 0;
  int batches() const { return batch_count(samples, batch); }
  std::int64_t first(int b) const { return static_cast<std::int64_t>(b) * batch; }
  int rows(int b) const {
    return static_cast<int>(std::min<std::int64_t>(batch, samples - first(b)));
  }
  std::size_t image_offset(int b) const { return first(b) * image_bytes_per_sample; }
  std::size_t image_bytes(int b) const { return rows(b) * image_bytes_per_sample; }
  std::size_t label_bytes(int b) const { return rows(b) * sizeof(std::int32_t); }
  /// What one explicit copy of batch b moves: its images plus its labels.
  std::uint64_t bytes(int b) const { return image_bytes(b) + label_bytes(b); }
};

/// A strategy's member (composition, not a base class). Use in attach:
///   source_.configure(data, opt, compute);  // first: geometry and sizes, allocates nothing
///   ... allocate host storage of image_bytes() + label_bytes(), device buffers, streams ...
///   source_.bind(host_images, host_labels); // last: static data is written here
/// and call source_.begin_epoch(epoch) from the strategy's begin_epoch.
class HostEpochSource {
 public:
  void configure(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute);

  /// The host storage the epoch's data goes into: images in the transfer format (image_bytes())
  /// and samples() int32 labels, owned by the strategy and alive as long as it. Static data is
  /// written into it now, as part of set-up.
  void bind(void* images, std::int32_t* labels);
  /// From the strategy's begin_epoch, with the GPU idle. Refresh: rewrites the bound host
  /// storage with epoch `epoch`'s data and returns true; static: nothing to do, returns false.
  bool begin_epoch(int epoch);

  const BatchGeometry& geometry() const { return geom_; }
  cudaStream_t compute() const { return compute_; }
  bool refreshes() const { return writer_->refreshes(); }
  std::int64_t samples() const { return geom_.samples; }
  /// Bytes of one epoch's images (transfer format) and labels.
  std::size_t image_bytes() const { return writer_->image_bytes(); }
  std::size_t label_bytes() const { return writer_->label_bytes(); }

  /// Batch b in storage laid out like the whole epoch (the host copy, a device mirror of it, or
  /// its mapped or managed alias): pointers offset by the geometry.
  BatchView epoch_view(const void* images, const std::int32_t* labels, int b) const;
  /// Batch b in a buffer that holds batch b alone (a device batch slot).
  BatchView slot_view(const void* images, const std::int32_t* labels, int b) const;

 private:
  std::optional<EpochWriter> writer_;
  BatchGeometry geom_;
  Transfer transfer_ = Transfer::U8;
  cudaStream_t compute_ = nullptr;
  void* images_ = nullptr;  // bound host storage
  std::int32_t* labels_ = nullptr;
};

}  // namespace memstrat
