#include "common/thread_placement.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/host_info.h"

namespace memstrat {

namespace {
pid_t this_thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void set_cpus(pid_t tid, const std::vector<int>& cpus, const std::string& who) {
  const int n = std::max(CPU_SETSIZE, *std::max_element(cpus.begin(), cpus.end()) + 1);
  const std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set(CPU_ALLOC(n),
                                                              [](cpu_set_t* s) { CPU_FREE(s); });
  if (!set) throw std::runtime_error("--thread-placement: out of memory for a CPU set");
  const std::size_t size = CPU_ALLOC_SIZE(n);
  CPU_ZERO_S(size, set.get());
  for (const int c : cpus) CPU_SET_S(c, size, set.get());
  if (sched_setaffinity(tid, size, set.get()) != 0)
    throw std::runtime_error("--thread-placement: cannot place " + who + " (thread " +
                             std::to_string(tid) + ") on CPUs " + compact_cpu_list(cpus) + ": " +
                             std::strerror(errno));
}
}  // namespace

std::string_view to_string(ThreadPlacement p) {
  switch (p) {
    case ThreadPlacement::Os: return "os";
    case ThreadPlacement::Apart: return "apart";
    case ThreadPlacement::Shared: return "shared";
  }
  return "?";
}

std::vector<TaskThread> task_threads(const std::string& task_dir) {
  std::vector<TaskThread> out;
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(task_dir.c_str()), closedir);
  if (!dir) return out;
  while (const dirent* e = readdir(dir.get())) {
    char* end = nullptr;
    const long tid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || tid <= 0) continue;  // ".", "..", anything else
    std::string name = read_first_line(task_dir + "/" + e->d_name + "/comm");
    out.push_back({static_cast<pid_t>(tid), std::move(name)});
  }
  std::sort(out.begin(), out.end(), [](const TaskThread& a, const TaskThread& b) { return a.tid < b.tid; });
  return out;
}

bool is_cuda_driver_thread(const std::string& name) { return name.rfind("cuda", 0) == 0; }

PlacementPlan placement_plan(ThreadPlacement p, const std::vector<int>& allowed, int current) {
  if (p == ThreadPlacement::Os)
    throw std::invalid_argument("--thread-placement os leaves the threads where the scheduler puts them");
  if (allowed.empty())
    throw std::invalid_argument("--thread-placement: the kernel names no CPU this process may run on");
  const int home =
      std::find(allowed.begin(), allowed.end(), current) != allowed.end() ? current : allowed.front();
  if (p == ThreadPlacement::Shared) return {{home}, {home}};
  if (allowed.size() < 2)
    throw std::invalid_argument("--thread-placement apart needs two CPUs, and this process may run on "
                                "CPU " + std::to_string(home) + " only (taskset, numactl or a "
                                "container's cpuset); use os or shared, or allow more CPUs");
  PlacementPlan plan{{home}, {}};
  for (const int c : allowed)
    if (c != home) plan.driver.push_back(c);
  return plan;
}

ThreadPlacementScope::ThreadPlacementScope(ThreadPlacement p) {
  if (p == ThreadPlacement::Os) return;
  const pid_t self = this_thread_id();
  std::vector<TaskThread> driver;
  for (TaskThread& t : task_threads())
    if (t.tid != self && is_cuda_driver_thread(t.name)) driver.push_back(std::move(t));
  if (driver.empty())
    throw std::runtime_error("--thread-placement " + std::string(to_string(p)) +
                             ": this process has no CUDA driver thread (none named cuda* in "
                             "/proc/self/task) to place; it needs a CUDA context first");
  // The calling thread's CPUs: those the process may use, and the ones it gets back at the end.
  std::vector<int> own = affinity_cpus(self);
  const PlacementPlan plan = placement_plan(p, own, sched_getcpu());
  try {
    saved_.emplace_back(self, std::move(own));
    set_cpus(self, plan.training, "the training thread");
    std::string names;
    for (const TaskThread& t : driver) {
      saved_.emplace_back(t.tid, affinity_cpus(t.tid));
      set_cpus(t.tid, plan.driver, t.name);
      names += (names.empty() ? "" : ", ") + t.name;
    }
    description_ = "training thread on CPU " + compact_cpu_list(plan.training) + "; " + names +
                   " on CPU" + (plan.driver.size() > 1 ? "s " : " ") + compact_cpu_list(plan.driver);
  } catch (...) {
    restore();  // give back what was moved, then report
    throw;
  }
}

ThreadPlacementScope::~ThreadPlacementScope() { restore(); }

void ThreadPlacementScope::restore() noexcept {
  for (const auto& [tid, cpus] : saved_) {
    if (cpus.empty()) continue;
    try {
      set_cpus(tid, cpus, "a thread");
    } catch (const std::exception&) {
      // the thread has ended, or the kernel refuses: nothing to give back
    }
  }
  saved_.clear();
}

}  // namespace memstrat
