// test_shard_plan.cpp: ShardPlan, the cut of an epoch into global batches of N shards
// (data-parallel training, --gpus / --emulate-gpus).
#include <gtest/gtest.h>

#include <stdexcept>

#include "experiments/core/shard_plan.h"
#include "memory_strategies/batch_geometry.h"

namespace memstrat {
namespace {

TEST(ShardPlan, OneShardIsTheSingleGpuLayout) {
  const ShardPlan p(1000, 256, 1);
  const BatchGeometry g{1000, 256, 784};
  ASSERT_EQ(p.global_batches(), g.batches());
  for (int b = 0; b < p.global_batches(); ++b) {
    const ShardRange s = p.shard(b, 0);
    EXPECT_EQ(s.batch, b);
    EXPECT_EQ(s.first, g.first(b));
    EXPECT_EQ(s.rows, g.rows(b));
    EXPECT_EQ(p.global_rows(b), g.rows(b));
    // the step's own factor for a batch of that many rows
    EXPECT_EQ(p.gradient_scale(b), 1.0f / static_cast<float>(g.rows(b)));
  }
}

TEST(ShardPlan, ShardRIsSingleGpuBatchGNPlusR) {
  // 60000 MNIST rows, 256 per shard, 2 shards: 117 full global batches of 512, then 96 rows.
  const ShardPlan p(60000, 256, 2);
  ASSERT_EQ(p.global_batches(), 118);
  const BatchGeometry g{60000, 256, 784};
  for (int gb = 0; gb < 117; ++gb) {
    EXPECT_EQ(p.global_rows(gb), 512);
    for (int r = 0; r < 2; ++r) {
      const ShardRange s = p.shard(gb, r);
      EXPECT_EQ(s.batch, gb * 2 + r);
      EXPECT_EQ(s.first, g.first(s.batch));
      EXPECT_EQ(s.rows, 256);
    }
  }
  EXPECT_EQ(p.global_rows(117), 96);
  EXPECT_EQ(p.shard(117, 0).rows, 96);
  EXPECT_EQ(p.shard(117, 0).first, 59904);
  EXPECT_EQ(p.shard(117, 1).rows, 0);  // past the end: an empty shard
  EXPECT_EQ(p.gradient_scale(117), 1.0f / 96.0f);
  EXPECT_EQ(p.gradient_scale(0), 1.0f / 512.0f);
}

TEST(ShardPlan, LastGlobalBatchFillsShardsInOrder) {
  // 4 shards of 10 rows, 75 samples: global batches of 40, then 35 = 10 + 10 + 10 + 5.
  const ShardPlan p(75, 10, 4);
  ASSERT_EQ(p.global_batches(), 2);
  EXPECT_EQ(p.global_rows(1), 35);
  const int rows[] = {10, 10, 10, 5};
  std::int64_t next = 40;
  for (int r = 0; r < 4; ++r) {
    const ShardRange s = p.shard(1, r);
    EXPECT_EQ(s.rows, rows[r]) << "shard " << r;
    EXPECT_EQ(s.first, next) << "shard " << r;
    next += s.rows;
  }
  EXPECT_EQ(next, 75);  // contiguous, every row once
  // 62 samples: 40, then 22 = 10 + 10 + 2 + 0.
  const ShardPlan q(62, 10, 4);
  EXPECT_EQ(q.shard(1, 2).rows, 2);
  EXPECT_EQ(q.shard(1, 3).rows, 0);
}

TEST(ShardPlan, EveryRowInExactlyOneShard) {
  for (int n : {1, 2, 3, 4, 8})
    for (std::int64_t samples : {0, 1, 7, 255, 256, 257, 1000, 4097}) {
      const ShardPlan p(samples, 64, n);
      std::int64_t next = 0;
      for (int g = 0; g < p.global_batches(); ++g) {
        int sum = 0;
        for (int r = 0; r < n; ++r) {
          const ShardRange s = p.shard(g, r);
          if (s.rows > 0) {
            EXPECT_EQ(s.first, next);
          }
          next += s.rows;
          sum += s.rows;
        }
        EXPECT_EQ(sum, p.global_rows(g));
        EXPECT_GT(p.shard(g, 0).rows, 0);  // a global batch is never empty
      }
      EXPECT_EQ(next, samples) << "N=" << n << " samples=" << samples;
    }
}

TEST(ShardPlan, RefusesBadArguments) {
  EXPECT_THROW(ShardPlan(-1, 8, 2), std::invalid_argument);
  EXPECT_THROW(ShardPlan(10, 0, 2), std::invalid_argument);
  EXPECT_THROW(ShardPlan(10, 8, 0), std::invalid_argument);
  const ShardPlan p(10, 8, 2);
  EXPECT_THROW(p.shard(0, 2), std::out_of_range);
  EXPECT_THROW(p.shard(1, 0), std::out_of_range);
  EXPECT_THROW(p.global_rows(-1), std::out_of_range);
}

}  // namespace
}  // namespace memstrat
