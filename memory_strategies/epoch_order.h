// epoch_order.h: EpochOrder, the sample order of the scenarios that reshuffle every epoch
// (refresh, stream): a fresh Fisher-Yates permutation per epoch from splitmix64 seeded by
// (seed, epoch), rewritten in place so that nothing is allocated after construction. Batch b is
// the gather of rows [b*batch, b*batch + rows) of it: data-set samples order[b*batch + r].
#pragma once

#include <cstdint>
#include <vector>

namespace memstrat {

/// The shuffle seed of epoch `epoch` (EpochWriter::order, EpochOrder; reproduced by the
/// baselines as splitmix64_order(n, seed * 0x100000001B3 + epoch)).
inline std::uint64_t epoch_order_seed(std::uint64_t seed, int epoch) {
  return seed * 0x100000001B3ull + static_cast<std::uint64_t>(epoch);
}

/// Writes the Fisher-Yates permutation of [0, n) driven by splitmix64(seed) into p[0..n): the
/// same permutation as shuffled_order(n, seed), without allocating.
void shuffle_into(std::int32_t* p, std::int64_t n, std::uint64_t seed);

class EpochOrder {
 public:
  /// Allocates the order of `samples` entries (the only allocation).
  EpochOrder(std::int64_t samples, std::uint64_t seed);

  /// Reshuffles in place for epoch `epoch`.
  void set_epoch(int epoch);
  int epoch() const { return epoch_; }

  std::int64_t size() const { return static_cast<std::int64_t>(order_.size()); }
  /// order()[i] = data-set index of the epoch's row i.
  const std::int32_t* order() const { return order_.data(); }
  /// The data-set indices of rows [first, first + rows) of the epoch (a batch's gather list).
  const std::int32_t* rows_from(std::int64_t first) const { return order_.data() + first; }

 private:
  std::vector<std::int32_t> order_;
  std::uint64_t seed_;
  int epoch_ = 0;
};

}  // namespace memstrat
