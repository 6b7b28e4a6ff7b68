// gpu_epoch_writer.h: GpuEpochWriter, the refresh scenario's epoch written by the GPU
// (--augment-device gpu): the training set is uploaded once, as uint8 in data-set order, and
// before each epoch's first batch one kernel (gather_augment) writes the whole epoch from it,
// in the epoch's order, augmented (`light`) and in the transfer format, into device memory laid
// out as EpochWriter lays out the host copy: the same bytes the host would have uploaded. Per
// epoch only the order crosses the bus (4 bytes a sample, and the epoch number).
//
// Use (a strategy member):
//   attach:      writer_.attach(data, opt, compute);  // uploads the set, synchronises `compute`
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
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/epoch_order.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

class GpuEpochWriter {
 public:
  /// Allocates the device set, the order (pinned staging and device) and the epoch's output;
  /// uploads the set (set-up, not in any epoch) and waits for it on `compute`.
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute);
  bool attached() const { return !order_dev_.empty(); }
  /// With the GPU idle: epoch `epoch`'s order (and the epoch) into the pinned staging copy.
  void begin_epoch(int epoch);
  /// Enqueues on the compute stream: the staging copy's upload, then the kernel that writes the
  /// whole epoch into images() and labels().
  void write();
  /// The epoch, laid out as the host copy: images in the transfer format, then labels.
  const void* images() const { return images_.data(); }
  const std::int32_t* labels() const { return labels_.data(); }
  /// The order's upload (h2d_bytes, copy_ms); the augmentation is a kernel, not a copy.
  StrategyStats stats() const { return upload_.stats(); }

 private:
  GatherSource src_;
  AugmentRows rows_;
  std::int64_t samples_ = 0;
  cudaStream_t compute_ = nullptr;
  std::optional<EpochOrder> order_;
  DeviceBuffer<std::uint8_t> set_images_;   // uint8, data-set order
  DeviceBuffer<std::int32_t> set_labels_;
  PinnedBuffer<std::int32_t> staging_;      // the order, then the epoch
  DeviceBuffer<std::int32_t> order_dev_;    // its device copy
  DeviceBuffer<std::uint8_t> images_;       // the epoch, transfer format
  DeviceBuffer<std::int32_t> labels_;
  CopyTimeline upload_;
};

}  // namespace memstrat
