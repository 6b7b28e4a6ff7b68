// PrefetchPlan: how um-prefetch (one batch per prefetch) and um-prefetch-coarse (chunks of whole
// batches within a byte budget) split an epoch. Every batch is in exactly one chunk, chunks are
// contiguous, in order, and together cover every byte of the images and labels once.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "memory_strategies/prefetch_plan.h"

using namespace memstrat;

namespace {
// The invariants every plan keeps, for geometry g.
void expect_covers_the_epoch(const PrefetchPlan& p, const BatchGeometry& g, std::size_t budget) {
  int next_batch = 0;
  std::size_t next_image = 0, next_label = 0;
  for (int c = 0; c < p.chunks(); ++c) {
    const PrefetchChunk k = p.chunk(c);
    SCOPED_TRACE("chunk " + std::to_string(c));
    EXPECT_EQ(k.first_batch, next_batch);
    EXPECT_GT(k.end_batch, k.first_batch);
    EXPECT_LE(k.end_batch - k.first_batch, p.batches_per_chunk());
    EXPECT_EQ(k.image_offset, next_image);
    EXPECT_EQ(k.label_offset, next_label);
    std::uint64_t batch_bytes = 0;
    for (int b = k.first_batch; b < k.end_batch; ++b) {
      EXPECT_EQ(p.chunk_of(b), c) << b;
      EXPECT_EQ(p.starts_chunk(b), b == k.first_batch) << b;
      batch_bytes += g.bytes(b);
    }
    EXPECT_EQ(k.bytes(), batch_bytes);
    EXPECT_EQ(k.image_offset, g.image_offset(k.first_batch));
    if (k.end_batch - k.first_batch > 1) {
      EXPECT_LE(k.bytes(), budget) << "a multi-batch chunk fits";
    }
    next_batch = k.end_batch;
    next_image += k.image_bytes;
    next_label += k.label_bytes;
  }
  EXPECT_EQ(next_batch, g.batches());
  EXPECT_EQ(next_image, static_cast<std::size_t>(g.samples) * g.image_bytes_per_sample);
  EXPECT_EQ(next_label, static_cast<std::size_t>(g.samples) * 4);
  EXPECT_EQ(p.epoch_bytes(),
            static_cast<std::uint64_t>(g.samples) * (g.image_bytes_per_sample + 4));
}
}  // namespace

TEST(PrefetchPlan, PerBatchIsOneChunkPerBatch) {
  const BatchGeometry g{60000, 256, 784};
  const PrefetchPlan p = PrefetchPlan::per_batch(g);
  EXPECT_EQ(p.chunks(), 235);
  EXPECT_EQ(p.batches_per_chunk(), 1);
  for (int b = 0; b < g.batches(); ++b) {
    const PrefetchChunk k = p.chunk(b);
    ASSERT_EQ(k.first_batch, b);
    ASSERT_EQ(k.image_offset, g.image_offset(b));
    ASSERT_EQ(k.image_bytes, g.image_bytes(b));
    ASSERT_EQ(k.label_offset, static_cast<std::size_t>(g.first(b)) * 4);
    ASSERT_EQ(k.label_bytes, g.label_bytes(b));
  }
  expect_covers_the_epoch(p, g, g.bytes(0));
}

TEST(PrefetchPlan, CoarseChunksAreWholeBatchesWithinTheBudget) {
  const std::size_t MiB = 1u << 20;
  // MNIST u8 at batch 256: 201728 B per batch, 8 MiB holds 41 of them: 6 chunks, the last one
  // 30 batches ending in the 96-row batch.
  const BatchGeometry u8{60000, 256, 784};
  const PrefetchPlan p = PrefetchPlan::coarse(u8, 8 * MiB);
  EXPECT_EQ(p.batches_per_chunk(), 41);
  EXPECT_EQ(p.chunks(), 6);
  EXPECT_EQ(p.chunk(5).first_batch, 205);
  EXPECT_EQ(p.chunk(5).end_batch, 235);
  EXPECT_EQ(p.chunk(5).image_bytes, (29u * 256 + 96) * 784);
  expect_covers_the_epoch(p, u8, 8 * MiB);
  // f32, odd batch sizes, budgets from below one batch to above the epoch.
  for (const BatchGeometry g : {BatchGeometry{60000, 256, 3136}, BatchGeometry{60000, 1007, 784},
                                BatchGeometry{60000, 3, 784}, BatchGeometry{1001, 7, 25}})
    for (const std::size_t budget :
         {std::size_t{1}, std::size_t{100000}, MiB, 8 * MiB, 1024 * MiB}) {
      SCOPED_TRACE("batch " + std::to_string(g.batch) + " budget " + std::to_string(budget));
      expect_covers_the_epoch(PrefetchPlan::coarse(g, budget), g, budget);
    }
}

TEST(PrefetchPlan, BudgetBelowOneBatchGivesSingleBatchesAboveTheEpochOneChunk) {
  const BatchGeometry g{60000, 256, 784};
  const PrefetchPlan small = PrefetchPlan::coarse(g, 1000);
  EXPECT_EQ(small.batches_per_chunk(), 1);
  EXPECT_EQ(small.chunks(), 235);
  const PrefetchPlan big = PrefetchPlan::coarse(g, std::size_t{1} << 30);
  EXPECT_EQ(big.chunks(), 1);
  EXPECT_EQ(big.batches_per_chunk(), 235);
  EXPECT_EQ(big.chunk(0).bytes(), 60000u * 788);
  EXPECT_THROW(PrefetchPlan::coarse(g, 0), std::invalid_argument);
}

// row_runs: the rows a gathered batch reads as runs of consecutive indices (one prefetch each):
// every row is covered exactly once, runs are sorted, disjoint and never adjacent (adjacent
// ones would have been merged).
TEST(RowRuns, SortsAndMergesConsecutiveRows) {
  const std::vector<std::int32_t> rows = {9, 3, 4, 100, 5, 8, 0, 42};
  std::vector<std::int32_t> sorted(rows.size());
  std::vector<RowRun> runs(rows.size());
  const int n = row_runs(rows.data(), static_cast<int>(rows.size()), sorted.data(), runs.data());
  ASSERT_EQ(n, 5);
  const std::vector<std::pair<int, int>> want = {{0, 1}, {3, 3}, {8, 2}, {42, 1}, {100, 1}};
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(runs[i].first, want[i].first) << i;
    EXPECT_EQ(runs[i].count, want[i].second) << i;
  }
  EXPECT_EQ(rows[0], 9) << "the input is left as it was";
}

TEST(RowRuns, ARandomBatchIsCoveredExactlyOnce) {
  std::vector<std::int32_t> perm(5000);
  for (int i = 0; i < 5000; ++i) perm[i] = static_cast<std::int32_t>(i * 7919L % 5000);  // 7919 is prime to 5000: a permutation
  for (const int n : {1, 7, 256, 5000}) {
    std::vector<std::int32_t> sorted(n);
    std::vector<RowRun> runs(n);
    const int k = row_runs(perm.data(), n, sorted.data(), runs.data());
    std::vector<int> seen(5000, 0);
    long covered = 0;
    for (int i = 0; i < k; ++i) {
      if (i > 0) {
        EXPECT_GT(runs[i].first, runs[i - 1].first + runs[i - 1].count) << "merged";
      }
      for (int r = runs[i].first; r < runs[i].first + runs[i].count; ++r) ++seen[r];
      covered += runs[i].count;
    }
    EXPECT_EQ(covered, n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(seen[perm[i]], 1) << perm[i];
  }
  EXPECT_EQ(row_runs(perm.data(), 0, nullptr, nullptr), 0);
}
