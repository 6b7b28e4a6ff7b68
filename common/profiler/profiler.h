// profiler.h: CuptiProfiler, the built-in profiler: CUDA API calls counted per window
// (CUPTI callback API), unified-memory counters and kernel/memcpy time per window (CUPTI
// activity API), an end-of-run table, and an optional Chrome trace. The one header callers
// include; the parts live beside it in common/profiler/ (window_ledger: windows and
// attribution, cupti_session + api_callback: CUPTI, activity: records, table, trace_export).
// How to read the numbers: docs/profiling.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/profiler/counters.h"

namespace memstrat {

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

 private:
  struct Impl;  // the ledger, the records, the CUPTI session (profiler.cpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace memstrat
