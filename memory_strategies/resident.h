// resident.h: ResidentStrategy (`resident`): the whole training set lives in device memory,
// uploaded once (static) or once per epoch before its first batch (refresh); a batch is a
// pointer offset. The upper bound every other strategy is measured against.
// Stream scenario (--augment none, or light/heavy with --augment-device gpu: host augmentation
// would make every batch cross the bus, which is what the copying strategies measure): the set
// is uploaded once, in data-set order, and the GPU gathers (and augments) each batch from it
// (gather_input.h). Refresh with --augment-device gpu: the set is uploaded once and the GPU
// writes each epoch from it before the epoch's first batch (gpu_epoch_writer.h).
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/gather_input.h"
#include "memory_strategies/gpu_epoch_writer.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class ResidentStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "resident"; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override {
    if (gather_.attached()) return gather_.stats();
    return gpu_writer_.attached() ? gpu_writer_.stats() : timeline_.stats();
  }
  /// Every batch is a fixed offset into device memory (a refresh epoch's upload, or its writing
  /// on the GPU, is enqueued by acquire(0), before any compute); a gathered batch is not (one
  /// batch buffer, reused).
  bool acquire_ahead() const override { return !gather_.attached(); }
  /// Besides the epoch kernel (and any grouping of it), an epoch graph: every epoch enqueues the
  /// same work (static: nothing; refresh: acquire(0)'s upload from the pinned host copy that
  /// begin_epoch rewrote, two copies on the compute stream; or, augmenting on the GPU, the
  /// order's upload from pinned staging that begin_epoch rewrote and the kernel that reads the
  /// epoch from it), and the copy timeline is recorded again by every replay. The gathered stream batches: per batch only.
  LaunchForms launch_forms() const override {
    const bool fixed = !gather_.attached();
    return {fixed, 0, fixed && source_.written_before_epoch()};
  }

 private:
  void upload();
  HostEpochSource source_;
  PinnedBuffer<std::uint8_t> host_images_;  // staging for the (re)uploads
  PinnedBuffer<std::int32_t> host_labels_;
  DeviceBuffer<std::uint8_t> dev_images_;
  DeviceBuffer<std::int32_t> dev_labels_;
  CopyTimeline timeline_;
  bool upload_pending_ = false;
  GatherInput gather_;  // stream scenario
  GpuEpochWriter gpu_writer_;  // refresh scenario, --augment-device gpu
};

}  // namespace memstrat
