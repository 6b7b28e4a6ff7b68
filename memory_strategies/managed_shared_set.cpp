#include "memory_strategies/managed_shared_set.h"

#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "memory_strategies/host_shared_set.h"  // region_offsets
#include "memory_strategies/replica_group.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

std::shared_ptr<ManagedSharedSet> ManagedSharedSet::for_rank(
    const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes,
    const char* strategy) {
  if (opt.group == nullptr)
    throw std::invalid_argument("ManagedSharedSet: a set shared by several GPUs needs the run's "
                                "ReplicaGroup (StrategyOptions::group)");
  ReplicaGroup& g = *opt.group;
  if (g.ranks() != opt.shards)
    throw std::invalid_argument("ManagedSharedSet: the group has " + std::to_string(g.ranks()) +
                                " ranks, the options " + std::to_string(opt.shards) + " shards");
  return g.shared<ManagedSharedSet>([&] {
    std::vector<std::uint64_t> bytes;
    for (int r = 0; r < g.ranks(); ++r) bytes.push_back(region_bytes(r));
    const std::uint64_t total = HostSharedSet::region_offsets(bytes, kAlign).back();
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
    : offsets_(HostSharedSet::region_offsets(bytes, kAlign)),
      memory_(static_cast<std::size_t>(offsets_.back())) {}

}  // namespace memstrat
