// zero_copy_staged.h: ZeroCopyStagedStrategy (`zero-copy-staged`), the best form of `zero-copy`.
// The data lives in mapped pinned host memory, as for zero-copy, but in the packed layout (one
// 16-byte-aligned block per batch: images, then labels; PackedHostBlocks). Per batch an SM copy
// kernel (SmCopy, --stage-blocks blocks) reads the block over PCIe ONCE, with coalesced 16-byte
// loads, into one of K device slots (--depth), on its own stream and in the block slots the
// single-launch step's grid leaves free for it, while the compute stream runs an earlier batch;
// the step then reads device memory only. The slots are a SlotRing: handed over by copied / consumed
// events as in double-buffer, forked from the compute stream in acquire(0) and joined in
// end_epoch(), so every epoch enqueues the same work (epoch_capturable in static and refresh).
// What it removes from zero-copy: every read the step makes of X crossing the bus (the GEMMs
// read X more than once, at whatever width and pattern they use), replaced by one wide,
// coalesced pass, overlapped with the previous step.
#pragma once

#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/packed_host_blocks.h"
#include "memory_strategies/slot_ring.h"
#include "memory_strategies/sm_copy.h"

namespace memstrat {

class ZeroCopyStagedStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "zero-copy-staged"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override { ring_.release(b); }
  void end_epoch() override { ring_.end_epoch(); }
  /// h2d_bytes: what the staging kernels move per epoch (every block, from the geometry);
  /// copy_ms: their GPU time (events, re-recorded by a replayed epoch graph too).
  StrategyStats stats() const override;
  bool epoch_capturable() const override { return source_.written_before_epoch(); }

 private:
  HostEpochSource source_;
  PackedHostBlocks blocks_;  // mapped
  SmCopy copier_;
  SlotRing ring_;
};

}  // namespace memstrat
