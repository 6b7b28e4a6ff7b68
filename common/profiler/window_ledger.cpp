#include "common/profiler/window_ledger.h"

#include <algorithm>
#include <stdexcept>

#include "common/profiler/api_names.h"

namespace memstrat {

void WindowLedger::set_api_available(bool available) {
  std::lock_guard<std::mutex> lk(mu_);
  api_available_ = available;
}

void WindowLedger::mark_available(ActivityCounter c, std::uint64_t since_ns) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& s = since_[static_cast<int>(c)];
  if (!s) s = since_ns;
}

void WindowLedger::begin_window(std::string name, std::uint64_t ts_ns, const Snapshot& api) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!windows_.empty() && windows_.back().end == kOpen)
    throw std::logic_error("profiler: begin_window(\"" + name + "\") while window \"" +
                           windows_.back().name + "\" is still open");
  if (!windows_.empty() && ts_ns < windows_.back().end) ts_ns = windows_.back().end;
  Window w;
  w.name = std::move(name);
  w.begin = ts_ns;
  w.api_begin = api;
  windows_.push_back(std::move(w));
}

void WindowLedger::close_window(std::uint64_t ts_ns, const Snapshot& api) {
  std::lock_guard<std::mutex> lk(mu_);
  if (windows_.empty() || windows_.back().end != kOpen)
    throw std::logic_error("profiler: end_window() without an open window");
  Window& w = windows_.back();
  w.end = std::max(ts_ns, w.begin);
  for (const auto& [name, n] : api) {
    auto it = w.api_begin.find(name);
    std::uint64_t before = it == w.api_begin.end() ? 0 : it->second;
    if (n > before) w.api.calls[name] = n - before;
  }
}

WindowCounters WindowLedger::report() {
  std::lock_guard<std::mutex> lk(mu_);
  Window* w = nullptr;
  for (auto it = windows_.rbegin(); it != windows_.rend(); ++it) {
    if (it->end != kOpen && !it->reported) {
      w = &*it;
      break;
    }
  }
  if (w == nullptr) throw std::logic_error("profiler: no closed window to report");
  WindowCounters r;
  r.api_available = api_available_;
  if (api_available_) {
    r.api = w->api;
    for (const std::string& name : watched_api_names()) r.api.calls.emplace(name, 0);
  }
  auto available = [&](ActivityCounter c) {
    const auto& s = since_[static_cast<int>(c)];
    return s.has_value() && *s <= w->begin;
  };
  auto sum = [&](ActivityCounter c) { return w->sums[static_cast<int>(c)]; };
  if (available(ActivityCounter::KernelTime))
    r.kernel_ms = static_cast<double>(sum(ActivityCounter::KernelTime)) / 1e6;
  if (available(ActivityCounter::MemcpyTime))
    r.memcpy_ms = static_cast<double>(sum(ActivityCounter::MemcpyTime)) / 1e6;
  if (available(ActivityCounter::UmHtoDBytes)) r.um_htod_bytes = sum(ActivityCounter::UmHtoDBytes);
  if (available(ActivityCounter::UmDtoHBytes)) r.um_dtoh_bytes = sum(ActivityCounter::UmDtoHBytes);
  if (available(ActivityCounter::UmGpuFaults)) r.um_gpu_faults = sum(ActivityCounter::UmGpuFaults);
  if (available(ActivityCounter::UmCpuFaults)) r.um_cpu_faults = sum(ActivityCounter::UmCpuFaults);
  w->reported = true;
  w->result = r;
  return r;
}

WindowLedger::Window* WindowLedger::find_locked(std::uint64_t ts_ns) {
  if (ts_ns == 0) {
    if (!windows_.empty() && windows_.back().end == kOpen) return &windows_.back();
    return nullptr;
  }
  auto it = std::upper_bound(windows_.begin(), windows_.end(), ts_ns,
                             [](std::uint64_t t, const Window& w) { return t < w.begin; });
  if (it == windows_.begin()) return nullptr;
  --it;
  return ts_ns < it->end ? &*it : nullptr;
}

bool WindowLedger::add(ActivityCounter c, std::uint64_t ts_ns, std::uint64_t value) {
  const int i = static_cast<int>(c);
  if (i < 0 || i >= kCounters) return true;
  std::lock_guard<std::mutex> lk(mu_);
  Window* w = find_locked(ts_ns);
  if (w == nullptr) {
    outside_[i] += value;
    return true;
  }
  if (w->reported) {
    ++late_;
    return false;
  }
  w->sums[i] += value;
  return true;
}

bool WindowLedger::window_open() const {
  std::lock_guard<std::mutex> lk(mu_);
  return !windows_.empty() && windows_.back().end == kOpen;
}

std::string WindowLedger::open_window_name() const {
  std::lock_guard<std::mutex> lk(mu_);
  return !windows_.empty() && windows_.back().end == kOpen ? windows_.back().name : "";
}

std::uint64_t WindowLedger::late_records() const {
  std::lock_guard<std::mutex> lk(mu_);
  return late_;
}

WindowLedger::History WindowLedger::history() const {
  std::lock_guard<std::mutex> lk(mu_);
  History out;
  for (const Window& w : windows_)
    if (w.reported) out.emplace_back(w.name, w.result);
  return out;
}

std::array<std::uint64_t, static_cast<int>(ActivityCounter::Count)> WindowLedger::outside_sums()
    const {
  std::lock_guard<std::mutex> lk(mu_);
  return outside_;
}

WindowLedger::Spans WindowLedger::spans() const {
  std::lock_guard<std::mutex> lk(mu_);
  Spans out;
  for (const Window& w : windows_) out.push_back({w.name, {w.begin, w.end}});
  return out;
}

}  // namespace memstrat
