// "No allocation after attach": for every strategy, no allocation API of any kind is called
// during an epoch (graph capture in epoch 1 included), counted by the built-in CUPTI profiler.
#include "common/cupti_profiler.h"
#include "gpu_test_support.h"
#include "memory_strategies/strategy_common.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
const char* const kAllocators[] = {"cudaMalloc",        "cudaMallocAsync",     "cudaMallocHost",
                                   "cudaHostAlloc",     "cudaMallocManaged",   "cudaMallocPitch",
                                   "cudaMallocFromPoolAsync", "cudaMalloc3D",  "cudaMallocArray"};
}

TEST(NoAllocation, NoAllocatorIsCalledInAnyEpochForAnyStrategy) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& data = mnist();  // host only: before the profiler, outside every window
  CuptiProfiler prof(CuptiProfiler::Options{});
  if (!prof.api_available()) GTEST_SKIP() << "CUPTI callbacks unavailable";
  CUDA_CHECK(cudaFree(nullptr));
  prof.enable_device_counters();
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const auto& e : strategy_registry()) {
    if (!e.unsupported(caps).empty()) continue;
    for (Scenario sc : {Scenario::Static, Scenario::Refresh}) {
      Stream compute = Stream::create();
      MlpConfig m;
      m.layers = {data.features(), 256, data.classes};
      m.max_batch = 512;
      Mlp mlp(m, compute);
      StrategyOptions so;
      so.batch = 512;
      so.scenario = sc;
      auto st = e.make();
      st->attach(data, so, compute);
      Trainer tr(mlp, *st, data, so.batch, /*graphs=*/true, compute);
      for (int ep = 1; ep <= 2; ++ep) {
        prof.begin_window("epoch " + std::to_string(ep));
        tr.run_epoch(ep);
        const WindowCounters w = prof.end_window();
        ASSERT_TRUE(w.api_available);
        for (const char* fn : kAllocators)
          EXPECT_EQ(w.api.count(fn), 0u) << e.name << " " << to_string(sc) << " epoch " << ep << ": " << fn;
        EXPECT_EQ(w.api.count("cudaFree"), 0u) << e.name;
      }
    }
  }
}
