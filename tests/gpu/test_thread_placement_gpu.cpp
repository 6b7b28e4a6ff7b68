// --thread-placement with a real CUDA context: the driver's event-handler thread is found by its
// name and placed, a run records its placement and gives the threads their CPUs back after its
// epochs. What a placement does to an epoch's time is measured by the spread study
// (experiments/matrix/matrices/spread.toml), not asserted here.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/host_info.h"
#include "common/thread_placement.h"
#include "tests/gpu/gpu_test_support.h"

using namespace memstrat;

namespace {
/// The threads of this process the CUDA driver started, by name.
std::vector<TaskThread> driver_threads() {
  std::vector<TaskThread> out;
  for (const TaskThread& t : task_threads())
    if (is_cuda_driver_thread(t.name)) out.push_back(t);
  return out;
}
}  // namespace

TEST(ThreadPlacementGpu, TheDriversEventHandlerIsFoundAndPlaced) {
  MEMSTRAT_REQUIRE_GPU();
  CUDA_CHECK(cudaFree(nullptr));  // a context: the driver's threads exist from here
  const std::vector<TaskThread> driver = driver_threads();
  bool handler = false;
  for (const TaskThread& t : driver) handler = handler || t.name == "cuda-EvtHandlr";
  ASSERT_TRUE(handler) << "no thread named cuda-EvtHandlr among " << driver.size()
                       << " driver threads";
  const std::vector<int> allowed = affinity_cpus(0);
  if (allowed.size() < 2) GTEST_SKIP() << "apart needs two CPUs";
  {
    const ThreadPlacementScope s(ThreadPlacement::Apart);
    const std::vector<int> mine = affinity_cpus(0);
    ASSERT_EQ(mine.size(), 1u);
    for (const TaskThread& t : driver) {
      const std::vector<int> theirs = affinity_cpus(t.tid);
      EXPECT_EQ(theirs.size(), allowed.size() - 1) << t.name;
      for (const int c : theirs) EXPECT_NE(c, mine[0]) << t.name;
    }
  }
  EXPECT_EQ(affinity_cpus(0), allowed);
  for (const TaskThread& t : driver) EXPECT_EQ(affinity_cpus(t.tid), allowed) << t.name;
}

TEST(ThreadPlacementGpu, ARunRecordsItsPlacementAndGivesTheCpusBack) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const std::vector<int> allowed = affinity_cpus(0);
  for (const ThreadPlacement p : {ThreadPlacement::Shared, ThreadPlacement::Apart}) {
    if (p == ThreadPlacement::Apart && allowed.size() < 2) continue;
    RunConfig c = memstrat::testing::short_run("um-prefetch");
    c.thread_placement = p;
    const nlohmann::json j = memstrat::testing::run_session(c).to_json();
    EXPECT_EQ(j["config"]["thread_placement"], std::string(to_string(p)));
    EXPECT_EQ(j["status"], "ok");
    EXPECT_EQ(affinity_cpus(0), allowed) << to_string(p);
    for (const TaskThread& t : driver_threads())
      EXPECT_EQ(affinity_cpus(t.tid), allowed) << to_string(p) << " " << t.name;
  }
  // The scheduler's placement records os and moves nothing.
  const nlohmann::json j = memstrat::testing::run_session(memstrat::testing::short_run("um-prefetch")).to_json();
  EXPECT_EQ(j["config"]["thread_placement"], "os");
}
