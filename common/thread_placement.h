// thread_placement.h: which CPUs the training loop's thread and the CUDA driver's host threads
// run on (--thread-placement). The driver serves some calls from its own threads: a
// cudaMemPrefetchAsync, for one, is carried out by its event-handler thread ("cuda-EvtHandlr")
// while the GPU stream waits. Where the scheduler puts that thread beside the training thread
// decides what such a call costs, so a strategy that makes one per batch can run at one speed in
// one process and at another in the next. This names the placement and makes it one: os (the
// scheduler's, as every run had before), apart (the two never share a core) or shared (one core
// for both). Linux: /proc/self/task and sched_setaffinity.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memstrat {

enum class ThreadPlacement { Os, Apart, Shared };
std::string_view to_string(ThreadPlacement p);

/// One thread of a process: its id and its name (task/TID/comm, at most 15 characters).
struct TaskThread {
  pid_t tid = 0;
  std::string name;
};
/// The threads in a process's task folder ("/proc/self/task": this process's), in tid order;
/// empty when the folder cannot be read.
std::vector<TaskThread> task_threads(const std::string& task_dir = "/proc/self/task");

/// Whether a thread's name is one the CUDA driver gives its host threads: "cuda-EvtHandlr",
/// "cuda00001400006" (the driver's names begin with "cuda").
bool is_cuda_driver_thread(const std::string& name);

/// The CPU sets a placement gives the training thread and the driver's threads.
struct PlacementPlan {
  std::vector<int> training;
  std::vector<int> driver;
};
/// From the CPUs the process may run on (`allowed`) and the one the training thread is on now
/// (`current`; the first allowed one where it is not among them): apart puts the training thread
/// on that CPU and the driver's threads on all the others; shared puts all of them on it.
/// Throws std::invalid_argument for os (nothing to plan), no allowed CPU, or apart with one.
PlacementPlan placement_plan(ThreadPlacement p, const std::vector<int>& allowed, int current);

/// Applies a placement to the calling thread (the training loop's) and to the driver threads
/// that exist now, and gives every thread it moved its former CPUs back when destroyed. os does
/// nothing. Throws std::runtime_error where no driver thread exists (no CUDA context yet) or the
/// kernel refuses an affinity.
class ThreadPlacementScope {
 public:
  explicit ThreadPlacementScope(ThreadPlacement p);
  ~ThreadPlacementScope();
  ThreadPlacementScope(const ThreadPlacementScope&) = delete;
  ThreadPlacementScope& operator=(const ThreadPlacementScope&) = delete;

  /// "training thread on CPU 3; cuda-EvtHandlr, cuda00001400006 on CPUs 0-2,4-15"; "" for os.
  const std::string& description() const { return description_; }

 private:
  void restore() noexcept;  // every moved thread back on its former CPUs

  std::vector<std::pair<pid_t, std::vector<int>>> saved_;  // thread, its CPUs before
  std::string description_;
};

}  // namespace memstrat
