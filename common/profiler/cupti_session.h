// cupti_session.h: CuptiSession, the profiler's hold on CUPTI: the subscription with the API
// callback (api_callback.h), the activity kinds it enables, the activity buffers CUPTI fills
// (handed to ActivityRecords), flushing, the CUPTI clock, and the teardown. Every CUPTI call it
// makes outside the callbacks is counted, so that a test can check that a disabled profiler
// makes none.
//
// Activity: kernel, memcpy (and memset, NVTX markers, names when tracing) records are enabled in
// start(); unified-memory counters in enable_device_counters() (they need a context).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <vector>

#include "common/profiler/activity.h"
#include "common/profiler/notes.h"
#include "common/profiler/profiler.h"
#include "common/profiler/window_ledger.h"

namespace memstrat {

class CuptiSession {
 public:
  /// Makes no CUPTI call: a session that is never started measures nothing.
  CuptiSession(const CuptiProfiler::Options& options, WindowLedger& ledger,
               ActivityRecords& records, ProfilerNotes& notes)
      : opt_(options), ledger_(ledger), records_(records), notes_(notes) {}
  /// Flushes, disables the activity kinds and unsubscribes; never throws.
  ~CuptiSession();
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  /// Subscribes the API callbacks and enables kernel/memcpy activity (works before any CUDA
  /// context exists); when tracing also memsets, names, NVTX markers, and points NVTX at
  /// libcupti. Says in the notes why anything is unavailable. At most one session per process
  /// measures: a second one notes so and stays off.
  void start();
  /// After the CUDA context exists: retries failed activity kinds, enables the unified-memory
  /// counters (see CuptiProfiler::enable_device_counters).
  void enable_device_counters();
  /// Delivers every buffered activity record (cuptiActivityFlushAll(FLUSH_FORCED)).
  void flush();

  /// ns on CUPTI's clock when subscribed (the clock of the activity records), else steady_clock.
  std::uint64_t now() const;
  /// API calls since start(), by name (zeros left out); empty when API counting is off.
  WindowLedger::Snapshot snapshot() const;

  bool subscribed() const { return subscribed_; }
  bool api_ok() const { return api_ok_; }
  bool markers_on() const { return markers_on_; }
  bool um_on() const { return um_on_; }
  /// Unified-memory counters are wanted but enable_device_counters() has not run yet.
  bool um_pending() const { return subscribed_ && opt_.unified_memory && !um_tried_; }
  /// Records CUPTI dropped for lack of buffer space.
  std::uint64_t cupti_dropped() const { return dropped_; }

  /// CUPTI functions called by any session of this process.
  static std::uint64_t cupti_calls_made();

 private:
  bool tracing() const { return !opt_.trace_path.empty(); }
  bool subscribe();
  void enable_api_domains();
  void register_buffers();
  void enable_activity_kinds();
  void enable_trace_kinds();
  void route_nvtx_to_cupti();
  bool enable_kind(CUpti_ActivityKind kind, const char* what);
  CUptiResult configure_um_counters(std::uint32_t* enabled);

  const CuptiProfiler::Options& opt_;
  WindowLedger& ledger_;
  ActivityRecords& records_;
  ProfilerNotes& notes_;

  bool subscribed_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool api_ok_ = false;
  bool buffers_registered_ = false;
  std::vector<CUpti_ActivityKind> enabled_kinds_;
  bool kernel_on_ = false, memcpy_on_ = false, um_tried_ = false, um_on_ = false;
  bool markers_on_ = false;
  WindowLedger::Snapshot base_;  // calls counted before this session started
  std::uint64_t dropped_ = 0;
};

}  // namespace memstrat
