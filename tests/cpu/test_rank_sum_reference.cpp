// test_rank_sum_reference.cpp: cpu_ref::rank_sum, the host form of the rank-ordered gradient sum
// (--reduce exact, --emulate-gpus). The GPU kernel is held bitwise to it in tests/gpu/test_rank_sum.cu.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/reference/cpu_reference.h"

namespace memstrat {
namespace {

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(RankSumReference, AddsInRankOrder) {
  // The same three values in two rank orders give two sums: left to right, (1e8 - 1e8) + 1 = 1
  // but (1e8 + 1) - 1e8 = 0 (1e8 + 1 rounds to 1e8). Summing from the last rank, or as a tree,
  // gives 0 for the first order.
  const std::vector<float> g = {1e8f, -1e8f, 1.0f};  // 3 ranks, count 1
  float out = -7;
  cpu_ref::rank_sum(g.data(), 3, 1, &out);
  EXPECT_EQ(out, 1.0f);
  const std::vector<float> h = {1e8f, 1.0f, -1e8f};
  cpu_ref::rank_sum(h.data(), 3, 1, &out);
  EXPECT_EQ(out, 0.0f);
}

TEST(RankSumReference, SlotsAreCountApart) {
  const std::size_t count = 5;
  std::vector<float> g(4 * count);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i) * 0.1f;
  std::vector<float> out(count);
  cpu_ref::rank_sum(g.data(), 4, count, out.data());
  for (std::size_t i = 0; i < count; ++i) {
    const float want = ((g[i] + g[count + i]) + g[2 * count + i]) + g[3 * count + i];
    EXPECT_EQ(bits(out[i]), bits(want)) << i;
  }
}

TEST(RankSumReference, OneRankCopiesAndNegativeZeroSurvives) {
  const std::vector<float> g = {-0.0f, 2.5f};
  std::vector<float> out(2, 9.0f);
  cpu_ref::rank_sum(g.data(), 1, 2, out.data());
  EXPECT_EQ(bits(out[0]), bits(-0.0f));  // no leading 0 + ...: -0 stays -0
  EXPECT_EQ(out[1], 2.5f);
  EXPECT_THROW(cpu_ref::rank_sum(g.data(), 0, 2, out.data()), std::invalid_argument);
}

}  // namespace
}  // namespace memstrat
