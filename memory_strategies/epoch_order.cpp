#include "memory_strategies/epoch_order.h"

#include <utility>

#include "memory_strategies/epoch_data.h"  // splitmix64

namespace memstrat {

void shuffle_into(std::int32_t* p, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>(i);
  std::uint64_t st = seed;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(splitmix64(st) % static_cast<std::uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
}

EpochOrder::EpochOrder(std::int64_t samples, std::uint64_t seed)
    : order_(static_cast<std::size_t>(samples)), seed_(seed) {}

void EpochOrder::set_epoch(int epoch) {
  epoch_ = epoch;
  shuffle_into(order_.data(), size(), epoch_order_seed(seed_, epoch));
}

}  // namespace memstrat
