#include "common/profiler/chrome_trace.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
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

}  // namespace memstrat
