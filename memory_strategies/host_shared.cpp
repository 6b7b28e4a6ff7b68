#include "memory_strategies/host_shared.h"

#include <stdexcept>
#include <string>

#include "memory_strategies/epoch_data.h"  // shard_rows, transfer_bytes_per_sample

namespace memstrat {

namespace {
// Rank r's region: its shard's images, then (from the next kAlign boundary) its labels.
struct RegionLayout {
  std::uint64_t image_bytes = 0;
  std::uint64_t label_offset = 0;
  std::uint64_t bytes = 0;
};

RegionLayout region_layout(const HostDataset& data, const StrategyOptions& opt, int rank) {
  const std::int64_t rows = shard_rows(data.n_train(), opt.batch, rank, opt.shards);
  RegionLayout l;
  l.image_bytes = static_cast<std::uint64_t>(rows) *
                  transfer_bytes_per_sample(data.features(), opt.transfer);
  l.label_offset = (l.image_bytes + HostSharedSet::kAlign - 1) / HostSharedSet::kAlign *
                   HostSharedSet::kAlign;
  l.bytes = l.label_offset + static_cast<std::uint64_t>(rows) * sizeof(std::int32_t);
  return l;
}
}  // namespace

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
      opt, [&](int rank) { return region_layout(data, opt, rank).bytes; });
  const RegionLayout l = region_layout(data, opt, opt.shard);
  if (l.image_bytes != image_bytes ||
      l.bytes - l.label_offset != samples * sizeof(std::int32_t))
    throw std::logic_error("host-shared: rank " + std::to_string(opt.shard) +
                           "'s region disagrees with its epoch's size");
  std::uint8_t* region = set_->region(opt.shard);
  *images = region;
  *labels = reinterpret_cast<std::int32_t*>(region + l.label_offset);
}

}  // namespace memstrat
