// The shared-set forms' pure half: where each rank's region lies in the one page-locked host set
// (HostSharedSet::region_offsets) and in the um-shared forms' managed set (the same cut at 2 MiB),
// what each rank allocates on its GPU (device_footprint), and what the registry says they are on
// one GPU. No GPU needed.
#include <gtest/gtest.h>

#include <vector>

#include "memory_strategies/host_shared_set.h"
#include "memory_strategies/managed_shared_set.h"
#include "memory_strategies/registry.h"

using namespace memstrat;

TEST(HostSharedSet, RegionsStartAlignedAndTheLastEndsTheSet) {
  using V = std::vector<std::uint64_t>;
  EXPECT_EQ(HostSharedSet::region_offsets(V{1000}), (V{0, 1000}));
  EXPECT_EQ(HostSharedSet::region_offsets(V{1000, 512, 1}), (V{0, 1024, 1536, 1537}));
  EXPECT_EQ(HostSharedSet::region_offsets(V{256, 256}), (V{0, 256, 512}));
  EXPECT_EQ(HostSharedSet::region_offsets(V{7, 300, 5000, 9}), (V{0, 256, 768, 5888, 5897}));
  EXPECT_THROW(HostSharedSet::region_offsets(V{}), std::invalid_argument);
  EXPECT_THROW(HostSharedSet::region_offsets(V{100, 0}), std::invalid_argument);
  // At another alignment (the um-shared forms' managed set: 2 MiB, a page the driver migrates
  // whole, so that no page holds two ranks' regions)
  const std::uint64_t M2 = ManagedSharedSet::kAlign;
  EXPECT_EQ(M2, 2ull << 20);
  EXPECT_EQ(HostSharedSet::region_offsets(V{1000, M2, 7}, M2), (V{0, M2, 2 * M2, 2 * M2 + 7}));
  EXPECT_EQ(HostSharedSet::region_offsets(V{M2 + 1, 5}, M2), (V{0, 2 * M2, 2 * M2 + 5}));
  EXPECT_THROW(HostSharedSet::region_offsets(V{100}, 3), std::invalid_argument);
  EXPECT_THROW(HostSharedSet::region_offsets(V{100}, 0), std::invalid_argument);
}

// On one GPU each form is the strategy it names, so it allocates that strategy's device memory.
TEST(HostSharedSet, EachFormAllocatesWhatItsOneGpuStrategyDoes) {
  for (const char* name : {"host-shared", "host-shared-ring", "um-shared", "um-shared-host",
                           "um-shared-prefetch", "um-shared-read-mostly"}) {
    const StrategyEntry& e = *find_strategy(name);
    ASSERT_FALSE(e.one_gpu_as.empty()) << name;
    const StrategyEntry& as = *find_strategy(e.one_gpu_as);
    for (const int batch : {64, 256, 1000}) {
      StrategyOptions o;
      o.batch = batch;
      o.depth = 3;
      o.copy_chunk_mib = 2;
      EXPECT_EQ(device_footprint(e, o, 60000, 784), device_footprint(as, o, 60000, 784))
          << name << " batch " << batch;
    }
  }
}
