// "No allocation after attach": for every strategy, no allocation API of any kind is called
// during an epoch (graph capture in epoch 1 included: per-batch step graphs or the epoch graph),
// counted by the built-in CUPTI profiler in the per-epoch windows of a run built exactly as
// `memstrat train` builds it (Session).
#include <iostream>

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
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const auto& e : strategy_registry()) {
    if (!e.unsupported(caps).empty()) continue;
    // A batch past the single-launch limit runs the cuBLASLt step (one launch per batch,
    // graphs, or captured in the epoch graph); resident also runs batch 256, the single-launch
    // step in the kernel form (its per-step table is uploaded in epoch 1, into memory reserved at
    // construction); a capturable strategy also runs batch 256 (the single-launch step captured
    // in the epoch graph, or, for a strategy with launch groups, one launch per group).
    const int lt_batch = static_cast<int>(kSingleLaunchMaxWork / 256) + 64;
    const bool capturable = e.make()->epoch_capturable();
    const bool small_too = e.name == "resident" || capturable;
    for (const int batch : small_too ? std::vector<int>{lt_batch, 256} : std::vector<int>{lt_batch}) {
      for (Scenario sc : {Scenario::Static, Scenario::Refresh}) {
        RunConfig c = short_run(e.name);
        c.batch = batch;
        c.scenario = sc;
        c.profile = true;
        if (!refusal_reason(e, strategy_options(c)).empty()) continue;  // peer-fanout: static only
        const RunRecord r = run_session(c);
        ASSERT_TRUE(r.epoch_launch.has_value());
        const EpochForm want = capturable ? (batch == 256 ? captured_form(e.name) : EpochForm::Graph)
                               : batch == 256 ? EpochForm::Kernel
                                              : EpochForm::PerBatch;
        EXPECT_EQ(r.epoch_launch->form, want) << e.name << " batch " << batch;
        ASSERT_EQ(r.epochs.size(), 2u);
        for (const EpochRecord& ep : r.epochs) {
          if (!ep.counters.api_available) GTEST_SKIP() << "CUPTI callbacks unavailable";
          for (const char* fn : kAllocators)
            EXPECT_EQ(ep.counters.api.count(fn), 0u) << e.name << " " << to_string(sc) << " batch "
                                                     << batch << " epoch " << ep.train.epoch << ": " << fn;
          EXPECT_EQ(ep.counters.api.count("cudaFree"), 0u) << e.name;
        }
      }
    }
  }
}

// The stream scenario allocates its slots, events, order and scratch in attach: no epoch
// allocates, whether host workers fill slots or the GPU gathers (worker threads' calls included:
// CUPTI counts every thread's).
TEST(NoAllocation, NoAllocatorIsCalledInAnyStreamEpoch) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const auto& e : strategy_registry()) {
    for (const Augment a : {Augment::None, Augment::Light}) {
      RunConfig c = short_run(e.name);
      c.scenario = Scenario::Stream;
      c.augment = a;
      c.workers = 3;
      c.profile = true;
      if (!waiver_reason(e, strategy_options(c), caps).empty()) continue;  // refused or waived
      const RunRecord r = run_session(c);
      for (const EpochRecord& ep : r.epochs) {
        if (!ep.counters.api_available) GTEST_SKIP() << "CUPTI callbacks unavailable";
        for (const char* fn : kAllocators)
          EXPECT_EQ(ep.counters.api.count(fn), 0u)
              << e.name << " stream " << to_string(a) << " epoch " << ep.train.epoch << ": " << fn;
        EXPECT_EQ(ep.counters.api.count("cudaFree"), 0u) << e.name << " stream " << to_string(a);
      }
    }
  }
}

// --augment-device gpu: the uint8 set, the order (pinned staging and device), the epoch the GPU
// writes (refresh) or the gathered batch (stream) are allocated in attach, so no epoch of any
// strategy that takes it allocates, in each scenario it takes it in and each launch form it
// declares there (graph capture in epoch 1 included).
TEST(NoAllocation, NoAllocatorIsCalledInAnyEpochWithAugmentationOnTheGpu) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const DeviceCaps caps = DeviceCaps::query(0);
  int runs = 0;
  for (const auto& e : strategy_registry()) {
    for (const Scenario sc : e.gpu_augment) {
      for (const EpochForm f : e.launch_forms.in(sc).forms()) {
        RunConfig c = short_run(e.name);
        c.scenario = sc;
        if (sc == Scenario::Stream) c.augment = Augment::Heavy;  // refresh: its light shift
        c.augment_device = AugmentDevice::Gpu;
        c.fused = FusedMode::Single;  // the step every form runs
        c.profile = true;
        for (const LaunchForm l : {LaunchForm::PerBatch, LaunchForm::Graph,
                                   LaunchForm::ChunkKernels, LaunchForm::Kernel})
          if (asked_form(l) == f) c.launch_form = l;
        if (const std::string why = waiver_reason(e, strategy_options(c), caps); !why.empty()) {
          std::cout << "[ WAIVED ] " << e.name << " " << to_string(sc) << ": " << why << "\n";
          continue;
        }
        const RunRecord r = run_session(c);
        ASSERT_TRUE(r.epoch_launch.has_value());
        EXPECT_EQ(r.epoch_launch->form, f) << e.name << " " << to_string(sc);
        ASSERT_EQ(r.epochs.size(), 2u);
        for (const EpochRecord& ep : r.epochs) {
          if (!ep.counters.api_available) GTEST_SKIP() << "CUPTI callbacks unavailable";
          for (const char* fn : kAllocators)
            EXPECT_EQ(ep.counters.api.count(fn), 0u)
                << e.name << " " << to_string(sc) << " " << to_string(f) << " epoch "
                << ep.train.epoch << ": " << fn;
          EXPECT_EQ(ep.counters.api.count("cudaFree"), 0u) << e.name << " " << to_string(sc);
        }
        ++runs;
      }
    }
  }
  EXPECT_GE(runs, 5) << "resident's four refresh forms and its stream form at least";
}
