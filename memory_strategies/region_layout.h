// region_layout.h: RegionLayout, where each rank's region lies in a set that ONE allocation holds
// for every rank of a data-parallel run (HostSharedSet: portable pinned host memory;
// ManagedSharedSet: managed memory):
//   [rank 0's region][rank 1's region] ... [rank N-1's region]   (each starting `align`-aligned)
// and group_region_bytes, the one check every such set makes of the run's group before it asks
// each rank for its region's size. Pure: no device needed.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "memory_strategies/memory_strategy.h"  // StrategyOptions

namespace memstrat {

class RegionLayout {
 public:
  /// Region r's start for regions of `bytes[r]` bytes, each at a multiple of `align` (a power of
  /// two): bytes.size() + 1 offsets, the last one the set's size (no padding after the last
  /// region). Throws std::invalid_argument for no regions, an empty one or a bad alignment.
  static std::vector<std::uint64_t> offsets(const std::vector<std::uint64_t>& bytes,
                                            std::uint64_t align);

  RegionLayout(const std::vector<std::uint64_t>& bytes, std::uint64_t align)
      : offsets_(offsets(bytes, align)) {}

  int regions() const { return static_cast<int>(offsets_.size()) - 1; }
  /// The whole set's size.
  std::uint64_t bytes() const { return offsets_.back(); }
  std::uint64_t offset(int rank) const { return offsets_.at(static_cast<std::size_t>(rank)); }
  /// Region r's size: at least what rank r asked for (the padding to the next region's start).
  std::uint64_t region_bytes(int rank) const { return offset(rank + 1) - offset(rank); }

 private:
  std::vector<std::uint64_t> offsets_;
};

/// `region_bytes(r)` for every rank of the group `opt` names, after checking that there is one
/// (a set shared by several GPUs needs it) and that it has opt.shards ranks; `who` names the set
/// in the message of the std::invalid_argument it throws otherwise.
std::vector<std::uint64_t> group_region_bytes(
    const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes,
    const char* who);

}  // namespace memstrat
