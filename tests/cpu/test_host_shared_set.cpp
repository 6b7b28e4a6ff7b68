// The shared-set forms' pure half: what a rank's region holds (shard_region), what each rank
// allocates on its GPU (device_footprint), and what the registry says they are on one GPU. Where
// the regions lie in the set: test_region_layout.cpp. No GPU needed.
#include <gtest/gtest.h>

#include <vector>

#include "memory_strategies/epoch_data.h"  // shard_rows
#include "memory_strategies/host_shared_set.h"
#include "memory_strategies/registry.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;

// A rank's region: its shard's images in the transfer format, its labels from the next 256-byte
// boundary (both shared-set forms cut their regions so).
TEST(HostSharedSet, ARanksRegionIsItsShardsImagesThenItsLabels) {
  const HostDataset d = memstrat::testing::synthetic_dataset(1000);  // 16 batches of 64: one of 40
  StrategyOptions o;
  o.batch = 64;
  o.shards = 3;
  for (const Transfer t : {Transfer::U8, Transfer::F32})
    for (int r = 0; r < 3; ++r) {
      o.transfer = t;
      const std::uint64_t rows = static_cast<std::uint64_t>(shard_rows(1000, 64, r, 3));
      const ShardRegion l = shard_region(d, o, r);
      const std::uint64_t px = t == Transfer::U8 ? 784 : 4 * 784;
      EXPECT_EQ(l.image_bytes, rows * px) << r;
      EXPECT_EQ(l.label_offset % HostSharedSet::kAlign, 0u);
      EXPECT_GE(l.label_offset, l.image_bytes);
      EXPECT_LT(l.label_offset, l.image_bytes + HostSharedSet::kAlign);
      EXPECT_EQ(l.bytes, l.label_offset + 4 * rows);
    }
  EXPECT_EQ(shard_rows(1000, 64, 0, 3) + shard_rows(1000, 64, 1, 3) + shard_rows(1000, 64, 2, 3),
            1000);
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
