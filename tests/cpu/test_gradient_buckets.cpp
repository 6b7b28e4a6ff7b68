// test_gradient_buckets.cpp: GradientBuckets, the fixed cut of the flat gradient buffer that
// --reduce ring all-reduces bucket by bucket.
#include <gtest/gtest.h>

#include <stdexcept>

#include "experiments/core/gradient_buckets.h"

namespace memstrat {
namespace {

TEST(GradientBuckets, OneBucketPerLayerWhenLayersFit) {
  const GradientBuckets g({784, 256, 10});
  ASSERT_EQ(g.count(), 784u * 256 + 256 + 256 * 10 + 10);
  ASSERT_EQ(g.buckets().size(), 2u);
  // the last layer first: backward finishes it first
  EXPECT_EQ(g.buckets()[0].layer, 1);
  EXPECT_EQ(g.buckets()[0].begin, 784u * 256 + 256);
  EXPECT_EQ(g.buckets()[0].end, g.count());
  EXPECT_EQ(g.buckets()[1].layer, 0);
  EXPECT_EQ(g.buckets()[1].begin, 0u);
  EXPECT_EQ(g.buckets()[1].end, 784u * 256 + 256);
}

TEST(GradientBuckets, SplitsLargeLayersAtMultiplesOfFourFloats) {
  // layer 0: 6*5+5 = 35 floats, layer 1: 5*3+3 = 18 floats; at most 10 floats a bucket, cut
  // every 8 (the largest multiple of 4 floats that fits).
  const GradientBuckets g({6, 5, 3}, 10);
  ASSERT_EQ(g.count(), 53u);
  std::size_t covered = 0;
  int prev_layer = 2;
  for (const GradientBucket& b : g.buckets()) {
    EXPECT_LE(b.size(), 10u);
    EXPECT_GT(b.size(), 0u);
    EXPECT_LE(b.layer, prev_layer);
    prev_layer = b.layer;
    const std::size_t layer_start = b.layer == 0 ? 0 : 35;
    EXPECT_EQ((b.begin - layer_start) % 4, 0u);
    covered += b.size();
  }
  EXPECT_EQ(covered, g.count());
  // layer 1 (18 floats): 8 + 8 + 2; layer 0 (35): 8 x 4 + 3
  ASSERT_EQ(g.buckets().size(), 3u + 5u);
  EXPECT_EQ(g.buckets()[0].begin, 35u);
  EXPECT_EQ(g.buckets()[2].end, 53u);
  EXPECT_EQ(g.buckets()[2].size(), 2u);
  EXPECT_EQ(g.buckets()[7].size(), 3u);
  EXPECT_EQ(g.buckets()[7].end, 35u);
}

TEST(GradientBuckets, RefusesBadArguments) {
  EXPECT_THROW(GradientBuckets({784}), std::invalid_argument);
  EXPECT_THROW(GradientBuckets({784, 0, 10}), std::invalid_argument);
  EXPECT_THROW(GradientBuckets({784, 10}, 3), std::invalid_argument);
}

}  // namespace
}  // namespace memstrat
