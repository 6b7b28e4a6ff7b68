#include "memory_strategies/host_shared_ring.h"

#include <stdexcept>
#include <string>

#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample
#include "memory_strategies/peer_set.h"    // PeerSet::shard_geometry

namespace memstrat {

void HostSharedRingStrategy::attach_blocks(PackedHostBlocks& blocks, HostEpochSource& source,
                                           const HostDataset& data, const StrategyOptions& opt) {
  const BatchGeometry whole{data.n_train(), opt.batch,
                            transfer_bytes_per_sample(data.features(), opt.transfer)};
  const std::shared_ptr<HostSharedSet> set = HostSharedSet::for_rank(opt, [&](int rank) {
    return static_cast<std::uint64_t>(
        PackedLayout{PeerSet::shard_geometry(whole, rank, opt.shards)}.total_bytes());
  });
  if (set->region_bytes(opt.shard) < source.packed().total_bytes())
    throw std::logic_error("host-shared-ring: rank " + std::to_string(opt.shard) +
                           "'s region is smaller than its packed epoch");
  blocks.attach(source, set->region(opt.shard), set);
}

}  // namespace memstrat
