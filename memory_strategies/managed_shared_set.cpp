#include "memory_strategies/managed_shared_set.h"

#include "common/cuda_check.h"
#include "memory_strategies/replica_group.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

std::shared_ptr<ManagedSharedSet> ManagedSharedSet::for_rank(
    const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes,
    const char* strategy) {
  const std::vector<std::uint64_t> bytes =
      group_region_bytes(opt, region_bytes, "ManagedSharedSet");
  ReplicaGroup& g = *opt.group;
  return g.shared<ManagedSharedSet>([&] {
    const std::uint64_t total = RegionLayout(bytes, kAlign).bytes();
    // Every GPU of the run could come to hold the whole set: it must fit each of them.
    int current = 0;
    CUDA_CHECK(cudaGetDevice(&current));
    for (int r = 0; r < g.ranks(); ++r) {
      CUDA_CHECK(cudaSetDevice(g.device(r)));
      check_managed_fits(static_cast<std::size_t>(total), strategy);
    }
    CUDA_CHECK(cudaSetDevice(current));
    return std::make_shared<ManagedSharedSet>(bytes);
  });
}

ManagedSharedSet::ManagedSharedSet(const std::vector<std::uint64_t>& bytes)
    : RegionLayout(bytes, kAlign), memory_(static_cast<std::size_t>(RegionLayout::bytes())) {}

}  // namespace memstrat
