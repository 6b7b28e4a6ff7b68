// double_buffer_graph.h: DoubleBufferGraphStrategy (`double-buffer-graph`), the best form of
// `double-buffer`. The data lives in page-locked host memory in the packed layout
// (PackedHostBlocks: consecutive batches' blocks are contiguous), so a chunk of whole batches
// (--copy-chunk MiB; ChunkPlan) is ONE cudaMemcpyAsync, on copy stream(s) (--copy-streams,
// round-robin over chunks), into one of K device chunk slots (--depth), while the compute stream
// runs the steps of earlier chunks. The slots are a SlotRing over chunks: within an epoch a copy
// into a slot waits for the last step that read it (consumed event, recorded after the last batch
// of the chunk before), a chunk's first step for its copy (copied event); the copy streams fork
// from the compute stream in acquire(0) and join it in end_epoch(), so no event crosses an epoch
// (between epochs the graph launch boundary, or the fork, orders everything). A chunk's batches
// can be acquired together (launch_group), so with the single-launch step the trainer runs each
// chunk's steps in ONE kernel launch (kernel-per-chunk form); with another step it keeps the
// epoch-capture contract, and the trainer captures the whole epoch into one CUDA graph.
// What it removes from double-buffer: all but one copy per chunk (double-buffer makes two per
// batch, images and labels), each of which paid the copy's fixed cost and ran below the bus
// bandwidth a larger copy reaches, and the host's per-batch enqueue (copies, event records and
// waits, the step's launch), which keeps a host-bound pipeline from hiding anything; with one
// launch per chunk also the per-step launch and grid ramp-up, which resident's epoch launch
// avoids.
#pragma once

#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/packed_host_blocks.h"
#include "memory_strategies/slot_ring.h"

namespace memstrat {

class DoubleBufferGraphStrategy : public MemoryStrategy {
 public:
  std::string_view name() const override { return "double-buffer-graph"; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  /// A chunk: its one copy is all its batches wait for, and its slot is handed back after its
  /// last step, so all its steps can run in one launch while the next chunks copy.
  int launch_group() const override {
    return source_.written_before_epoch() ? plan_.batches_per_chunk() : 0;
  }
  void release(int b) override { ring_.release_batch(plan_, b); }
  void end_epoch() override { ring_.end_epoch(); }
  /// h2d_bytes: every chunk, every epoch (from the geometry: images, labels and the packing
  /// padding inside a chunk, if any); copy_ms: the copies' GPU time (events, re-recorded by a
  /// replayed epoch graph too).
  StrategyStats stats() const override {
    StrategyStats s;
    s.h2d_bytes = plan_.packed_epoch_bytes();
    s.copy_ms = ring_.copy_ms();
    return s;
  }
  bool epoch_capturable() const override { return source_.written_before_epoch(); }

 protected:
  /// Where the packed host blocks live: pinned storage of the strategy's own here; a region of
  /// the run's shared host set in host-shared-ring (host_shared_ring.h). Binds them to `source`.
  virtual void attach_blocks(PackedHostBlocks& blocks, HostEpochSource& source,
                             const HostDataset& data, const StrategyOptions& opt);

 private:
  HostEpochSource source_;
  PackedHostBlocks blocks_;
  ChunkPlan plan_;
  SlotRing ring_;  // over chunks
};

}  // namespace memstrat
