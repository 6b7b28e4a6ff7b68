// zero_copy_staged.h: ZeroCopyStagedStrategy (`zero-copy-staged`), the best form of `zero-copy`.
// The data lives in mapped pinned host memory, as for zero-copy, but in the packed layout (one
// 16-byte-aligned block per batch: images, then labels). Per batch an SM copy kernel (SmCopy)
// reads the block over PCIe ONCE, with coalesced 16-byte loads, into one of K device slots
// (--depth), on its own stream, while the compute stream runs an earlier batch; the step then
// reads device memory only. Slots are handed over by events exactly as in double-buffer:
//   copied[slot]   stage stream -> compute: the batch has arrived
//   consumed[slot] compute -> stage stream: the step that read the slot has finished
// What it removes from zero-copy: every read the step makes of X crossing the bus (the GEMMs
// read X more than once, at whatever width and pattern they use), replaced by one wide,
// coalesced pass, overlapped with the previous step.
//
// Capturable (epoch_capturable): the stage stream forks from the compute stream in acquire(0)
// and joins it in end_epoch(); batches 0..K-1 need no consumed event (the fork orders them
// after the previous epoch's steps), so every epoch enqueues the same work.
//
// Stream scenario: mapped slots (stream_slots.h), each already one block (images, labels); the
// staging kernel reads batch b's block from its slot once acquire(b) has it, and the slot goes
// back with release_after(slot, stage stream) right after that kernel. Not capturable then
// (what is staged from where depends on the workers).
#pragma once

#include <cstdint>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/sm_copy.h"
#include "memory_strategies/stream_slots.h"

namespace memstrat {

class ZeroCopyStagedStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "zero-copy-staged"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override;
  void end_epoch() override;
  /// h2d_bytes: what the staging kernels move per epoch (every block, from the geometry);
  /// copy_ms: their GPU time (events, re-recorded by a replayed epoch graph too).
  StrategyStats stats() const override;
  bool epoch_capturable() const override { return !host_slots_.attached(); }

 private:
  /// Stage batch b's block (at `block`, mapped, `bytes` long) into slot b % depth on the stage
  /// stream.
  void issue_copy(int b, const std::uint8_t* block, std::size_t bytes);
  StreamSlots host_slots_;  // stream scenario
  HostEpochSource source_;
  PackedLayout layout_;
  int depth_ = 2;
  PinnedBuffer<std::uint8_t> host_blocks_;         // mapped, packed layout
  const std::uint8_t* mapped_blocks_ = nullptr;    // its device alias
  std::vector<DeviceBuffer<std::uint8_t>> slots_;  // one block each
  SmCopy copier_;
  Stream stage_;
  std::vector<Event> copied_, consumed_;
  Event fork_, join_;
  CopyTimeline timeline_;
  std::uint64_t epoch_bytes_ = 0;
  int issued_ = 0;  // batches [0, issued_) of this epoch have their staging copy enqueued
};

}  // namespace memstrat
