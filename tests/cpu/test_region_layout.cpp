// RegionLayout: where each rank's region lies in a set one allocation holds for every rank (the
// host-shared forms' page-locked set at 256 B, the um-shared forms' managed set at 2 MiB), and
// group_region_bytes, the group check both make before they ask each rank for its size. No GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "memory_strategies/host_shared_set.h"
#include "memory_strategies/managed_shared_set.h"
#include "memory_strategies/region_layout.h"
#include "memory_strategies/replica_group.h"

using namespace memstrat;
using V = std::vector<std::uint64_t>;

TEST(RegionLayout, RegionsStartAlignedAndTheLastEndsTheSet) {
  const std::uint64_t A = HostSharedSet::kAlign;
  EXPECT_EQ(A, 256u);
  EXPECT_EQ(RegionLayout::offsets(V{1000}, A), (V{0, 1000}));
  EXPECT_EQ(RegionLayout::offsets(V{1000, 512, 1}, A), (V{0, 1024, 1536, 1537}));
  EXPECT_EQ(RegionLayout::offsets(V{256, 256}, A), (V{0, 256, 512}));
  EXPECT_EQ(RegionLayout::offsets(V{7, 300, 5000, 9}, A), (V{0, 256, 768, 5888, 5897}));
  EXPECT_THROW(RegionLayout::offsets(V{}, A), std::invalid_argument);
  EXPECT_THROW(RegionLayout::offsets(V{100, 0}, A), std::invalid_argument);
  // The um-shared forms' managed set: 2 MiB, a page the driver migrates whole, so that no page
  // holds two ranks' regions.
  const std::uint64_t M2 = ManagedSharedSet::kAlign;
  EXPECT_EQ(M2, 2ull << 20);
  EXPECT_EQ(RegionLayout::offsets(V{1000, M2, 7}, M2), (V{0, M2, 2 * M2, 2 * M2 + 7}));
  EXPECT_EQ(RegionLayout::offsets(V{M2 + 1, 5}, M2), (V{0, 2 * M2, 2 * M2 + 5}));
  EXPECT_THROW(RegionLayout::offsets(V{100}, 3), std::invalid_argument);
  EXPECT_THROW(RegionLayout::offsets(V{100}, 0), std::invalid_argument);
}

TEST(RegionLayout, EachRegionIsAtLeastWhatItsRankAskedFor) {
  const RegionLayout l(V{7, 300, 5000, 9}, 256);
  ASSERT_EQ(l.regions(), 4);
  EXPECT_EQ(l.bytes(), 5897u);
  EXPECT_EQ(l.offset(2), 768u);
  EXPECT_EQ(l.region_bytes(0), 256u);   // 7 asked, padded to the next region's start
  EXPECT_EQ(l.region_bytes(2), 5120u);  // 5000 asked
  EXPECT_EQ(l.region_bytes(3), 9u);     // the last one: exactly what was asked
  EXPECT_THROW(l.region_bytes(4), std::out_of_range);
}

TEST(RegionLayout, TheGroupMustHaveOneRankPerShard) {
  const auto size = [](int r) { return static_cast<std::uint64_t>(100 * (r + 1)); };
  StrategyOptions o;
  o.shards = 3;
  EXPECT_THROW(group_region_bytes(o, size, "HostSharedSet"), std::invalid_argument)
      << "no group";
  ReplicaGroup two({0, 1});
  o.group = &two;
  try {
    group_region_bytes(o, size, "ManagedSharedSet");
    ADD_FAILURE() << "a group of 2 ranks for 3 shards was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ManagedSharedSet: the group has 2 ranks, the options 3"),
              std::string::npos)
        << e.what();
  }
  ReplicaGroup three({0, 1, 2});
  o.group = &three;
  EXPECT_EQ(group_region_bytes(o, size, "HostSharedSet"), (V{100, 200, 300}));
}
