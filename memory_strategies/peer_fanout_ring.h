// peer_fanout_ring.h: PeerFanoutRingStrategy (`peer-fanout-ring`), the best form of `peer-fanout`.
// The same shared set on rank 0's GPU (PeerSet) and the same in-place reads on rank 0, on one GPU
// and in the emulation; on every other rank, the peer copies leave the compute stream: a chunk of
// the rank's consecutive packed batches (--copy-chunk MiB; ChunkPlan) is ONE cudaMemcpyPeerAsync
// from rank 0's memory, on copy stream(s) (--copy-streams), into one of K local chunk slots
// (--depth), while the compute stream runs the steps of earlier chunks: the SlotRing that
// double-buffer-graph runs for host->device copies, with a peer copy as its fill. Events hand
// each slot over (copied: the step waits for its chunk; consumed: a copy waits for the last step
// that read its slot); the copy streams fork from the compute stream at the epoch's first batch
// and join it at its end. What it removes from peer-fanout: the step's wait for every batch's
// copy (hidden behind the previous chunk's steps) and all but one copy per chunk.
// Static scenario only. Bytes: StrategyStats::peer_bytes (every chunk, every epoch).
#pragma once

#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/peer_set.h"
#include "memory_strategies/slot_ring.h"

namespace memstrat {

class PeerFanoutRingStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "peer-fanout-ring"; }
  /// Device memory attach() allocates on this rank's GPU for options `opt` and data of geometry
  /// `g` (the whole training set): the set on rank 0 (and on one GPU), --depth chunk slots on
  /// another rank. Pure, no device needed (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int) override {
    if (!shard_.local()) ring_.begin_epoch();
  }
  BatchView acquire(int b) override;
  void release(int b) override {
    if (!shard_.local()) ring_.release_batch(plan_, b);
  }
  void end_epoch() override {
    if (!shard_.local()) ring_.end_epoch();
  }
  StrategyStats stats() const override;
  bool acquire_ahead() const override { return shard_.local(); }
  /// Another rank: a chunk's batches wait for its one copy only, and the ring keeps the
  /// epoch-capture contract (double-buffer-graph's forms). In place: resident's forms.
  int launch_group() const override { return shard_.local() ? 0 : plan_.batches_per_chunk(); }
  bool epoch_capturable() const override { return !shard_.local(); }
  LaunchForms launch_forms() const override {
    return shard_.local() ? LaunchForms{true, 0, true}
                          : LaunchForms{false, plan_.batches_per_chunk(), true};
  }

 private:
  HostEpochSource source_;  // this rank's shard: geometry and views (its bytes live in the set)
  PeerShard shard_;
  ChunkPlan plan_;
  SlotRing ring_;  // another rank: over chunks
};

}  // namespace memstrat
