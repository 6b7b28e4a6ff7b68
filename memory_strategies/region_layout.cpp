#include "memory_strategies/region_layout.h"

#include <stdexcept>
#include <string>

#include "memory_strategies/replica_group.h"

namespace memstrat {

std::vector<std::uint64_t> RegionLayout::offsets(const std::vector<std::uint64_t>& bytes,
                                                 std::uint64_t align) {
  if (bytes.empty()) throw std::invalid_argument("RegionLayout: no regions");
  if (align == 0 || (align & (align - 1)) != 0)
    throw std::invalid_argument("RegionLayout: the alignment must be a power of two");
  std::vector<std::uint64_t> off{0};
  for (const std::uint64_t b : bytes) {
    if (b == 0) throw std::invalid_argument("RegionLayout: an empty region");
    off.push_back(off.back() + (b + align - 1) / align * align);
  }
  off.back() = off[off.size() - 2] + bytes.back();  // no padding after the last region
  return off;
}

std::vector<std::uint64_t> group_region_bytes(
    const StrategyOptions& opt, const std::function<std::uint64_t(int rank)>& region_bytes,
    const char* who) {
  if (opt.group == nullptr)
    throw std::invalid_argument(std::string(who) +
                                ": a set shared by several GPUs (--gpus N) needs the run's "
                                "ReplicaGroup (StrategyOptions::group)");
  const ReplicaGroup& g = *opt.group;
  if (g.ranks() != opt.shards)
    throw std::invalid_argument(std::string(who) + ": the group has " +
                                std::to_string(g.ranks()) + " ranks, the options " +
                                std::to_string(opt.shards) + " shards");
  std::vector<std::uint64_t> bytes;
  for (int r = 0; r < g.ranks(); ++r) bytes.push_back(region_bytes(r));
  return bytes;
}

}  // namespace memstrat
