// managed_shared_set.h: ManagedSharedSet, ONE cudaMallocManaged allocation cut into one region per
// rank of a data-parallel run: the um-shared strategies' shared copy of the training set. Each
// rank's strategy writes its own shard into its own region (the epoch writer, as on one GPU), and
// each GPU reads only its own region, where the strategy's hints put it (managed.h):
//   [rank 0's region][rank 1's region] ... [rank N-1's region]   (each starting kAlign-aligned)
// kAlign is 2 MiB, the largest page the driver migrates as one, so that no page holds two ranks'
// data (a page shared by two GPUs' shards would move back and forth between them).
// A region's size is a pure function of the rank; whichever rank asks first allocates the whole
// set (after checking that it fits every GPU of the run: the suite never oversubscribes managed
// memory), so every rank passes the same function. Ownership as HostSharedSet's: the run's
// ReplicaGroup holds it and every rank's strategy holds a reference. Without a group (one GPU,
// the emulation) the managed strategies allocate their own buffers and never make one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/memory_strategy.h"
#include "memory_strategies/region_layout.h"

namespace memstrat {

class ManagedSharedSet : public RegionLayout {
 public:
  /// Every region starts at a multiple of this many bytes (2 MiB).
  static constexpr std::uint64_t kAlign = 2ull << 20;

  /// The run's one set for the rank `opt` names (opt.group must be set: several GPUs),
  /// `region_bytes(r)` bytes for rank r. The first caller checks that the whole set fits every
  /// GPU of the group (check_managed_fits on each, `strategy` naming who asks) and allocates it.
  static std::shared_ptr<ManagedSharedSet> for_rank(
      const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes,
      const char* strategy);

  /// One managed allocation of the regions `bytes[r]` (RegionLayout at kAlign).
  explicit ManagedSharedSet(const std::vector<std::uint64_t>& bytes);

  /// Rank r's region: region_bytes(r) bytes, kAlign-aligned.
  std::uint8_t* region(int rank) const { return memory_.data() + offset(rank); }

 private:
  ManagedBuffer<std::uint8_t> memory_;
};

}  // namespace memstrat
