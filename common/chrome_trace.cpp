#include "common/chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

namespace memstrat {

namespace {

// Invalid UTF-8 (a stray byte in an NVTX message) must not make the whole trace unwritable.
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool finite(double x) { return std::isfinite(x); }

}  // namespace

std::uint32_t ChromeTrace::intern(std::string_view s) {
  auto it = string_index_.find(std::string(s));
  if (it != string_index_.end()) return it->second;
  auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.emplace_back(s);
  string_index_.emplace(strings_.back(), id);
  return id;
}

void ChromeTrace::add_complete(std::string_view name, std::string_view cat, int pid, int tid,
                               double ts_us, double dur_us, nlohmann::json args) {
  if (!finite(ts_us) || !finite(dur_us) || dur_us < 0) {
    ++rejected_;
    return;
  }
  events_.push_back(
      Event{'X', 0, intern(name), intern(cat), pid, tid, ts_us, dur_us, std::move(args)});
}

void ChromeTrace::add_instant(std::string_view name, std::string_view cat, int pid, int tid,
                              double ts_us, nlohmann::json args, char scope) {
  if (!finite(ts_us) || (scope != 't' && scope != 'p' && scope != 'g')) {
    ++rejected_;
    return;
  }
  events_.push_back(
      Event{'i', scope, intern(name), intern(cat), pid, tid, ts_us, 0.0, std::move(args)});
}

void ChromeTrace::add_counter(std::string_view name, int pid, double ts_us, nlohmann::json values) {
  bool ok = finite(ts_us) && values.is_object() && !values.empty();
  if (ok) {
    for (const auto& [k, v] : values.items()) {
      (void)k;
      if (!v.is_number() || !finite(v.get<double>())) ok = false;
    }
  }
  if (!ok) {
    ++rejected_;
    return;
  }
  events_.push_back(Event{'C', 0, intern(name), 0, pid, 0, ts_us, 0.0, std::move(values)});
}

void ChromeTrace::add_metadata(std::string_view what, int pid, int tid, nlohmann::json args) {
  events_.push_back(Event{'M', 0, intern(what), 0, pid, tid, 0.0, 0.0, std::move(args)});
}

void ChromeTrace::set_process_name(int pid, std::string_view name) {
  add_metadata("process_name", pid, 0, {{"name", std::string(name)}});
}
void ChromeTrace::set_thread_name(int pid, int tid, std::string_view name) {
  add_metadata("thread_name", pid, tid, {{"name", std::string(name)}});
}
void ChromeTrace::set_process_sort_index(int pid, int index) {
  add_metadata("process_sort_index", pid, 0, {{"sort_index", index}});
}
void ChromeTrace::set_thread_sort_index(int pid, int tid, int index) {
  add_metadata("thread_sort_index", pid, tid, {{"sort_index", index}});
}

nlohmann::json ChromeTrace::event_json(const Event& e) const {
  nlohmann::json j;
  j["ph"] = std::string(1, e.ph);
  j["name"] = strings_[e.name];
  j["pid"] = e.pid;
  j["tid"] = e.tid;
  if (e.ph != 'M') j["ts"] = e.ts;
  if (e.ph == 'X') j["dur"] = e.dur;
  if (e.ph == 'i') j["s"] = std::string(1, e.scope);
  if (e.cat != 0) j["cat"] = strings_[e.cat];
  if (!e.args.is_null()) j["args"] = e.args;
  return j;
}

nlohmann::json ChromeTrace::to_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : events_) events.push_back(event_json(e));
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other_}};
}

void ChromeTrace::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw std::runtime_error("cannot write trace file '" + path + "': " + std::strerror(errno));
  f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << dump(other_) << ",\"traceEvents\":[\n";
  // Metadata first so that viewers name tracks before they see their events.
  bool first = true;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Event& e : events_) {
      if ((e.ph == 'M') != (pass == 0)) continue;
      if (!first) f << ",\n";
      first = false;
      f << dump(event_json(e));
    }
  }
  f << "\n]}\n";
  f.flush();
  if (!f) throw std::runtime_error("error while writing trace file '" + path + "'");
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

