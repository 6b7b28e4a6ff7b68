#include "common/profiler/table.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <vector>

#include "common/profiler/api_names.h"

namespace memstrat {

namespace {

// printf into `out`, one cell or line at a time (512 bytes at most per call).
__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  out += buf;
}

// The allocation functions get a row even when never called: their 0 in every epoch is the point.
bool always_listed(const std::string& fn) {
  return fn == "cudaMalloc" || fn == "cudaMallocHost" || fn == "cudaHostAlloc" ||
         fn == "cudaMallocManaged";
}

// Watched functions that were called, the allocation functions always, and any other function
// called inside an epoch.
std::vector<std::string> api_rows(const WindowLedger::History& hist, const ApiCounts& totals) {
  std::vector<std::string> rows;
  for (const std::string& fn : watched_api_names())
    if (totals.count(fn) > 0 || always_listed(fn)) rows.push_back(fn);
  for (const auto& [wname, wc] : hist) {
    if (wname == "setup") continue;
    for (const auto& [fn, n] : wc.api.calls)
      if (n > 0 && std::find(rows.begin(), rows.end(), fn) == rows.end()) rows.push_back(fn);
  }
  return rows;
}

struct Layout {
  int name_w;              // first column
  std::vector<int> col_w;  // one per window, then outside, then total
};

Layout api_layout(const WindowLedger::History& hist, const std::vector<std::string>& rows) {
  std::size_t name_w = 24;
  for (const auto& r : rows) name_w = std::max(name_w, r.size() + 2);
  std::vector<std::string> cols;
  for (const auto& [wname, wc] : hist) {
    (void)wc;
    cols.push_back(wname);
  }
  cols.push_back("outside");
  cols.push_back("total");
  Layout l{static_cast<int>(name_w), {}};
  for (const auto& c : cols)
    l.col_w.push_back(static_cast<int>(std::max<std::size_t>(9, c.size() + 2)));
  return l;
}

void append_header(std::string& out, const WindowLedger::History& hist, const Layout& l) {
  appendf(out, "  %-*s", l.name_w, "function");
  for (std::size_t i = 0; i < hist.size(); ++i)
    appendf(out, "%*s", l.col_w[i], hist[i].first.c_str());
  appendf(out, "%*s", l.col_w[hist.size()], "outside");
  appendf(out, "%*s", l.col_w[hist.size() + 1], "total");
  out += "\n";
}

// One row: a count per window, then outside (= total - all windows) and total.
void append_counts(std::string& out, const char* label, const std::vector<std::uint64_t>& in_window,
                   std::uint64_t total, const Layout& l) {
  appendf(out, "  %-*s", l.name_w, label);
  std::uint64_t in_windows = 0;
  for (std::size_t i = 0; i < in_window.size(); ++i) {
    in_windows += in_window[i];
    appendf(out, "%*" PRIu64, l.col_w[i], in_window[i]);
  }
  const std::size_t k = in_window.size();
  appendf(out, "%*" PRIu64 "%*" PRIu64, l.col_w[k], total >= in_windows ? total - in_windows : 0,
          l.col_w[k + 1], total);
  out += "\n";
}

std::string api_calls_table(const WindowLedger::History& hist, const ApiCounts& totals) {
  const std::vector<std::string> rows = api_rows(hist, totals);
  const Layout l = api_layout(hist, rows);
  std::string out;
  append_header(out, hist, l);
  std::vector<std::uint64_t> in_window(hist.size());
  for (const auto& fn : rows) {
    for (std::size_t i = 0; i < hist.size(); ++i) in_window[i] = hist[i].second.api.count(fn);
    append_counts(out, fn.c_str(), in_window, totals.count(fn), l);
  }
  // Watched names carry explicit zeros; total() counts calls, so zeros add nothing.
  for (std::size_t i = 0; i < hist.size(); ++i) in_window[i] = hist[i].second.api.total();
  append_counts(out, "(all functions)", in_window, totals.total(), l);
  return out;
}

std::string activity_table(const WindowLedger::History& hist) {
  auto u64 = [](const std::optional<std::uint64_t>& v) {
    return v ? std::to_string(*v) : std::string("n/a");
  };
  auto mb = [](const std::optional<std::uint64_t>& v) {
    if (!v) return std::string("n/a");
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", static_cast<double>(*v) / 1e6);
    return std::string(b);
  };
  auto ms = [](const std::optional<double>& v) {
    if (!v) return std::string("n/a");
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", *v);
    return std::string(b);
  };
  const char* const row = "  %-14s%14s%14s%12s%12s%12s%12s\n";
  std::string out;
  appendf(out, row, "window", "UM HtoD MB", "UM DtoH MB", "GPU faults", "CPU faults", "kernel ms",
          "memcpy ms");
  for (const auto& [wname, wc] : hist)
    appendf(out, row, wname.c_str(), mb(wc.um_htod_bytes).c_str(), mb(wc.um_dtoh_bytes).c_str(),
            u64(wc.um_gpu_faults).c_str(), u64(wc.um_cpu_faults).c_str(), ms(wc.kernel_ms).c_str(),
            ms(wc.memcpy_ms).c_str());
  return out;
}

}  // namespace

std::string profiler_table(const WindowLedger::History& windows, const ApiCounts* totals,
                           bool profiling_enabled) {
  std::string out = "CUDA API calls per window (CUPTI callback API; outside = between windows)\n";
  if (totals == nullptr) {
    out += "  n/a: ";
    out +=
        profiling_enabled ? "API counting unavailable (see notes)" : "profiling off (--no-profile)";
    out += "\n";
  } else {
    out += api_calls_table(windows, *totals);
  }
  out += "Unified memory and GPU activity per window (CUPTI activity API; n/a = not measured)\n";
  out += activity_table(windows);
  return out;
}

}  // namespace memstrat
