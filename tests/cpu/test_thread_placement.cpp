// --thread-placement without a GPU: the plan a placement gives, which threads count as the CUDA
// driver's, reading a process's task folder, and the scope that places threads and gives them
// back, tried on a stand-in thread named as the driver names its event handler.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_support.h"
#include "idx_test_support.h"  // TempDir
#include "common/host_info.h"
#include "common/thread_placement.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
pid_t gettid_now() { return static_cast<pid_t>(syscall(SYS_gettid)); }

/// A thread that names itself `name` and waits until told to end; its tid once it runs.
struct NamedThread {
  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::thread t;
  explicit NamedThread(const char* name) {
    t = std::thread([this, name] {
      pthread_setname_np(pthread_self(), name);
      tid = gettid_now();
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (tid == 0) std::this_thread::yield();
  }
  ~NamedThread() {
    stop = true;
    t.join();
  }
};
}  // namespace

TEST(ThreadPlacement, PlanApartAndShared) {
  const PlacementPlan apart = placement_plan(ThreadPlacement::Apart, {0, 1, 2, 3}, 2);
  EXPECT_EQ(apart.training, (std::vector<int>{2}));
  EXPECT_EQ(apart.driver, (std::vector<int>{0, 1, 3}));
  const PlacementPlan shared = placement_plan(ThreadPlacement::Shared, {4, 5}, 5);
  EXPECT_EQ(shared.training, (std::vector<int>{5}));
  EXPECT_EQ(shared.driver, (std::vector<int>{5}));
  // A current CPU outside the allowed set (a thread that has not moved yet): the first allowed.
  EXPECT_EQ(placement_plan(ThreadPlacement::Apart, {8, 9}, 3).training, (std::vector<int>{8}));
  EXPECT_EQ(placement_plan(ThreadPlacement::Shared, {8, 9}, -1).driver, (std::vector<int>{8}));
}

TEST(ThreadPlacement, PlanRefusals) {
  EXPECT_THROW(placement_plan(ThreadPlacement::Os, {0, 1}, 0), std::invalid_argument);
  EXPECT_THROW(placement_plan(ThreadPlacement::Shared, {}, 0), std::invalid_argument);
  try {
    placement_plan(ThreadPlacement::Apart, {3}, 3);
    FAIL() << "apart on one CPU was planned";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs two CPUs"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(placement_plan(ThreadPlacement::Shared, {3}, 3));
}

TEST(ThreadPlacement, DriverThreadNames) {
  EXPECT_TRUE(is_cuda_driver_thread("cuda-EvtHandlr"));
  EXPECT_TRUE(is_cuda_driver_thread("cuda00001400006"));
  EXPECT_FALSE(is_cuda_driver_thread("memstrat"));
  EXPECT_FALSE(is_cuda_driver_thread("cupti"));
  EXPECT_FALSE(is_cuda_driver_thread("my-cuda"));
  EXPECT_FALSE(is_cuda_driver_thread(""));
}

TEST(ThreadPlacement, TaskFolder) {
  const idx_testing::TempDir tmp("memstrat_task");
  const std::filesystem::path dir = tmp.path() / "task";
  for (const auto& [tid, name] : std::vector<std::pair<std::string, std::string>>{
           {"120", "memstrat"}, {"7", "cuda-EvtHandlr"}, {"notatid", "x"}}) {
    std::filesystem::create_directories(dir / tid);
    std::ofstream(dir / tid / "comm") << name << "\n";
  }
  const std::vector<TaskThread> t = task_threads(dir.string());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].tid, 7);
  EXPECT_EQ(t[0].name, "cuda-EvtHandlr");
  EXPECT_EQ(t[1].tid, 120);
  EXPECT_TRUE(task_threads((dir / "absent").string()).empty());
  // This process's own folder holds the calling thread.
  bool self = false;
  for (const TaskThread& x : task_threads()) self = self || x.tid == gettid_now();
  EXPECT_TRUE(self);
}

TEST(ThreadPlacement, OsPlacesNothing) {
  const std::vector<int> before = affinity_cpus(0);
  const ThreadPlacementScope s(ThreadPlacement::Os);
  EXPECT_TRUE(s.description().empty());
  EXPECT_EQ(affinity_cpus(0), before);
}

// Without a CUDA context there is no driver thread: a clear error, and nothing moved.
TEST(ThreadPlacement, NoDriverThreadIsAnError) {
  const std::vector<int> before = affinity_cpus(0);
  try {
    const ThreadPlacementScope s(ThreadPlacement::Shared);
    FAIL() << "placed threads with no driver thread";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver thread"), std::string::npos) << e.what();
  }
  EXPECT_EQ(affinity_cpus(0), before);
}

// A thread named as the driver names its event handler stands in for it.
TEST(ThreadPlacement, ApartAndSharedPlaceAndGiveBack) {
  const std::vector<int> allowed = affinity_cpus(0);
  ASSERT_FALSE(allowed.empty());
  NamedThread evt("cuda-EvtHandlr");
  const std::vector<int> evt_before = affinity_cpus(evt.tid);
  for (const ThreadPlacement p : {ThreadPlacement::Shared, ThreadPlacement::Apart}) {
    if (p == ThreadPlacement::Apart && allowed.size() < 2) {
      GTEST_SKIP() << "apart needs two CPUs; this process may use " << allowed.size();
    }
    {
      const ThreadPlacementScope s(p);
      const std::vector<int> mine = affinity_cpus(0), theirs = affinity_cpus(evt.tid);
      ASSERT_EQ(mine.size(), 1u);
      if (p == ThreadPlacement::Shared) {
        EXPECT_EQ(theirs, mine);
      } else {
        EXPECT_EQ(theirs.size(), allowed.size() - 1);
        for (const int c : theirs) EXPECT_NE(c, mine[0]);
      }
      EXPECT_NE(s.description().find("cuda-EvtHandlr"), std::string::npos) << s.description();
      EXPECT_NE(s.description().find("training thread on CPU " + std::to_string(mine[0])),
                std::string::npos)
          << s.description();
    }
    EXPECT_EQ(affinity_cpus(0), allowed) << to_string(p) << ": the training thread given back";
    EXPECT_EQ(affinity_cpus(evt.tid), evt_before) << to_string(p) << ": the driver thread given back";
  }
}

TEST(ThreadPlacement, CommandLine) {
  auto p = parse({"train", "--thread-placement", "apart", "--strategy", "um-prefetch"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.thread_placement, ThreadPlacement::Apart);
  EXPECT_EQ(parse({"train"}).req.run.thread_placement, ThreadPlacement::Os);
  expect_refused({"train", "--thread-placement", "near"}, "--thread-placement");
  expect_refused({"train", "--thread-placement", "apart", "--scenario", "stream"},
                 "static scenario only");
  expect_refused({"train", "--thread-placement", "shared", "--scenario", "refresh"},
                 "inherit its one CPU");
  expect_refused({"train", "--thread-placement", "apart", "--gpus", "2"}, "--gpus 2");
  EXPECT_FALSE(parse({"train", "--thread-placement", "os", "--scenario", "stream", "--strategy", "pinned"}).code);
}
