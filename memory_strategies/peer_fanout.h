// peer_fanout.h: PeerFanoutStrategy (`peer-fanout`), the naive form of the peer fan-out data path
// of data-parallel training on several GPUs (--gpus N). The training set is resident ONCE, on rank
// 0's GPU (PeerSet: each rank's shard as its static epoch, packed, uploaded once at set-up), and
// every other rank pulls its batch from there over NVLink or PCIe peer access: its own SMs read
// the batch's packed block (images and labels) from rank 0's memory into one local batch slot
// (SmCopy, one kernel), enqueued on its compute stream right before its step, so the step waits
// for the copy and the next copy for the step (no overlap; peer-fanout-ring overlaps them, with
// copy-engine copies on copy streams). Not a copy-engine copy on the compute stream: on two H100s
// (NVLink), a cudaMemcpyPeerAsync there, ahead of the NCCL collective on the same stream, never
// finished in 9 of 17 runs (GPU 1 idle, GPU 0 spinning in the first epoch's collective), a
// cudaMemcpyAsync in 4 of 5; the SM read finished in all of 21 (docs/strategies.md). Rank 0 reads
// its shard in place, as resident does. Peer access from each rank to rank 0 is enabled at attach
// and disabled when the strategy goes (PeerAccess); a GPU that cannot read rank 0's memory is
// waived.
// One GPU and --emulate-gpus: there is no other GPU to fan out to, so the strategy is resident's
// data path (the set uploaded once, a batch a pointer offset into it), rather than refused: the
// emulation is the reference the several-GPU run is held to bitwise, and it must run the same
// strategy. Static scenario only: the set is written once, at set-up.
// Bytes: peer copies count as StrategyStats::peer_bytes (the record's peer_bytes), not as
// h2d_bytes; the set-up upload counts in no epoch (as resident's).
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/peer_set.h"
#include "memory_strategies/sm_copy.h"

namespace memstrat {

class PeerFanoutStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "peer-fanout"; }
  /// Device memory attach() allocates on this rank's GPU for options `opt` and data of geometry
  /// `g` (the whole training set): the set on rank 0 (and on one GPU), one batch slot on another
  /// rank. Pure, no device needed (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int) override { timeline_.begin_epoch(); }
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override;
  /// In place (rank 0, one GPU): every batch a fixed offset, nothing enqueued (resident's forms).
  bool acquire_ahead() const override { return shard_.local(); }
  LaunchForms launch_forms() const override { return {shard_.local(), 0, shard_.local()}; }

 private:
  HostEpochSource source_;  // this rank's shard: geometry and views (its bytes live in the set)
  PeerShard shard_;
  DeviceBuffer<std::uint8_t> slot_;  // another rank: the batch being read
  SmCopy read_;                      // another rank: its SMs' read of rank 0's memory
  CopyTimeline timeline_;
};

}  // namespace memstrat
