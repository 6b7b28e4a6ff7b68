#include "memory_strategies/host_shared.h"

#include <stdexcept>
#include <string>

namespace memstrat {

void HostSharedStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                cudaStream_t compute) {
  data_ = &data;
  opt_ = opt;
  PinnedStrategy::attach(data, opt, compute);  // calls allocate_host (static, refresh)
  data_ = nullptr;
}

void HostSharedStrategy::allocate_host(std::size_t image_bytes, std::size_t samples,
                                       void** images, std::int32_t** labels) {
  if (data_ == nullptr) throw std::logic_error("host-shared: allocate_host outside attach");
  const HostDataset& data = *data_;
  const StrategyOptions& opt = opt_;
  set_ = HostSharedSet::for_rank(
      opt, [&](int rank) { return shard_region(data, opt, rank).bytes; });
  const ShardRegion l = shard_region(data, opt, opt.shard);
  if (l.image_bytes != image_bytes ||
      l.bytes - l.label_offset != samples * sizeof(std::int32_t))
    throw std::logic_error("host-shared: rank " + std::to_string(opt.shard) +
                           "'s region disagrees with its epoch's size");
  std::uint8_t* region = set_->region(opt.shard);
  *images = region;
  *labels = reinterpret_cast<std::int32_t*>(region + l.label_offset);
}

}  // namespace memstrat
