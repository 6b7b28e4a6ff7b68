// shared_set_checks.h: what the tests of the sets one allocation serves for every rank of a
// data-parallel group share (HostSharedSet, ManagedSharedSet): the options of rank r of n, every
// rank asking for the set at once from its own thread as the trainer's rank threads do, and the
// layout every such set keeps: n disjoint regions of at least the sizes asked for, each aligned
// to the set's kAlign, in one allocation.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "memory_strategies/memory_strategy.h"  // StrategyOptions
#include "memory_strategies/replica_group.h"

namespace memstrat::testing {

inline StrategyOptions rank_of(int shard, int shards, ReplicaGroup* g) {
  StrategyOptions o;
  o.shard = shard;
  o.shards = shards;
  o.group = g;
  return o;
}

/// make(options of rank r of n in `group`) from n threads at once; what each returned.
template <class Make>
auto ask_at_once(int n, ReplicaGroup& group, Make make) {
  std::vector<decltype(make(rank_of(0, n, &group)))> got(static_cast<std::size_t>(n));
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] { got[static_cast<std::size_t>(r)] = make(rank_of(r, n, &group)); });
  for (auto& t : ranks) t.join();
  return got;
}

/// Every rank got the same set, of n disjoint kAlign-aligned regions of at least sizes(r)
/// bytes, in one allocation.
template <class Set, class Sizes>
void expect_one_set_of_regions(const std::vector<std::shared_ptr<Set>>& got, Sizes sizes) {
  ASSERT_FALSE(got.empty());
  ASSERT_TRUE(got[0]);
  for (const auto& s : got) EXPECT_EQ(s.get(), got[0].get());
  const Set& set = *got[0];
  const int n = static_cast<int>(got.size());
  ASSERT_EQ(set.regions(), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_GE(set.region_bytes(r), sizes(r)) << r;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(set.region(r)) % Set::kAlign, 0u) << r;
    if (r > 0) EXPECT_GE(set.region(r), set.region(r - 1) + sizes(r - 1)) << "disjoint";
  }
  EXPECT_EQ(set.region(n - 1) + sizes(n - 1), set.region(0) + set.bytes()) << "one allocation";
}

}  // namespace memstrat::testing
