// profiler.cpp: CuptiProfiler, the facade over the window ledger, the activity records and the
// CUPTI session. Activity records arrive in buffers on CUPTI's threads; each is attributed by
// its start timestamp to the window that contains it (WindowLedger).
#include "common/profiler/profiler.h"

#include <chrono>
#include <thread>
#include <utility>

#include "common/profiler/activity.h"
#include "common/profiler/api_callback.h"
#include "common/profiler/chrome_trace.h"
#include "common/profiler/cupti_session.h"
#include "common/profiler/notes.h"
#include "common/profiler/table.h"
#include "common/profiler/trace_export.h"
#include "common/profiler/window_ledger.h"

namespace memstrat {

// Declaration order is teardown order reversed: the session goes first (it flushes into the
// records and notes, and stops CUPTI before they go).
struct CuptiProfiler::Impl {
  explicit Impl(Options o)
      : opt(std::move(o)),
        records(ledger, !opt.trace_path.empty()),
        session(opt, ledger, records, notes) {}

  Options opt;
  WindowLedger ledger;
  ProfilerNotes notes;
  ActivityRecords records;
  CuptiSession session;
};

CuptiProfiler::CuptiProfiler(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {
  if (!impl_->opt.enabled) {
    impl_->notes.add("profiling off (--no-profile): API counts and activity counters are null");
    return;
  }
  impl_->session.start();
}

CuptiProfiler::~CuptiProfiler() = default;

void CuptiProfiler::enable_device_counters() { impl_->session.enable_device_counters(); }

void CuptiProfiler::begin_window(std::string name) {
  Impl& s = *impl_;
  s.ledger.begin_window(std::move(name), s.session.now(), s.session.snapshot());
  if (s.session.um_pending())
    s.notes.add(
        "unified-memory counters were not enabled when a window began (call "
        "enable_device_counters() after cudaFree(0)): null in such windows");
}

WindowCounters CuptiProfiler::end_window() {
  Impl& s = *impl_;
  s.ledger.close_window(s.session.now(), s.session.snapshot());
  s.session.flush();
  if (s.session.um_on()) {
    // Unified-memory records come from the driver's fault and migration queue; give the ones
    // of the last kernels a moment to arrive, then flush again.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s.session.flush();
  }
  std::uint64_t late = s.ledger.late_records();
  if (late > 0)
    s.notes.add("some activity records arrived after their window was reported (" +
                std::to_string(late) + " so far): those windows' activity counters are low");
  return s.ledger.report();
}

std::vector<std::string> CuptiProfiler::notes() const {
  std::vector<std::string> out = impl_->notes.list();
  std::uint64_t oor = api_calls_out_of_range();
  if (oor > 0)
    out.push_back(std::to_string(oor) +
                  " API calls had a callback id beyond the table (newer "
                  "CUPTI?): not in the counts");
  return out;
}

bool CuptiProfiler::api_available() const { return impl_->session.api_ok(); }

ApiCounts CuptiProfiler::api_totals() const {
  ApiCounts c;
  if (impl_->session.api_ok()) c.calls = impl_->session.snapshot();
  return c;
}

const CuptiProfiler::Options& CuptiProfiler::options() const { return impl_->opt; }

std::uint64_t CuptiProfiler::late_records() const { return impl_->ledger.late_records(); }

std::uint64_t CuptiProfiler::cupti_calls_made() { return CuptiSession::cupti_calls_made(); }

nlohmann::json CuptiProfiler::to_json(const WindowCounters& w) {
  auto opt = [](const auto& o) -> nlohmann::json {
    if (o) return nlohmann::json(*o);
    return nlohmann::json(nullptr);
  };
  nlohmann::json j;
  j["api_calls"] = w.api_available ? nlohmann::json(w.api.calls) : nlohmann::json(nullptr);
  j["um_htod_bytes"] = opt(w.um_htod_bytes);
  j["um_dtoh_bytes"] = opt(w.um_dtoh_bytes);
  j["um_gpu_faults"] = opt(w.um_gpu_faults);
  j["um_cpu_faults"] = opt(w.um_cpu_faults);
  j["kernel_ms"] = opt(w.kernel_ms);
  j["memcpy_ms"] = opt(w.memcpy_ms);
  return j;
}

std::string CuptiProfiler::table() const {
  const Impl& s = *impl_;
  const WindowLedger::History hist = s.ledger.history();
  if (!s.session.api_ok()) return profiler_table(hist, nullptr, s.opt.enabled);
  const ApiCounts totals = api_totals();
  return profiler_table(hist, &totals, s.opt.enabled);
}

void CuptiProfiler::write_trace() {
  Impl& s = *impl_;
  if (s.opt.trace_path.empty()) return;
  ChromeTrace tr;
  nlohmann::json other = nlohmann::json::object();
  if (s.session.subscribed()) {
    s.session.flush();
    const WindowLedger::Spans windows = s.ledger.spans();
    const std::uint64_t now_ns = s.session.now();
    s.records.with_records([&](TraceRecords& rec) {
      other = export_trace(tr, rec, windows, now_ns, s.session.cupti_dropped());
      if (s.session.markers_on() && rec.marker_records == 0)
        s.notes.add(
            "no NVTX ranges reached CUPTI: NVTX was initialised before the profiler, or "
            "NVTX_INJECTION64_PATH names another tool (the trace has no NVTX tracks)");
      if (rec.dropped > 0)
        s.notes.add("trace kept the first " + std::to_string(kMaxTraceRecords) + " records; " +
                    std::to_string(rec.dropped) + " later ones are not in the trace");
    });
  } else {
    tr.set_process_name(1, "host: memstrat");
    other["generator"] = "memstrat CuptiProfiler";
  }
  other["notes"] = notes();
  tr.set_other_data(nlohmann::json{{"memstrat", std::move(other)}});
  tr.write(s.opt.trace_path);
}

}  // namespace memstrat
