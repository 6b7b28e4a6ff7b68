// double_buffer.h: DoubleBufferStrategy (`double-buffer`): data in pinned host memory; K device
// batch slots (--depth) filled by one or more copy streams (--copy-streams) while the compute
// stream works on an earlier slot. Events hand each slot over in both directions:
//   copied[slot]   copy stream -> compute: the batch has arrived
//   consumed[slot] compute -> copy stream: the step that read the slot has finished
// so a copy never overwrites a slot the compute stream may still read.
// Stream scenario: the host memory is a ring of pinned slots (stream_slots.h). Batch b's copy is
// issued when acquire(b) has it (the host enqueues ahead of the GPU, so the copy of b overlaps
// the step of b-1 still running); the host slot goes back with release_after(slot, copy stream)
// recorded right after its copies.
#pragma once

#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/stream_slots.h"

namespace memstrat {

class DoubleBufferStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "double-buffer"; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override;
  void end_epoch() override {}
  StrategyStats stats() const override;

 private:
  /// Enqueue batch b (its images and labels at these host addresses) into slot b % depth on
  /// copy stream b % streams; returns that stream.
  cudaStream_t issue_copy(int b, const std::uint8_t* images, const std::int32_t* labels);
  HostEpochSource source_;
  StreamSlots host_slots_;  // stream scenario
  int depth_ = 2;
  PinnedBuffer<std::uint8_t> host_images_;
  PinnedBuffer<std::int32_t> host_labels_;
  std::vector<DeviceBuffer<std::uint8_t>> slot_images_;
  std::vector<DeviceBuffer<std::int32_t>> slot_labels_;
  std::vector<Stream> copy_streams_;
  std::vector<Event> copied_, consumed_;
  std::vector<char> consumed_recorded_;
  CopyTimeline timeline_;
  int issued_ = 0;  // batches [0, issued_) of this epoch have their copy enqueued
};

}  // namespace memstrat
