// chrome_trace.h: ChromeTrace, a small writer for the Chrome trace-event JSON format (opens in
// Perfetto and chrome://tracing). The checks tests run on written files are in
// tests/support/trace_checks.h.
//
// Format reference: "Trace Event Format" (Google, the document linked from chrome://tracing).
// Timestamps and durations are microseconds (doubles). The file is
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memstrat {

/// Collects trace events in memory and writes them as one JSON file. Not thread-safe: the
/// profiler fills it from one thread when it writes the trace.
class ChromeTrace {
 public:
  /// "X" event: a slice [ts_us, ts_us + dur_us] on track (pid, tid).
  void add_complete(std::string_view name, std::string_view cat, int pid, int tid, double ts_us,
                    double dur_us, nlohmann::json args = nullptr);
  /// "i" event: a point in time. scope: 't' thread, 'p' process, 'g' global.
  void add_instant(std::string_view name, std::string_view cat, int pid, int tid, double ts_us,
                   nlohmann::json args = nullptr, char scope = 't');
  /// "C" event: counter track `name` in process pid; values is {"series": number, ...}.
  void add_counter(std::string_view name, int pid, double ts_us, nlohmann::json values);
  /// "M" metadata events naming and ordering processes and threads (tracks).
  void set_process_name(int pid, std::string_view name);
  void set_thread_name(int pid, int tid, std::string_view name);
  void set_process_sort_index(int pid, int index);
  void set_thread_sort_index(int pid, int tid, int index);
  /// Free-form metadata written under "otherData" (notes, versions, config).
  void set_other_data(nlohmann::json data) { other_ = std::move(data); }

  /// Events accepted so far (metadata included).
  std::size_t size() const { return events_.size(); }
  /// Events refused because a timestamp or duration was not finite (or negative duration).
  std::size_t rejected() const { return rejected_; }

  /// The whole file as one JSON value (tests; small traces).
  nlohmann::json to_json() const;
  /// Streams the file to `path` (large traces never exist as one JSON value in memory).
  /// Throws std::runtime_error when the file cannot be written.
  void write(const std::string& path) const;

 private:
  struct Event {
    char ph;
    char scope;          // 'i' events only
    std::uint32_t name;  // index into strings_
    std::uint32_t cat;   // index into strings_ (0 = none)
    int pid;
    int tid;
    double ts;
    double dur;
    nlohmann::json args;  // null when absent
  };
  std::uint32_t intern(std::string_view s);
  nlohmann::json event_json(const Event& e) const;
  void add_metadata(std::string_view what, int pid, int tid, nlohmann::json args);

  std::vector<Event> events_;
  std::vector<std::string> strings_{""};
  std::unordered_map<std::string, std::uint32_t> string_index_{{"", 0}};
  nlohmann::json other_ = nlohmann::json::object();
  std::size_t rejected_ = 0;
};

}  // namespace memstrat
