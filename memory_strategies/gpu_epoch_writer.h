// gpu_epoch_writer.h: GpuEpochWriter, the refresh scenario's epoch written by the GPU
// (--augment-device gpu): the training set is stored once, as uint8 in data-set order, and
// before each epoch's first batch one kernel (gather_augment) writes the whole epoch from it,
// in the epoch's order, augmented (`light`) and in the transfer format, laid out as EpochWriter
// lays out the host copy: the same bytes the host would have written. Per epoch only the order
// crosses the bus explicitly (4 bytes a sample, and the epoch number).
//
// Where the set and the epoch live is the strategy's: attach() keeps both in device memory the
// writer allocates (resident: the set uploaded once); attach_to() reads the set from, and writes
// the epoch into, memory the strategy owns and the device addresses (zero-copy: mapped host
// memory, both crossing the bus every epoch; the um family: managed memory).
//
// Use (a strategy member):
//   attach:      writer_.attach(data, opt, compute);  // uploads the set, synchronises `compute`
//            or  writer_.attach_to(data, opt, set, images, labels, compute);  // the order only
//   begin_epoch: writer_.begin_epoch(epoch);          // GPU idle: the order into pinned staging
//   acquire(0):  writer_.write();                     // enqueued: order upload + the kernel
// write() enqueues the same work every epoch (the epoch is read from device memory, uploaded with
// the order), so an epoch graph that captured it replays it right.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "memory_strategies/augment_gpu.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/epoch_order.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// True when the GPU writes each epoch (GpuEpochWriter): the refresh scenario with
/// --augment-device gpu.
inline bool writes_epoch_on_gpu(const StrategyOptions& o) {
  return o.scenario == Scenario::Refresh && o.augment_device == AugmentDevice::Gpu;
}

class GpuEpochWriter {
 public:
  /// Device memory the order takes (its device copy, with the epoch number), for data of
  /// geometry `g`: all that attach_to() allocates on the device (pure).
  static std::uint64_t order_bytes(const BatchGeometry& g);
  /// Bytes of the uint8 set and its labels, for data of geometry `g` in transfer format `t`
  /// (pure).
  static std::uint64_t set_bytes(const BatchGeometry& g, Transfer t);
  /// Device memory attach() allocates for data of geometry `g` in transfer format `t`: the
  /// uint8 set, the order and the epoch (pure).
  static std::uint64_t device_bytes(const BatchGeometry& g, Transfer t);

  /// Allocates the device set, the order (pinned staging and device) and the epoch's output;
  /// uploads the set (set-up, not in any epoch) and waits for it on `compute`.
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute);
  /// The set and the epoch in the caller's memory, device-addressable and alive as long as this:
  /// `set` the uint8 training set in data-set order (GatherInput::write_set), `images` and
  /// `labels` room for one epoch (images in the transfer format). Allocates the order only.
  void attach_to(const HostDataset& data, const StrategyOptions& opt, const GatherSource& set,
                 void* images, std::int32_t* labels, cudaStream_t compute);
  bool attached() const { return !order_dev_.empty(); }
  /// With the GPU idle: epoch `epoch`'s order (and the epoch) into the pinned staging copy.
  void begin_epoch(int epoch);
  /// Enqueues on the compute stream: the staging copy's upload, then the kernel that writes the
  /// whole epoch into images() and labels().
  void write();
  /// The epoch, laid out as the host copy: images in the transfer format, then labels.
  const void* images() const { return images_; }
  const std::int32_t* labels() const { return labels_; }
  /// The order's upload (h2d_bytes, copy_ms); the augmentation is a kernel, not a copy.
  StrategyStats stats() const { return upload_.stats(); }

 private:
  /// What attach and attach_to share: the order and the kernel's rows.
  void attach_order(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute);
  GatherSource src_;
  AugmentRows rows_;
  std::int64_t samples_ = 0;
  cudaStream_t compute_ = nullptr;
  std::optional<EpochOrder> order_;
  DeviceBuffer<std::uint8_t> set_images_;  // attach: uint8, data-set order
  DeviceBuffer<std::int32_t> set_labels_;
  PinnedBuffer<std::int32_t> staging_;      // the order, then the epoch
  DeviceBuffer<std::int32_t> order_dev_;    // its device copy
  DeviceBuffer<std::uint8_t> epoch_images_;  // attach: the epoch, transfer format
  DeviceBuffer<std::int32_t> epoch_labels_;
  void* images_ = nullptr;  // the epoch: epoch_images_, or the caller's memory
  std::int32_t* labels_ = nullptr;
  CopyTimeline upload_;
};

}  // namespace memstrat
