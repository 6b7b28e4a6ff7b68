#include "memory_strategies/host_shared_set.h"

#include <stdexcept>

#include "memory_strategies/epoch_data.h"  // shard_rows, transfer_bytes_per_sample
#include "memory_strategies/replica_group.h"

namespace memstrat {

ShardRegion shard_region(const HostDataset& data, const StrategyOptions& opt, int rank) {
  const std::int64_t rows = shard_rows(data.n_train(), opt.batch, rank, opt.shards);
  ShardRegion l;
  l.image_bytes = static_cast<std::uint64_t>(rows) *
                  transfer_bytes_per_sample(data.features(), opt.transfer);
  l.label_offset = (l.image_bytes + HostSharedSet::kAlign - 1) / HostSharedSet::kAlign *
                   HostSharedSet::kAlign;
  l.bytes = l.label_offset + static_cast<std::uint64_t>(rows) * sizeof(std::int32_t);
  return l;
}

std::shared_ptr<HostSharedSet> HostSharedSet::for_rank(
    const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes) {
  if (opt.group == nullptr) {
    if (opt.shards != 1)
      throw std::invalid_argument("HostSharedSet: a shard of several (--gpus N) needs the run's "
                                  "ReplicaGroup (StrategyOptions::group)");
    return std::make_shared<HostSharedSet>(std::vector<std::uint64_t>{region_bytes(0)});
  }
  const std::vector<std::uint64_t> bytes = group_region_bytes(opt, region_bytes, "HostSharedSet");
  return opt.group->shared<HostSharedSet>([&] { return std::make_shared<HostSharedSet>(bytes); });
}

HostSharedSet::HostSharedSet(const std::vector<std::uint64_t>& bytes)
    : RegionLayout(bytes, kAlign),
      host_(static_cast<std::size_t>(RegionLayout::bytes()), cudaHostAllocPortable) {}

}  // namespace memstrat
