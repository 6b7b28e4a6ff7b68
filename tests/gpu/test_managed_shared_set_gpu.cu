// The um-shared forms on a GPU: in a data-parallel run's group every rank gets the one managed set
// (ManagedSharedSet: one cudaMallocManaged allocation, made by whichever rank asks first), with
// disjoint 2 MiB-aligned regions; each form places its rank's region as its registry line says
// (managed.h), read back with cudaMemRangeGetAttribute; without a group (one GPU, the emulation)
// no shared set and no placement hint: the one_gpu_as strategy's own buffers. One GPU is enough:
// the group's ranks may share a device here (tests/gpu/test_data_parallel.cu trains every form on
// two GPUs, bit for bit against the emulation).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memory_strategies/managed_shared_set.h"
#include "memory_strategies/registry.h"
#include "memory_strategies/replica_group.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/shared_set_checks.h"

namespace memstrat::testing {
namespace {

constexpr std::int64_t kSamples = 2000;

std::uint64_t sizes(int rank) { return 1000 + (3ull << 20) * static_cast<std::uint64_t>(rank); }

bool managed_capable() {
  int v = 0;
  return cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 0) == cudaSuccess && v;
}

TEST(ManagedSharedSet, EveryRankOfAGroupGetsTheOneSet) {
  MEMSTRAT_REQUIRE_GPU();
  if (!managed_capable()) GTEST_SKIP() << "needs concurrentManagedAccess";
  ReplicaGroup group({0, 0, 0});
  const auto got = ask_at_once(3, group, [](const StrategyOptions& o) {
    CUDA_CHECK(cudaSetDevice(0));
    return ManagedSharedSet::for_rank(o, sizes, "test");
  });
  expect_one_set_of_regions(got, sizes);
  ASSERT_TRUE(got[0]);
  const ManagedSharedSet& set = *got[0];
  cudaPointerAttributes a{};
  CUDA_CHECK(cudaPointerGetAttributes(&a, set.region(1)));
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  EXPECT_THROW(ManagedSharedSet::for_rank(rank_of(0, 1, nullptr), sizes, "test"),
               std::invalid_argument);
  ReplicaGroup two({0, 0});
  EXPECT_THROW(ManagedSharedSet::for_rank(rank_of(0, 3, &two), sizes, "test"),
               std::invalid_argument);
}

const HostDataset& subset() { return mnist_first(kSamples); }

int range_int(const void* p, std::size_t bytes, cudaMemRangeAttribute what) {
  int v = 0;
  CUDA_CHECK(cudaMemRangeGetAttribute(&v, sizeof v, what, p, bytes));
  return v;
}

bool accessed_by(const void* p, std::size_t bytes, int device) {
  std::vector<int> devs(8, cudaInvalidDeviceId);
  CUDA_CHECK(cudaMemRangeGetAttribute(devs.data(), devs.size() * sizeof(int),
                                      cudaMemRangeAttributeAccessedBy, p, bytes));
  for (const int d : devs)
    if (d == device) return true;
  return false;
}

struct Placement {
  const char* strategy;
  int preferred;     // cudaMemRangeAttributePreferredLocation
  int read_mostly;   // cudaMemRangeAttributeReadMostly
  bool accessed_by;  // AccessedBy GPU 0
};

TEST(ManagedShared, EachFormPlacesItsRankRegionAndOneGpuNone) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  if (!managed_capable()) GTEST_SKIP() << "needs concurrentManagedAccess";
  CUDA_CHECK(cudaSetDevice(0));
  const HostDataset& data = subset();
  const Placement cases[] = {{"um-shared", cudaInvalidDeviceId, 0, false},
                             {"um-shared-prefetch", 0, 0, false},
                             {"um-shared-read-mostly", cudaInvalidDeviceId, 1, false},
                             {"um-shared-host", cudaCpuDeviceId, 0, true}};
  for (const Placement& k : cases) {
    const StrategyEntry& e = *find_strategy(k.strategy);
    SCOPED_TRACE(k.strategy);
    ReplicaGroup group({0, 0});
    Stream compute = Stream::create();
    std::vector<std::unique_ptr<MemoryStrategy>> ranks;
    std::vector<const std::uint8_t*> first;
    for (int r = 0; r < 2; ++r) {
      StrategyOptions o = rank_of(r, 2, &group);
      o.batch = 256;
      ranks.push_back(e.make());
      ranks.back()->attach(data, o, compute);
      ranks.back()->begin_epoch(1);
      const BatchView v = ranks.back()->acquire(0);  // its shard's first batch: its region's start
      first.push_back(v.x_u8);
      ranks.back()->release(0);
    }
    CUDA_CHECK(cudaStreamSynchronize(compute));
    for (auto& s : ranks) s->end_epoch();
    ASSERT_NE(first[0], first[1]);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first[r]) % ManagedSharedSet::kAlign, 0u) << r;
      const std::size_t bytes = 256 * 784;
      EXPECT_EQ(range_int(first[r], bytes, cudaMemRangeAttributePreferredLocation), k.preferred)
          << r;
      EXPECT_EQ(range_int(first[r], bytes, cudaMemRangeAttributeReadMostly), k.read_mostly) << r;
      EXPECT_EQ(accessed_by(first[r], bytes, 0), k.accessed_by) << r;
    }
    // One GPU: the strategy's own managed buffers, no placement hint (its one_gpu_as exactly).
    StrategyOptions one;
    one.batch = 256;
    auto alone = e.make();
    alone->attach(data, one, compute);
    alone->begin_epoch(1);
    const BatchView v = alone->acquire(0);
    alone->release(0);
    CUDA_CHECK(cudaStreamSynchronize(compute));
    alone->end_epoch();
    EXPECT_EQ(range_int(v.x_u8, 256 * 784, cudaMemRangeAttributePreferredLocation),
              cudaInvalidDeviceId);
    EXPECT_EQ(range_int(v.x_u8, 256 * 784, cudaMemRangeAttributeReadMostly), 0);
    EXPECT_FALSE(accessed_by(v.x_u8, 256 * 784, 0));
  }
}

}  // namespace
}  // namespace memstrat::testing
