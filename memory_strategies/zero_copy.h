// zero_copy.h: ZeroCopyStrategy (`zero-copy`): data in mapped pinned host memory
// (cudaHostAlloc(..., cudaHostAllocMapped)); kernels and cuBLAS read it over the bus through the
// device pointer, nothing is copied. Every read of the input crosses PCIe (the GEMMs read X more
// than once per step).
// Stream scenario: mapped slots (stream_slots.h) read in place by the step; release(b) hands the
// slot back with release_after(slot, compute), after the step that reads it was enqueued. With
// --augment none, or light/heavy with --augment-device gpu, the GPU gathers (and augments) each
// batch from the mapped training set (gather_input.h; uint8 where it augments) into one device
// batch: every row it reads crosses the bus, once per epoch.
// Refresh with --augment-device gpu: the uint8 set and the epoch both in mapped memory; before the
// epoch's first batch one kernel reads the set and writes the epoch over the bus
// (gpu_epoch_writer.h), and the steps read it in place as with the host's rewrite.
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/gather_input.h"
#include "memory_strategies/gpu_epoch_writer.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/stream_slots.h"

namespace memstrat {

class ZeroCopyStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "zero-copy"; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override;
  void end_epoch() override {}
  /// No explicit transfers (CUPTI can't see the kernels' reads of mapped memory either); in
  /// the stream scenario the producers' figures, or the gather order's upload; with the epoch
  /// written on the GPU, the order's upload (its reads and writes of mapped memory are not
  /// counted either).
  StrategyStats stats() const override;
  /// Static and refresh: a batch is a fixed offset into the mapped set and acquire enqueues
  /// nothing (or, the epoch written on the GPU, acquire(0) the order's upload and the kernel that
  /// writes it, the same work every epoch), so every batch can be acquired before any step (the
  /// kernel forms: the single-launch step reads the mapped batch where it lies, as the per-batch
  /// step does) and an epoch graph holds the steps (and that work). The stream scenario: per
  /// batch.
  LaunchForms launch_forms() const override {
    const bool fixed = !slots_.attached() && !gather_.attached();
    return {fixed, 0, fixed && source_.written_before_epoch()};
  }

 private:
  HostEpochSource source_;
  PinnedBuffer<std::uint8_t> host_images_;  // mapped
  PinnedBuffer<std::int32_t> host_labels_;  // mapped
  const std::uint8_t* dev_images_ = nullptr;  // device aliases of the mapped memory
  const std::int32_t* dev_labels_ = nullptr;
  StreamSlots slots_;    // stream scenario, host workers
  GatherInput gather_;   // stream scenario, --augment none or --augment-device gpu
  PinnedBuffer<std::uint8_t> set_images_;  // mapped: the uint8 set the GPU writes epochs from
  PinnedBuffer<std::int32_t> set_labels_;
  GpuEpochWriter gpu_writer_;  // refresh scenario, --augment-device gpu
};

}  // namespace memstrat
