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

namespace memstrat {

/// Rank `rank`'s region of a shared set (the host-shared and um-shared forms): its shard's images
/// in the transfer format, then, from the next HostSharedSet::kAlign boundary, its labels.
struct ShardRegion {
  std::uint64_t image_bytes = 0;
  std::uint64_t label_offset = 0;
  std::uint64_t bytes = 0;
};
ShardRegion shard_region(const HostDataset& data, const StrategyOptions& opt, int rank);

class HostSharedSet {
 public:
  /// Every region starts at a multiple of this many bytes.
  static constexpr std::uint64_t kAlign = 256;
  /// Region r's start for regions of `bytes[r]` bytes, each at a multiple of `align` (a power
  /// of two): bytes.size() + 1 offsets, the last one the set's size. Pure: no device needed.
  /// ManagedSharedSet cuts its managed set the same way, at its own alignment.
  static std::vector<std::uint64_t> region_offsets(const std::vector<std::uint64_t>& bytes,
                                                   std::uint64_t align = kAlign);

  /// The set for the rank `opt` names, `region_bytes(r)` bytes for rank r: with a group (several
  /// GPUs), the group's one set, allocated by whichever rank asks first, for every rank of the
  /// group; without one (one GPU, the emulation), a set of one region of its own. Allocates
  /// (attach only).
  static std::shared_ptr<HostSharedSet> for_rank(
      const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes);

  /// One portable pinned allocation of the regions `bytes[r]`.
  explicit HostSharedSet(const std::vector<std::uint64_t>& bytes);

  int regions() const { return static_cast<int>(offsets_.size()) - 1; }
  std::uint64_t bytes() const { return offsets_.back(); }
  /// Rank r's region: region_bytes(r) bytes, kAlign-aligned.
  std::uint8_t* region(int rank) const {
    return host_.data() + offsets_.at(static_cast<std::size_t>(rank));
  }
  std::uint64_t region_bytes(int rank) const {
    return offsets_.at(static_cast<std::size_t>(rank) + 1) -
           offsets_.at(static_cast<std::size_t>(rank));
  }

 private:
  std::vector<std::uint64_t> offsets_;
  PinnedBuffer<std::uint8_t> host_;
};

}  // namespace memstrat
