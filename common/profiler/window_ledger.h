// window_ledger.h: WindowLedger, the CPU-only bookkeeping of the built-in profiler: windows
// (set-up, epochs), API calls as differences of snapshots, activity records attributed to
// windows by timestamp, and the null-means-not-measured rule. No CUDA or CUPTI inside, so it is
// tested without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/profiler/counters.h"

namespace memstrat {

/// Windows and what belongs to them; no CUDA or CUPTI inside. Thread-safe (activity records
/// arrive from CUPTI's threads). Timestamps are ns on one clock (CUPTI's when profiling).
class WindowLedger {
 public:
  using Snapshot = std::map<std::string, std::uint64_t>;  // cumulative API calls by name
  using History = std::vector<std::pair<std::string, WindowCounters>>;
  using Spans = std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>>;
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
  History history() const;
  /// Activity sums of records outside every window (API outside = totals - windows).
  std::array<std::uint64_t, static_cast<int>(ActivityCounter::Count)> outside_sums() const;
  /// [begin, end) of every window (end == kOpen while open), for the trace.
  Spans spans() const;

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

}  // namespace memstrat
