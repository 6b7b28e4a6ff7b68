// cupti_profiler.h: CuptiProfiler, the built-in profiler: CUDA API calls counted per window
// (CUPTI callback API), unified-memory counters and kernel/memcpy time per window (CUPTI
// activity API), an end-of-run table, and an optional Chrome trace (common/chrome_trace.h).
// WindowLedger is its CPU-only bookkeeping (windows, attribution by timestamp, null semantics),
// public so that it can be tested without a GPU. How to read the numbers: docs/profiling.md.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memstrat {

/// CUDA API function name (normalised, see normalize_api_name) -> number of calls.
struct ApiCounts {
  std::map<std::string, std::uint64_t> calls;
  /// Calls of `name`; 0 when absent.
  std::uint64_t count(std::string_view name) const;
  /// Calls of all functions.
  std::uint64_t total() const;
};

/// One window = set-up, or one epoch. std::nullopt / api_available == false means "not
/// measured" (profiler off, counter not supported by the device, not enabled for the whole
/// window), never "zero".
struct WindowCounters {
  ApiCounts api;  // empty map and api_available = false when profiling is off
  bool api_available = false;
  std::optional<std::uint64_t> um_htod_bytes, um_dtoh_bytes, um_gpu_faults, um_cpu_faults;
  std::optional<double> kernel_ms, memcpy_ms;  // summed activity durations in the window
};

/// CUPTI reports runtime functions with the CUDA version that introduced their signature:
/// "cudaMalloc_v3020", "cudaMemPrefetchAsync_v12020", "cudaGetDeviceProperties_v2_v12000".
/// Strips one trailing "_v" + 4 or more digits: "cudaMalloc", "cudaMemPrefetchAsync",
/// "cudaGetDeviceProperties_v2". Driver ABI suffixes ("cuMemAlloc_v2") and per-thread
/// default-stream variants ("cudaMemcpyAsync_ptsz") are kept: they are different entry points.
std::string normalize_api_name(std::string_view cupti_name);

/// The API functions every record lists, with an explicit 0 when not called: the allocation,
/// copy, unified-memory, synchronisation and launch calls that the memory strategies differ in.
const std::vector<std::string>& watched_api_names();

/// The counters of the activity API that a window carries.
enum class ActivityCounter : int {
  KernelTime = 0,  // value: ns of one kernel
  MemcpyTime,      // value: ns of one memcpy
  UmHtoDBytes,     // value: bytes of one host->device unified-memory migration
  UmDtoHBytes,     // value: bytes of one device->host migration
  UmGpuFaults,     // value: GPU page-fault groups in one record
  UmCpuFaults,     // value: 1 per CPU page-fault record
  Count
};

/// Windows and what belongs to them; no CUDA or CUPTI inside. Thread-safe (activity records
/// arrive from CUPTI's threads). Timestamps are ns on one clock (CUPTI's when profiling).
class WindowLedger {
 public:
  using Snapshot = std::map<std::string, std::uint64_t>;  // cumulative API calls by name
  static constexpr std::uint64_t kOpen = UINT64_MAX;

  /// API counting works (set once, before the first window).
  void set_api_available(bool available);
  /// Counter `c` is collected from `since_ns` on. A window reports it only when it was
  /// collected for the whole window (since_ns <= window begin); otherwise null.
  void mark_available(ActivityCounter c, std::uint64_t since_ns);

  /// Opens a window. Throws std::logic_error when one is already open.
  void begin_window(std::string name, std::uint64_t ts_ns, const Snapshot& api);
  /// Closes the open window (API calls = api - snapshot at begin). Records may still be
  /// added to it until report(). Throws std::logic_error when none is open.
  void close_window(std::uint64_t ts_ns, const Snapshot& api);
  /// The counters of the window closed last (after the activity flush). Marks it reported:
  /// records that arrive for it later are counted by late_records() only.
  WindowCounters report();

  /// Attributes one activity record to the window whose [begin, end) holds `ts_ns` (its start
  /// timestamp); records outside every window go to the outside bucket. ts_ns == 0 (no
  /// timestamp) goes to the open window, if any. Returns false for a late record.
  bool add(ActivityCounter c, std::uint64_t ts_ns, std::uint64_t value);

  bool window_open() const;
  std::string open_window_name() const;
  std::uint64_t late_records() const;
  /// Windows reported so far, in order.
  std::vector<std::pair<std::string, WindowCounters>> history() const;
  /// Activity sums of records outside every window (API outside = totals - windows).
  std::array<std::uint64_t, static_cast<int>(ActivityCounter::Count)> outside_sums() const;
  /// [begin, end) of every window (end == kOpen while open), for the trace.
  std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>> spans() const;

