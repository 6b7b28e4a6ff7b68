// double_buffer.h: DoubleBufferStrategy (`double-buffer`): data in pinned host memory; K device
// batch slots (--depth) filled by one or more copy streams (--copy-streams) while the compute
// stream works on an earlier slot. Events hand each slot over in both directions:
//   copied[slot]   copy stream -> compute: the batch has arrived
//   consumed[slot] compute -> copy stream: the step that read the slot has finished
// so a copy never overwrites a slot the compute stream may still read.
#pragma once

#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class DoubleBufferStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "double-buffer"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override;
  void end_epoch() override {}
  StrategyStats stats() const override { return timeline_.stats(); }

 private:
  void issue_copy(int b);  // enqueue batch b into slot b % depth on copy stream b % streams
  HostEpochSource source_;
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
