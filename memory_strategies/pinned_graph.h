// pinned_graph.h: PinnedGraphStrategy (`pinned-graph`), the best form of `pinned`. The data lives
// in page-locked host memory as for pinned, but in the packed layout (PackedHostBlocks: per batch
// one block, its images then its labels, consecutive blocks contiguous), so a chunk of whole
// batches (--copy-chunk MiB; ChunkPlan) is ONE cudaMemcpyAsync into one device chunk slot, on the
// compute stream, before the first step of the chunk: serial, exactly as pinned (a chunk's copy
// waits for the previous chunk's last step, the chunk's steps for its copy). It keeps the
// epoch-capture contract (the same work every epoch, nothing on another stream), so the trainer
// captures the whole epoch, copies and steps, into one CUDA graph and replays it: no per-batch
// host enqueue at all.
// What it removes from pinned: all but one copy in every chunk (pinned makes two per batch,
// images and labels), each of which paid the copy's fixed cost and ran below the bus bandwidth a
// larger copy reaches, and, through the epoch graph, the host's per-batch enqueue cost (copy
// calls, step launch, events), which at small batches is as long as the step itself.
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/packed_host_blocks.h"

namespace memstrat {

class PinnedGraphStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "pinned-graph"; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override { source_.begin_epoch(epoch); }
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  /// h2d_bytes: every chunk, every epoch (from the geometry: images, labels and the packing
  /// padding inside a chunk, if any); copy_ms: the copies' GPU time (events, re-recorded by a
  /// replayed epoch graph too).
  StrategyStats stats() const override;
  bool epoch_capturable() const override { return source_.written_before_epoch(); }
  /// Besides the epoch graph, one launch per chunk (asked for: --launch-form kernel-per-chunk): a
  /// chunk's copy into the slot is enqueued by its first acquire, so all its batches can be
  /// acquired before its steps, and the next chunk's copy is enqueued on the compute stream after
  /// them (the slot stays valid until the chunk's last batch is released). Not one launch per
  /// epoch: one slot holds one chunk.
  LaunchForms launch_forms() const override {
    return {false, epoch_capturable() ? plan_.batches_per_chunk() : 0, epoch_capturable()};
  }

 private:
  HostEpochSource source_;
  PackedHostBlocks blocks_;
  ChunkPlan plan_;
  DeviceBuffer<std::uint8_t> slot_;  // one chunk
  CopyTimeline timeline_;            // per chunk; never reset: every epoch records every chunk
};

}  // namespace memstrat
