#include "memory_strategies/host_shared_set.h"

#include <stdexcept>
#include <string>

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

std::vector<std::uint64_t> HostSharedSet::region_offsets(const std::vector<std::uint64_t>& bytes,
                                                         std::uint64_t align) {
  if (bytes.empty()) throw std::invalid_argument("HostSharedSet: no regions");
  if (align == 0 || (align & (align - 1)) != 0)
    throw std::invalid_argument("HostSharedSet: the alignment must be a power of two");
  std::vector<std::uint64_t> off{0};
  for (const std::uint64_t b : bytes) {
    if (b == 0) throw std::invalid_argument("HostSharedSet: an empty region");
    off.push_back(off.back() + (b + align - 1) / align * align);
  }
  off.back() = off[off.size() - 2] + bytes.back();  // no padding after the last region
  return off;
}

std::shared_ptr<HostSharedSet> HostSharedSet::for_rank(
    const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes) {
  if (opt.group == nullptr) {
    if (opt.shards != 1)
      throw std::invalid_argument("HostSharedSet: a shard of several (--gpus N) needs the run's "
                                  "ReplicaGroup (StrategyOptions::group)");
    return std::make_shared<HostSharedSet>(std::vector<std::uint64_t>{region_bytes(0)});
  }
  ReplicaGroup& g = *opt.group;
  if (g.ranks() != opt.shards)
    throw std::invalid_argument("HostSharedSet: the group has " + std::to_string(g.ranks()) +
                                " ranks, the options " + std::to_string(opt.shards) + " shards");
  return g.shared<HostSharedSet>([&] {
    std::vector<std::uint64_t> bytes;
    for (int r = 0; r < g.ranks(); ++r) bytes.push_back(region_bytes(r));
    return std::make_shared<HostSharedSet>(bytes);
  });
}

HostSharedSet::HostSharedSet(const std::vector<std::uint64_t>& bytes)
    : offsets_(region_offsets(bytes)),
      host_(static_cast<std::size_t>(offsets_.back()), cudaHostAllocPortable) {}

}  // namespace memstrat
