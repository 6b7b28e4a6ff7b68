#include "tests/support/trace_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace memstrat {

namespace {

using nlohmann::json;
using Track = std::pair<std::int64_t, std::int64_t>;  // (pid, tid)

bool is_integer(const json& v) {
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

bool is_finite_number(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

class Problems {
 public:
  void add(std::string msg) {
    if (list_.size() < kMax)
      list_.push_back(std::move(msg));
    else
      ++more_;
  }
  std::vector<std::string> take() {
    if (more_ > 0) list_.push_back("... and " + std::to_string(more_) + " more problems");
    return std::move(list_);
  }

 private:
  static constexpr std::size_t kMax = 50;
  std::vector<std::string> list_;
  std::size_t more_ = 0;
};

// What the per-track checks need after every event has been seen.
struct Tracks {
  std::map<Track, std::vector<std::pair<double, double>>> slices;  // X: (ts, end)
  std::map<Track, int> open_b;                                     // B/E balance
};

// One event's fields (nullptr when absent) and the prefix of its messages.
struct Event {
  std::string at, ph;
  const json* name = nullptr;
  const json* pid = nullptr;
  const json* tid = nullptr;
  const json* ts = nullptr;
  const json* args = nullptr;
  const json* cat = nullptr;

  bool has_name() const { return name != nullptr && name->is_string(); }
  bool ts_ok() const { return ts != nullptr && is_finite_number(*ts); }
  bool on_track() const {
    return pid != nullptr && is_integer(*pid) && tid != nullptr && is_integer(*tid);
  }
  Track track() const { return {pid->get<std::int64_t>(), tid->get<std::int64_t>()}; }
};

const json* field(const json& ev, const char* key) {
  auto it = ev.find(key);
  return it == ev.end() ? nullptr : &*it;
}

// The event array of an object with "traceEvents" or of a bare array; nullptr (and a problem)
// when there is none.
const json* event_array(const json& trace, Problems& p) {
  if (trace.is_array()) return &trace;
  if (!trace.is_object()) {
    p.add("top level: neither an object nor an array");
    return nullptr;
  }
  const json* events = field(trace, "traceEvents");
  if (events == nullptr || !events->is_array()) {
    p.add("top level: object without a \"traceEvents\" array");
    return nullptr;
  }
  const json* unit = field(trace, "displayTimeUnit");
  if (unit != nullptr && !(unit->is_string() && (*unit == "ms" || *unit == "ns")))
    p.add("top level: displayTimeUnit must be \"ms\" or \"ns\"");
  return events;
}

// The fields every phase shares: name, pid, tid, ts, args, cat.
void check_common_fields(const Event& e, Problems& p) {
  if (!e.has_name() && e.ph != "E") p.add(e.at + "missing string \"name\" (ph " + e.ph + ")");
  if (e.pid == nullptr || !is_integer(*e.pid)) p.add(e.at + "missing integer \"pid\"");
  // Metadata about a process has no thread; about a thread it has one.
  const bool thread_meta =
      e.ph == "M" && e.has_name() && e.name->get<std::string>().rfind("thread", 0) == 0;
  const bool needs_tid = e.ph != "M" || thread_meta;
  if (needs_tid && e.ph != "C" && (e.tid == nullptr || !is_integer(*e.tid)))
    p.add(e.at + "missing integer \"tid\"");
  if (e.tid != nullptr && !is_integer(*e.tid)) p.add(e.at + "\"tid\" is not an integer");
  if (e.ph != "M" && !e.ts_ok()) p.add(e.at + "missing finite number \"ts\"");
  if (e.args != nullptr && !e.args->is_object()) p.add(e.at + "\"args\" is not an object");
  if (e.cat != nullptr && !e.cat->is_string()) p.add(e.at + "\"cat\" is not a string");
}

void check_complete(const Event& e, const json& ev, Problems& p, Tracks& tracks) {
  const json* dur = field(ev, "dur");
  if (dur == nullptr || !is_finite_number(*dur) || dur->get<double>() < 0) {
    p.add(e.at + "\"X\" event without a finite \"dur\" >= 0");
  } else if (e.ts_ok() && e.on_track()) {
    double ts = e.ts->get<double>();
    tracks.slices[e.track()].emplace_back(ts, ts + dur->get<double>());
  }
}

void check_instant(const Event& e, const json& ev, Problems& p) {
  const json* s = field(ev, "s");
  if (s != nullptr && !(s->is_string() && (*s == "t" || *s == "p" || *s == "g")))
    p.add(e.at + "instant scope \"s\" must be \"t\", \"p\" or \"g\"");
}

void check_counter(const Event& e, Problems& p) {
  if (e.args == nullptr || !e.args->is_object() || e.args->empty()) {
    p.add(e.at + "\"C\" event without numeric \"args\"");
    return;
  }
  for (const auto& [k, v] : e.args->items())
    if (!is_finite_number(v)) p.add(e.at + "counter series \"" + k + "\" is not a number");
}

void check_metadata(const Event& e, Problems& p) {
  static const std::set<std::string> kMeta = {
      "process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"};
  if (!e.has_name()) return;
  const std::string m = e.name->get<std::string>();
  if (!kMeta.count(m)) {
    p.add(e.at + "unknown metadata name \"" + m + "\"");
    return;
  }
  const std::string key = m == "process_labels"                       ? "labels"
                          : m.find("sort_index") != std::string::npos ? "sort_index"
                                                                      : "name";
  if (e.args == nullptr || !e.args->is_object() || !e.args->contains(key))
    p.add(e.at + "metadata \"" + m + "\" without args." + key);
  else if (key == "sort_index" && !is_integer((*e.args)[key]))
    p.add(e.at + "metadata \"" + m + "\": sort_index is not an integer");
  else if (key == "name" && !(*e.args)[key].is_string())
    p.add(e.at + "metadata \"" + m + "\": args.name is not a string");
}

void count_begin_end(const Event& e, Problems& p, Tracks& tracks) {
  int& depth = tracks.open_b[e.track()];
  if (e.ph == "B") {
    ++depth;
  } else if (--depth < 0) {
    p.add(e.at + "\"E\" without a matching \"B\" on its track");
    depth = 0;
  }
}

void check_event(const json& ev, std::size_t index, Problems& p, Tracks& tracks) {
  static const std::set<std::string> kPhases = {"B", "E", "X", "i", "I", "C", "b",
                                                "n", "e", "s", "t", "f", "P", "N",
                                                "O", "D", "M", "R", "c", "(", ")"};
  Event e;
  e.at = "event " + std::to_string(index) + ": ";
  if (!ev.is_object()) {
    p.add(e.at + "not an object");
    return;
  }
  const json* ph = field(ev, "ph");
  if (ph == nullptr || !ph->is_string()) {
    p.add(e.at + "missing string \"ph\"");
    return;
  }
  e.ph = ph->get<std::string>();
  if (!kPhases.count(e.ph)) {
    p.add(e.at + "unknown phase \"" + e.ph + "\"");
    return;
  }
  e.name = field(ev, "name");
  e.pid = field(ev, "pid");
  e.tid = field(ev, "tid");
  e.ts = field(ev, "ts");
  e.args = field(ev, "args");
  e.cat = field(ev, "cat");
  check_common_fields(e, p);
  if (e.ph == "X")
    check_complete(e, ev, p, tracks);
  else if (e.ph == "i" || e.ph == "I")
    check_instant(e, ev, p);
  else if (e.ph == "C")
    check_counter(e, p);
  else if (e.ph == "M")
    check_metadata(e, p);
  else if ((e.ph == "B" || e.ph == "E") && e.on_track())
    count_begin_end(e, p, tracks);
}

void check_balanced(const Tracks& tracks, Problems& p) {
  for (const auto& [track, depth] : tracks.open_b)
    if (depth > 0)
      p.add("track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) +
            ": " + std::to_string(depth) + " \"B\" event(s) never ended");
}

// Slices on one track must nest or be disjoint. Sorted by start, longest first, so a parent
// comes before its children.
void check_nesting(Tracks& tracks, Problems& p) {
  constexpr double kEps = 1e-3;  // 1 ns of rounding
  for (auto& [track, v] : tracks.slices) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    const std::string where =
        "track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second);
    std::vector<double> open;  // end times of enclosing slices
    std::size_t bad = 0;
    for (const auto& [ts, end] : v) {
      while (!open.empty() && open.back() <= ts + kEps) open.pop_back();
      if (!open.empty() && end > open.back() + kEps) {
        if (bad++ == 0)
          p.add(where + ": slice at ts " + std::to_string(ts) +
                " partially overlaps an enclosing slice ending at " + std::to_string(open.back()));
        continue;
      }
      open.push_back(end);
    }
    if (bad > 1)
      p.add(where + ": " + std::to_string(bad) + " partially overlapping slices in total");
  }
}

using Intervals = std::vector<std::pair<double, double>>;

Intervals union_of(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

}  // namespace

std::vector<std::string> validate_trace_events(const json& trace) {
  Problems p;
  const json* events = event_array(trace, p);
  if (events == nullptr) return p.take();
  Tracks tracks;
  std::size_t index = 0;
  for (const auto& ev : *events) check_event(ev, index++, p, tracks);
  check_balanced(tracks, p);
  check_nesting(tracks, p);
  return p.take();
}

double trace_overlap_us(const json& trace, std::string_view cat_a, std::string_view cat_b) {
  const json* events = trace.is_array() ? &trace : nullptr;
  if (trace.is_object() && trace.contains("traceEvents")) events = &trace["traceEvents"];
  if (events == nullptr || !events->is_array()) return 0.0;
  Intervals a, b;
  for (const auto& ev : *events) {
    if (!ev.is_object() || ev.value("ph", "") != "X") continue;
    auto cat = ev.find("cat");
    if (cat == ev.end() || !cat->is_string()) continue;
    auto ts = ev.find("ts");
    auto dur = ev.find("dur");
    if (ts == ev.end() || dur == ev.end() || !is_finite_number(*ts) || !is_finite_number(*dur))
      continue;
    std::pair<double, double> iv{ts->get<double>(), ts->get<double>() + dur->get<double>()};
    const std::string& c = cat->get_ref<const std::string&>();
    if (c == cat_a) a.push_back(iv);
    if (c == cat_b) b.push_back(iv);
  }
  Intervals ua = union_of(std::move(a)), ub = union_of(std::move(b));
  double total = 0.0;
  std::size_t i = 0, j = 0;
  while (i < ua.size() && j < ub.size()) {
    double lo = std::max(ua[i].first, ub[j].first);
    double hi = std::min(ua[i].second, ub[j].second);
    if (hi > lo) total += hi - lo;
    if (ua[i].second < ub[j].second)
      ++i;
    else
      ++j;
  }
  return total;
}

}  // namespace memstrat
