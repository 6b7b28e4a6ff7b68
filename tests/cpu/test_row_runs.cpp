// row_runs: a gathered batch's rows as sorted, merged runs of consecutive rows; every row is
// covered exactly once, runs are sorted, disjoint and never adjacent (adjacent ones would have
// been merged).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "memory_strategies/row_runs.h"

using namespace memstrat;

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