namespace {

bool is_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    double d = v.get<double>();
    return finite(d) && std::floor(d) == d;
  }
  return false;
}

bool is_finite_number(const nlohmann::json& v) { return v.is_number() && finite(v.get<double>()); }

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

}  // namespace

std::vector<std::string> validate_trace_events(const nlohmann::json& trace) {
  Problems p;
  const nlohmann::json* events = nullptr;
  if (trace.is_array()) {
    events = &trace;
  } else if (trace.is_object()) {
    auto it = trace.find("traceEvents");
    if (it == trace.end() || !it->is_array()) {
      p.add("top level: object without a \"traceEvents\" array");
      return p.take();
    }
    events = &*it;
    auto unit = trace.find("displayTimeUnit");
    if (unit != trace.end() && !(unit->is_string() && (*unit == "ms" || *unit == "ns")))
      p.add("top level: displayTimeUnit must be \"ms\" or \"ns\"");
  } else {
    p.add("top level: neither an object nor an array");
    return p.take();
  }

  static const std::set<std::string> kPhases = {"B", "E", "X", "i", "I", "C", "b",
                                                "n", "e", "s", "t", "f", "P", "N",
                                                "O", "D", "M", "R", "c", "(", ")"};
  static const std::set<std::string> kMeta = {
      "process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"};
  using Track = std::pair<std::int64_t, std::int64_t>;
  std::map<Track, std::vector<std::pair<double, double>>> slices;  // X: (ts, end)
  std::map<Track, int> open_b;                                     // B/E balance

  std::size_t index = 0;
  for (const auto& ev : *events) {
    const std::string at = "event " + std::to_string(index++) + ": ";
    if (!ev.is_object()) {
      p.add(at + "not an object");
      continue;
    }
    auto ph_it = ev.find("ph");
    if (ph_it == ev.end() || !ph_it->is_string()) {
      p.add(at + "missing string \"ph\"");
      continue;
    }
    const std::string ph = ph_it->get<std::string>();
    if (!kPhases.count(ph)) {
      p.add(at + "unknown phase \"" + ph + "\"");
      continue;
    }
    auto name_it = ev.find("name");
    bool has_name = name_it != ev.end() && name_it->is_string();
    if (!has_name && ph != "E") p.add(at + "missing string \"name\" (ph " + ph + ")");
    auto pid_it = ev.find("pid");
    if (pid_it == ev.end() || !is_integer(*pid_it)) p.add(at + "missing integer \"pid\"");
    bool thread_meta = ph == "M" && has_name && name_it->get<std::string>().rfind("thread", 0) == 0;
    bool needs_tid = ph != "M" || thread_meta;
    auto tid_it = ev.find("tid");
    if (needs_tid && ph != "C" && (tid_it == ev.end() || !is_integer(*tid_it)))
      p.add(at + "missing integer \"tid\"");
    if (tid_it != ev.end() && !is_integer(*tid_it)) p.add(at + "\"tid\" is not an integer");
    auto ts_it = ev.find("ts");
    bool ts_ok = ts_it != ev.end() && is_finite_number(*ts_it);
    if (ph != "M" && !ts_ok) p.add(at + "missing finite number \"ts\"");
    auto args_it = ev.find("args");
    if (args_it != ev.end() && !args_it->is_object()) p.add(at + "\"args\" is not an object");
    auto cat_it = ev.find("cat");
    if (cat_it != ev.end() && !cat_it->is_string()) p.add(at + "\"cat\" is not a string");

    if (ph == "X") {
      auto dur_it = ev.find("dur");
      if (dur_it == ev.end() || !is_finite_number(*dur_it) || dur_it->get<double>() < 0) {
        p.add(at + "\"X\" event without a finite \"dur\" >= 0");
      } else if (ts_ok && pid_it != ev.end() && is_integer(*pid_it) && tid_it != ev.end() &&
                 is_integer(*tid_it)) {
        double ts = ts_it->get<double>();
        slices[{pid_it->get<std::int64_t>(), tid_it->get<std::int64_t>()}].emplace_back(
            ts, ts + dur_it->get<double>());
      }
    } else if (ph == "i" || ph == "I") {
      auto s_it = ev.find("s");
      if (s_it != ev.end() &&
          !(s_it->is_string() && (*s_it == "t" || *s_it == "p" || *s_it == "g")))
        p.add(at + "instant scope \"s\" must be \"t\", \"p\" or \"g\"");
    } else if (ph == "C") {
      if (args_it == ev.end() || !args_it->is_object() || args_it->empty()) {
        p.add(at + "\"C\" event without numeric \"args\"");
      } else {
        for (const auto& [k, v] : args_it->items())
          if (!is_finite_number(v)) p.add(at + "counter series \"" + k + "\" is not a number");
      }
    } else if (ph == "M") {
      if (has_name && !kMeta.count(name_it->get<std::string>())) {
        p.add(at + "unknown metadata name \"" + name_it->get<std::string>() + "\"");
      } else if (has_name) {
        const std::string m = name_it->get<std::string>();
        const char* key = m == "process_labels"                       ? "labels"
                          : m.find("sort_index") != std::string::npos ? "sort_index"
                                                                      : "name";
        if (args_it == ev.end() || !args_it->is_object() || !args_it->contains(key)) {
          p.add(at + "metadata \"" + m + "\" without args." + key);
        } else if (std::string(key) == "sort_index" && !is_integer((*args_it)[key])) {
          p.add(at + "metadata \"" + m + "\": sort_index is not an integer");
        } else if (std::string(key) == "name" && !(*args_it)[key].is_string()) {
          p.add(at + "metadata \"" + m + "\": args.name is not a string");
        }
      }
    } else if ((ph == "B" || ph == "E") && pid_it != ev.end() && is_integer(*pid_it) &&
               tid_it != ev.end() && is_integer(*tid_it)) {
      int& depth = open_b[{pid_it->get<std::int64_t>(), tid_it->get<std::int64_t>()}];
      if (ph == "B") {
        ++depth;
      } else if (--depth < 0) {
        p.add(at + "\"E\" without a matching \"B\" on its track");
        depth = 0;
      }
    }
  }

  for (const auto& [track, depth] : open_b)
    if (depth > 0)
      p.add("track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) +
            ": " + std::to_string(depth) + " \"B\" event(s) never ended");

  // Slices on one track must nest or be disjoint. Sorted by start, longest first, so a parent
  // comes before its children.
  constexpr double kEps = 1e-3;  // 1 ns of rounding
  for (auto& [track, v] : slices) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open;  // end times of enclosing slices
    std::size_t bad = 0;
    for (const auto& [ts, end] : v) {
      while (!open.empty() && open.back() <= ts + kEps) open.pop_back();
      if (!open.empty() && end > open.back() + kEps) {
        if (bad++ == 0)
          p.add("track pid " + std::to_string(track.first) + " tid " +
                std::to_string(track.second) + ": slice at ts " + std::to_string(ts) +
                " partially overlaps an enclosing slice ending at " + std::to_string(open.back()));
        continue;
      }
      open.push_back(end);
    }
    if (bad > 1)
      p.add("track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) +
            ": " + std::to_string(bad) + " partially overlapping slices in total");
  }
  return p.take();
}

// ---------------------------------------------------------------------------------------------
// Overlap
// ---------------------------------------------------------------------------------------------

namespace {

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

double trace_overlap_us(const nlohmann::json& trace, std::string_view cat_a,
                        std::string_view cat_b) {
  const nlohmann::json* events = trace.is_array() ? &trace : nullptr;
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
