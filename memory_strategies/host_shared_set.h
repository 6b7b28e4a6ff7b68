// host_shared_set.h: HostSharedSet, ONE page-locked host allocation (cudaHostAllocPortable: pinned
// for every GPU's context) cut into one region per rank of a data-parallel run: the host-shared
// strategies' shared copy of the training set. Each rank's strategy writes its own shard into its
// own region (the epoch writer, as on one GPU) and its GPU's copy engine reads it from there, so
// the N copy engines of the run read one host allocation at once, held once in host memory:
//   [rank 0's region][rank 1's region] ... [rank N-1's region]   (each starting kAlign-aligned)
// A region's size is a pure function of the rank (the strategy's layout of that rank's shard);
// whichever rank asks first allocates the whole set, so every rank passes the same function.
// Ownership: a ReplicaGroup holds it (ReplicaGroup::shared) and every rank's strategy holds a
// reference (shared_ptr). One GPU, and the emulation: one region, owned by the one strategy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "memory_strategies/memory_strategy.h"
#include "memory_strategies/region_layout.h"

namespace memstrat {

/// Rank `rank`'s region of a shared set (the host-shared and um-shared forms): its shard's images
/// in the transfer format, then, from the next HostSharedSet::kAlign boundary, its labels.
struct ShardRegion {
  std::uint64_t image_bytes = 0;
  std::uint64_t label_offset = 0;
  std::uint64_t bytes = 0;
};
ShardRegion shard_region(const HostDataset& data, const StrategyOptions& opt, int rank);

class HostSharedSet : public RegionLayout {
 public:
  /// Every region starts at a multiple of this many bytes.
  static constexpr std::uint64_t kAlign = 256;

  /// The set for the rank `opt` names, `region_bytes(r)` bytes for rank r: with a group (several
  /// GPUs), the group's one set, allocated by whichever rank asks first, for every rank of the
  /// group; without one (one GPU, the emulation), a set of one region of its own. Allocates
  /// (attach only).
  static std::shared_ptr<HostSharedSet> for_rank(
      const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes);

  /// One portable pinned allocation of the regions `bytes[r]` (RegionLayout at kAlign).
  explicit HostSharedSet(const std::vector<std::uint64_t>& bytes);

  /// Rank r's region: region_bytes(r) bytes, kAlign-aligned.
  std::uint8_t* region(int rank) const { return host_.data() + offset(rank); }

 private:
  PinnedBuffer<std::uint8_t> host_;
};

}  // namespace memstrat