 private:
  static constexpr int kCounters = static_cast<int>(ActivityCounter::Count);
  struct Window {
    std::string name;
    std::uint64_t begin = 0, end = kOpen;
    Snapshot api_begin;
    ApiCounts api;
    std::array<std::uint64_t, kCounters> sums{};
    bool reported = false;
    WindowCounters result;
  };
  Window* find_locked(std::uint64_t ts_ns);

  mutable std::mutex mu_;
  bool api_available_ = false;
  std::array<std::optional<std::uint64_t>, kCounters> since_{};
  std::vector<Window> windows_;
  std::array<std::uint64_t, kCounters> outside_{};
  std::uint64_t late_ = 0;
};

/// The built-in profiler. One active instance per process (CUPTI allows one subscriber; a
/// second instance, or a run under Nsight Systems / Compute, reports every counter as null
/// and says why in notes()). With Options::enabled == false no CUPTI function is called at all.
///
/// Order of calls (see docs/profiling.md):
///   CuptiProfiler prof(opts);          // before the first CUDA and NVTX call
///   cudaFree(0);                        // create the context
///   prof.enable_device_counters();      // unified-memory counters need the context
///   prof.begin_window("setup");  ...attach...             prof.end_window();
///   prof.begin_window("epoch 1"); ...; cudaDeviceSynchronize(); prof.end_window(); ...
///   prof.table(), prof.notes(), prof.write_trace();
class CuptiProfiler {
 public:
  struct Options {
    bool enabled = true;         // false: no CUPTI call at all; every counter null
    bool unified_memory = true;  // unified-memory counters (activity API)
    bool activity = true;        // kernel and memcpy records (activity API): kernel_ms, memcpy_ms
    std::string trace_path;      // empty = no trace; else write_trace() writes this file
  };

  /// Subscribes the API callbacks and enables kernel/memcpy activity (works before any CUDA
  /// context exists). When tracing, also sets NVTX_INJECTION64_PATH to libcupti (unless set)
  /// so that NVTX ranges reach CUPTI: construct the profiler before the first NVTX call.
  explicit CuptiProfiler(Options options);
  /// Flushes, disables the activity kinds and unsubscribes; never throws.
  ~CuptiProfiler();
  CuptiProfiler(const CuptiProfiler&) = delete;
  CuptiProfiler& operator=(const CuptiProfiler&) = delete;

  /// Call once after the CUDA context exists (after cudaFree(0)): enables the unified-memory
  /// counters (CUPTI answers NOT_READY before a context exists) and retries any activity kind
  /// that failed in the constructor. Records in notes() why a counter is unavailable.
  void enable_device_counters();
  /// Opens a window ("setup", "epoch 1", ...): API calls and activity from here belong to it.
  /// Throws std::logic_error when a window is already open.
  void begin_window(std::string name);
  /// Closes the window and returns its counters. Synchronise the device first: the activity
  /// records are flushed (cuptiActivityFlushAll(FLUSH_FORCED)) and attributed by GPU timestamp;
  /// with unified-memory counters on it waits 2 ms and flushes again, so call it outside timed
  /// regions. Throws std::logic_error when no window is open.
  WindowCounters end_window();

  /// Why counters are null, dropped or late records, NVTX injection state ...
  std::vector<std::string> notes() const;
  /// When Options::trace_path is set: writes the Chrome trace of everything recorded (NVTX
  /// ranges, kernels, memcpys, memsets, prefetches, unified-memory migrations and faults,
  /// profiler windows). Throws std::runtime_error when the file cannot be written.
  void write_trace();
  /// {"api_calls": {...}|null, "um_htod_bytes": n|null, "um_dtoh_bytes", "um_gpu_faults",
  ///  "um_cpu_faults", "kernel_ms", "memcpy_ms"} (the per-epoch keys of the results record).
  static nlohmann::json to_json(const WindowCounters& w);

  bool api_available() const;
  /// Every call counted since construction, inside or outside windows (compare with
  /// `nsys stats --report cuda_api_sum` of the same command: docs/profiling.md).
  ApiCounts api_totals() const;
  /// The end-of-run tables: API calls per window (rows: the allocation functions, the other
  /// watched functions that were called, any other function called in an epoch; columns:
  /// windows, outside, total) and the activity counters per window. "n/a" = not measured.
  std::string table() const;
  const Options& options() const;
  /// Activity records that arrived after their window had been reported (those windows'
  /// activity counters are low by that much); 0 in a healthy run.
  std::uint64_t late_records() const;
  /// Number of CUPTI functions this process called through any CuptiProfiler (tests check
  /// that a disabled profiler calls none).
  static std::uint64_t cupti_calls_made();

  struct Impl;  // CUPTI state (cupti_profiler.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace memstrat
