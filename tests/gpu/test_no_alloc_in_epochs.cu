// "No allocation after attach": for every strategy, no allocation API of any kind is called
// during an epoch (graph capture in epoch 1 included), counted by the built-in CUPTI profiler.
#include "common/profiler/profiler.h"
#include "gpu_test_support.h"

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
    // A batch past the single-launch limit runs the cuBLASLt step (one launch per batch,
    // graphs); resident also runs batch 256, the single-launch step with the epoch launch (its
    // per-step table is uploaded in epoch 1, into memory reserved at construction).
    const int lt_batch = static_cast<int>(kSingleLaunchMaxWork / 256) + 64;
    for (const int batch : e.name == "resident" ? std::vector<int>{lt_batch, 256} : std::vector<int>{lt_batch}) {
      for (Scenario sc : {Scenario::Static, Scenario::Refresh}) {
        Stream compute = Stream::create();
        MlpConfig m;
        m.layers = {data.features(), 256, data.classes};
        m.max_batch = batch;
        Mlp mlp(m, compute);
        StrategyOptions so;
        so.batch = batch;
        so.scenario = sc;
        auto st = e.make();
        st->attach(data, so, compute);
        Trainer tr(mlp, *st, data, so.batch, /*graphs=*/true, compute, /*epoch_launch=*/true);
        EXPECT_EQ(tr.epoch_launch(), batch == 256) << e.name;
        for (int ep = 1; ep <= 2; ++ep) {
          prof.begin_window("epoch " + std::to_string(ep));
          tr.run_epoch(ep);
          const WindowCounters w = prof.end_window();
          ASSERT_TRUE(w.api_available);
          for (const char* fn : kAllocators)
            EXPECT_EQ(w.api.count(fn), 0u) << e.name << " " << to_string(sc) << " batch " << batch
                                            << " epoch " << ep << ": " << fn;
          EXPECT_EQ(w.api.count("cudaFree"), 0u) << e.name;
        }
      }
    }
  }
}
