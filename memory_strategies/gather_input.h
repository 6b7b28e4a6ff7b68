// gather_input.h: GatherInput, the stream scenario for strategies whose training set the GPU can
// address (resident: device memory; zero-copy: mapped memory; the um family: managed memory)
// when there is no host augmentation (--augment none, or --augment-device gpu): the set is
// written once, in data-set order, and each batch is gathered on the GPU (gather_batch, on the
// compute stream; gather_augment, which also augments it, with --augment-device gpu) from the
// epoch's fresh permutation, uploaded to the device at the start of every epoch, into one
// device batch buffer. No host worker is involved. This is where the strategies' memory meets
// scattered 784-byte rows: resident reads device memory, zero-copy reads each row over the
// bus, unified memory migrates the pages the rows live on.
//
// Use (a strategy member):
//   attach:      GatherInput::write_set(data, GatherInput::set_format(opt), host_images,
//                                       host_labels);  // set_image_bytes(data, opt) of images
//                ... make the set device-addressable (upload, map, or leave it managed) ...
//                gather_.attach(data, opt, set_images, set_labels, compute);
//   begin_epoch: gather_.begin_epoch(epoch);          // GPU idle: reshuffle, upload the order
//   acquire(b):  return gather_.gather(b);            // enqueued on the compute stream
// The batch buffer is reused by every batch: the gather of b+1 is ordered after the step of b
// on the compute stream, and the view is the same for every batch (per-batch graphs hold).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/epoch_order.h"
#include "memory_strategies/augment_gpu.h"
#include "memory_strategies/gather.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// True when a strategy whose data the GPU can address serves the run by GatherInput: the
/// stream scenario without host augmentation (none at all, or on the GPU).
inline bool gathers_on_gpu(const StrategyOptions& o) {
  return o.scenario == Scenario::Stream &&
         (o.augment == Augment::None || o.augment_device == AugmentDevice::Gpu);
}

class GatherInput {
 public:
  /// The training set in data-set order (sample i at row i), in the transfer format `t`, into
  /// host-writable storage of data.n_train() rows and labels.
  static void write_set(const HostDataset& data, Transfer t, void* images, std::int32_t* labels);
  /// The format the set is written in: the transfer format, or uint8 where the GPU augments (the
  /// kernel reads pixels and writes the transfer format).
  static Transfer set_format(const StrategyOptions& opt);
  /// Bytes of the set's images in that format.
  static std::size_t set_image_bytes(const HostDataset& data, const StrategyOptions& opt);
  /// Bytes of the set, images in that format and labels, for data of geometry `g` (in the
  /// transfer format opt.transfer): what a strategy stores it in (pure).
  static std::uint64_t set_bytes(const StrategyOptions& opt, const BatchGeometry& g);

  /// Device memory attach() allocates for data of geometry `g`: the epoch's order and one
  /// batch buffer (pure).
  static std::uint64_t device_bytes(const BatchGeometry& g);
  /// `images`/`labels`: the set write_set wrote, as the device addresses it. Allocates the
  /// device order, its pinned staging copy and one device batch.
  void attach(const HostDataset& data, const StrategyOptions& opt, const void* images,
              const std::int32_t* labels, cudaStream_t compute);
  bool attached() const { return !order_dev_.empty(); }

  /// With the GPU idle: epoch `epoch`'s permutation, uploaded on the compute stream.
  void begin_epoch(int epoch);
  /// Data-set indices of batch b's rows (host side, this epoch).
  const std::int32_t* rows_of(int b) const { return order_->rows_from(geom_.first(b)); }
  /// Enqueues the gather of batch b on the compute stream; its view (the device batch).
  BatchView gather(int b);
  /// The batches, in the transfer format.
  const BatchGeometry& geometry() const { return geom_; }
  /// Bytes of one row of the set (its format: set_format).
  std::size_t set_row_bytes() const { return src_.row_bytes; }
  /// The order's upload this epoch (h2d_bytes, copy_ms); the gathers are kernels, not copies.
  StrategyStats stats() const { return upload_.stats(); }

 private:
  GatherSource src_;
  BatchGeometry geom_;
  Transfer transfer_ = Transfer::U8;
  std::optional<AugmentRows> augment_;  // --augment-device gpu: what gather_augment applies
  cudaStream_t compute_ = nullptr;
  std::optional<EpochOrder> order_;
  PinnedBuffer<std::int32_t> order_staging_;
  DeviceBuffer<std::int32_t> order_dev_;
  DeviceBuffer<std::uint8_t> batch_images_;
  DeviceBuffer<std::int32_t> batch_labels_;
  CopyTimeline upload_;
};

}  // namespace memstrat
