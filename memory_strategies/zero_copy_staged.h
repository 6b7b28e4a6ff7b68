// zero_copy_staged.h: ZeroCopyStagedStrategy (`zero-copy-staged`), the best form of `zero-copy`.
// The data lives in mapped pinned host memory, as for zero-copy, but in the packed layout (one
// 16-byte-aligned block per batch: images, then labels; PackedHostBlocks; consecutive blocks are
// contiguous). Per chunk of whole batches (--copy-chunk MiB; ChunkPlan) an SM copy kernel
// (SmCopy, --stage-blocks blocks) reads the chunk's one range over PCIe ONCE, with coalesced
// 16-byte loads, into one of K device chunk slots (--depth), on its own stream and in the block
// slots the single-launch step's grid leaves free for it, while the compute stream runs the steps
// of an earlier chunk; the steps then read device memory only. The slots are a SlotRing over
// chunks: handed over by copied / consumed events as in double-buffer-graph, forked from the
// compute stream in acquire(0) and joined in end_epoch(), so every epoch enqueues the same work
// (epoch_capturable in static and refresh). A chunk's batches can be acquired together
// (launch_group), so with the single-launch step the trainer runs each chunk's steps in ONE
// kernel launch (kernel-per-chunk form); with another step it captures the epoch as one graph.
// What it removes from zero-copy: every read the step makes of X crossing the bus (the GEMMs
// read X more than once, at whatever width and pattern they use), replaced by one wide,
// coalesced pass, overlapped with the previous chunk's steps. Larger chunks read the bus at a
// higher rate (the sm-copy-mapped primitive's curve) and hand over less often, but the epoch's
// first chunk is copied before any step and its last chunk's steps run after the last copy.
#pragma once

#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/packed_host_blocks.h"
#include "memory_strategies/slot_ring.h"
#include "memory_strategies/sm_copy.h"

namespace memstrat {

class ZeroCopyStagedStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "zero-copy-staged"; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  /// A chunk: its one staging copy is all its batches wait for, and its slot is handed back after
  /// its last step, so all its steps can run in one launch while the next chunks are staged.
  int launch_group() const override {
    return source_.written_before_epoch() ? plan_.batches_per_chunk() : 0;
  }
  void release(int b) override { ring_.release_batch(plan_, b); }
  void end_epoch() override { ring_.end_epoch(); }
  /// h2d_bytes: what the staging kernels move per epoch (every chunk, from the geometry);
  /// copy_ms: their GPU time (events, re-recorded by a replayed epoch graph too).
  StrategyStats stats() const override;
  bool epoch_capturable() const override { return source_.written_before_epoch(); }

 private:
  HostEpochSource source_;
  PackedHostBlocks blocks_;  // mapped
  ChunkPlan plan_;
  SmCopy copier_;
  SlotRing ring_;  // over chunks
};

}  // namespace memstrat
