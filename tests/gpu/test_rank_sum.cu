// test_rank_sum.cu: kernels::rank_sum (the rank-ordered sum of N gathered gradient buffers that
// --reduce exact and --emulate-gpus use) against cpu_ref::rank_sum, bitwise, at sizes around the
// grid-stride launch's limits.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/common/rank_sum.h"
#include "tests/gpu/kernel_test_support.h"

namespace memstrat {
namespace {

using kernel_testing::bitwise_equal;
using kernel_testing::random_floats;
using kernel_testing::to_device;
using kernel_testing::to_host;

class RankSum : public kernel_testing::WithGpuStream<> {};

TEST_F(RankSum, BitwiseEqualToTheHostReference) {
  for (const int ranks : {1, 2, 3, 4, 8})
    for (const std::size_t count : {std::size_t{1}, std::size_t{255}, std::size_t{203530},
                                    std::size_t{256} * 4096 * 2 + 3}) {
      std::mt19937 rng(kernel_testing::seed_of(ranks, static_cast<int>(count)));
      // Magnitudes over many decades, so that the order of the additions shows in the bits.
      std::vector<float> g = random_floats(count * ranks, rng, -1.f, 1.f);
      for (std::size_t i = 0; i < g.size(); i += 7) g[i] *= 1e7f;
      const auto dg = to_device(g, stream_);
      DeviceBuffer<float> out(count);
      kernels::rank_sum(dg.data(), ranks, count, out.data(), stream_);
      std::vector<float> want(count);
      cpu_ref::rank_sum(g.data(), ranks, count, want.data());
      EXPECT_TRUE(bitwise_equal(to_host(out.data(), count, stream_), want,
                                "ranks " + std::to_string(ranks) + ", count " + std::to_string(count)));
    }
}

TEST_F(RankSum, OutMayBeSlotZero) {
  std::mt19937 rng(3);
  const std::size_t count = 1000;
  const std::vector<float> g = random_floats(count * 3, rng);
  auto dg = to_device(g, stream_);
  kernels::rank_sum(dg.data(), 3, count, dg.data(), stream_);
  std::vector<float> want(count);
  cpu_ref::rank_sum(g.data(), 3, count, want.data());
  EXPECT_TRUE(bitwise_equal(to_host(dg.data(), count, stream_), want, "in place"));
}

}  // namespace
}  // namespace memstrat
