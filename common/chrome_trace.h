// chrome_trace.h: ChromeTrace, a small writer for the Chrome trace-event JSON format (opens in
// Perfetto and chrome://tracing), validate_trace_events() that checks a parsed file against that
// format, and trace_overlap_us() that measures how long two categories of events overlap
// (copy/compute overlap of double-buffer).
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

/// Checks a parsed trace against the trace-event format: the container (object with a
/// "traceEvents" array, or a bare array), and per event: "ph" is a known phase; "name" is a
/// string; "pid"/"tid" are integers; "ts" is a finite number (all phases but "M"); "dur" is a
/// finite number >= 0 for "X"; "args" is an object; "M" events name a known metadata kind and
/// carry its argument; "C" events carry numeric args; "B"/"E" balance per track; and "X"
/// slices on one track nest or are disjoint (Perfetto drops slices that partially overlap).
/// Returns one message per problem (at most 50, then a count); empty means valid.
std::vector<std::string> validate_trace_events(const nlohmann::json& trace);

/// Microseconds during which some "X" event whose "cat" is `cat_a` and some "X" event whose
/// "cat" is `cat_b` run at the same time (on any tracks). E.g. ("memcpy", "kernel") is the
/// copy/compute overlap. Returns 0 when there is none.
double trace_overlap_us(const nlohmann::json& trace, std::string_view cat_a,
                        std::string_view cat_b);

}  // namespace memstrat
