// peer_set.h: PeerSet, the training set resident ONCE, in device memory of one GPU (rank 0's), for
// every rank of a data-parallel run to read: the peer-fanout strategies' shared copy. It holds
// each rank's shard as that rank's static epoch (EpochWriter with StrategyOptions::shard), in the
// packed layout (batch_geometry.h: one block per batch, images then labels), shard after shard:
//   [shard 0's blocks][shard 1's blocks] ... [shard N-1's blocks]
// so a rank's batch, or a chunk of its consecutive batches, is ONE byte range of rank 0's memory:
// one peer copy moves it. Rank 0 reads its own shard in place. Written through pinned staging and
// uploaded once at set-up (the staging is freed after); never written again (static scenario).
// Ownership: a ReplicaGroup holds it (ReplicaGroup::shared) and every rank's strategy holds a
// reference (shared_ptr), so it lives as long as the last of them. One GPU, and the emulation:
// one shard, the whole epoch, owned by the one strategy (what resident holds, packed).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "common/peer_access.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

class PeerSet {
 public:
  /// Where each shard's packed epoch starts in the set: `shards` + 1 offsets, the last one the
  /// set's size, each a multiple of PackedLayout::kAlign. `g` is the whole epoch's geometry
  /// (g.samples: the training set); shard r holds shard_rows(g.samples, g.batch, r, shards) rows.
  /// Pure: no device needed.
  static std::vector<std::uint64_t> shard_offsets(const BatchGeometry& g, int shards);
  /// Geometry of shard r's epoch (what rank r's HostEpochSource has).
  static BatchGeometry shard_geometry(const BatchGeometry& g, int shard, int shards);

  /// The set for the rank `opt` names: with a group (several GPUs), the group's one set, made on
  /// the group's rank-0 GPU by whichever rank asks first; without one (one GPU, the emulation), a
  /// set of its own on the current GPU. Allocates and uploads (attach only).
  static std::shared_ptr<const PeerSet> for_rank(const HostDataset& data,
                                                 const StrategyOptions& opt);

  /// Allocates on `device` (made current meanwhile), writes every shard's epoch into pinned
  /// staging and uploads it once. opt.shard is ignored; `shards` shards.
  PeerSet(const HostDataset& data, const StrategyOptions& opt, int shards, int device);
  /// Frees the set with its own GPU current (the last owner may run with another one current).
  ~PeerSet();
  PeerSet(const PeerSet&) = delete;
  PeerSet& operator=(const PeerSet&) = delete;

  int device() const { return device_; }
  int shards() const { return static_cast<int>(offsets_.size()) - 1; }
  std::uint64_t bytes() const { return offsets_.back(); }
  /// Device address of shard r's packed epoch on device() (block b of shard r at
  /// + PackedLayout::block_offset(b) of its geometry).
  const std::uint8_t* shard_blocks(int shard) const {
    return blocks_.data() + offsets_.at(static_cast<std::size_t>(shard));
  }

 private:
  int device_ = 0;
  std::vector<std::uint64_t> offsets_;
  DeviceBuffer<std::uint8_t> blocks_;
};

}  // namespace memstrat

namespace memstrat {

/// What one rank's peer-fanout strategy holds: the shared set, where its shard's blocks are in it,
/// and, on a GPU other than the set's, the peer access that lets this GPU read them.
class PeerShard {
 public:
  /// From the strategy's attach, with this rank's GPU current: the set (PeerSet::for_rank) and,
  /// where it is on another GPU, peer access to it (PeerAccess::enable: throws where there is
  /// none; the registry waives such a device first, DeviceCaps::can_access_first_gpu).
  void attach(const HostDataset& data, const StrategyOptions& opt);
  /// The set is on this GPU (rank 0, one GPU, the emulation): batches are read in place.
  bool local() const { return local_; }
  /// Device address of this rank's shard epoch in the set (on the set's GPU).
  const std::uint8_t* blocks() const { return set_->shard_blocks(shard_); }
  /// Enqueue ONE cudaMemcpyPeerAsync of bytes [offset, offset + bytes) of this shard's blocks
  /// into `dst` (this GPU's memory) on `s` (a stream of this GPU).
  void copy(std::size_t offset, std::size_t bytes, void* dst, cudaStream_t s) const;

 private:
  std::shared_ptr<const PeerSet> set_;
  PeerAccess access_;
  int shard_ = 0;
  int device_ = 0;
  bool local_ = true;
};

}  // namespace memstrat
