// HostSharedSet, the host-shared forms' one page-locked host set: in a data-parallel run's group
// every rank gets the same set (one allocation, made by whichever rank asks first), portable to
// every GPU's context, with disjoint aligned regions of the sizes asked for; without a group, a
// set of one region of its own. One GPU is enough: the group's ranks may share a device here.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "memory_strategies/host_shared_set.h"
#include "memory_strategies/replica_group.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/shared_set_checks.h"

namespace memstrat::testing {
namespace {

std::uint64_t sizes(int rank) { return 1000 + 300 * static_cast<std::uint64_t>(rank); }

TEST(HostSharedSet, EveryRankOfAGroupGetsTheOneSet) {
  MEMSTRAT_REQUIRE_GPU();
  ReplicaGroup group({0, 0, 0});
  const auto got = ask_at_once(3, group, [](const StrategyOptions& o) {
    CUDA_CHECK(cudaSetDevice(0));
    return HostSharedSet::for_rank(o, sizes);
  });
  expect_one_set_of_regions(got, sizes);
  ASSERT_TRUE(got[0]);
  const HostSharedSet& set = *got[0];
  unsigned flags = 0;
  CUDA_CHECK(cudaHostGetFlags(&flags, set.region(0)));
  EXPECT_NE(flags & cudaHostAllocPortable, 0u) << "pinned for every GPU's context";
  // Page-locked and writable end to end: a copy to the device and back of the last region.
  std::memset(set.region(2), 0x5a, sizes(2));
  DeviceBuffer<std::uint8_t> d(sizes(2));
  CUDA_CHECK(cudaMemcpy(d.data(), set.region(2), sizes(2), cudaMemcpyHostToDevice));
  std::vector<std::uint8_t> back(sizes(2));
  CUDA_CHECK(cudaMemcpy(back.data(), d.data(), sizes(2), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, std::vector<std::uint8_t>(sizes(2), 0x5a));
}

TEST(HostSharedSet, WithoutAGroupOneRegionOfItsOwn) {
  MEMSTRAT_REQUIRE_GPU();
  const auto a = HostSharedSet::for_rank(rank_of(0, 1, nullptr), sizes);
  const auto b = HostSharedSet::for_rank(rank_of(0, 1, nullptr), sizes);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(a->regions(), 1);
  EXPECT_EQ(a->bytes(), sizes(0));
  EXPECT_THROW(HostSharedSet::for_rank(rank_of(1, 2, nullptr), sizes), std::invalid_argument);
  ReplicaGroup two({0, 0});
  EXPECT_THROW(HostSharedSet::for_rank(rank_of(0, 3, &two), sizes), std::invalid_argument);
}

}  // namespace
}  // namespace memstrat::testing
