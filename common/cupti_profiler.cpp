// cupti_profiler.cpp: CUPTI callback + activity API behind CuptiProfiler, WindowLedger.
//
// Counting: the runtime-API domain counts every runtime call on entry; the driver-API domain
// counts driver calls made directly by the application or a library (cuBLAS launches through
// cuLaunchKernelEx), not the ones the runtime makes inside a runtime call (a thread-local depth
// tells them apart). That is the set `nsys stats --report cuda_api_sum` lists. The hot path is
// one relaxed atomic increment per call into a table indexed by callback id; names are
// resolved when a window ends.
//
// Activity: kernel, memcpy (and memset, NVTX markers, names when tracing) records are enabled
// in the constructor; unified-memory counters in enable_device_counters() (they need a
// context). Records arrive in buffers on CUPTI's threads; each is attributed by its start
// timestamp to the window that contains it (WindowLedger).
#include "common/cupti_profiler.h"

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/chrome_trace.h"
#include "common/nvtx.h"

namespace memstrat {

// =============================================================================================
// Names
// =============================================================================================

std::string normalize_api_name(std::string_view s) {
  std::size_t pos = s.rfind("_v");
  if (pos == std::string_view::npos || pos == 0) return std::string(s);
  std::string_view digits = s.substr(pos + 2);
  if (digits.size() < 4) return std::string(s);
  for (char c : digits)
    if (c < '0' || c > '9') return std::string(s);
  return std::string(s.substr(0, pos));
}

const std::vector<std::string>& watched_api_names() {
  static const std::vector<std::string> names = {
      "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
      "cudaMallocManaged", "cudaMallocAsync", "cudaFreeAsync", "cudaMemcpy", "cudaMemcpyAsync",
      "cudaMemPrefetchAsync", "cudaMemAdvise", "cudaStreamSynchronize", "cudaDeviceSynchronize",
      "cudaLaunchKernel",
      // CUDA 13's <<<>>> launches through __cudaLaunchKernel (cudaLaunchKernel only for
      // explicit calls and code built with __NV_LEGACY_LAUNCH): both are kernel launches.
      "__cudaLaunchKernel", "cudaGraphLaunch"};
  return names;
}

std::uint64_t ApiCounts::count(std::string_view name) const {
  auto it = calls.find(std::string(name));
  return it == calls.end() ? 0 : it->second;
}

std::uint64_t ApiCounts::total() const {
  std::uint64_t t = 0;
  for (const auto& [name, n] : calls) {
    (void)name;
    t += n;
  }
  return t;
}

// =============================================================================================
// WindowLedger
// =============================================================================================

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

std::vector<std::pair<std::string, WindowCounters>> WindowLedger::history() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::pair<std::string, WindowCounters>> out;
  for (const Window& w : windows_)
    if (w.reported) out.emplace_back(w.name, w.result);
  return out;
}

std::array<std::uint64_t, static_cast<int>(ActivityCounter::Count)> WindowLedger::outside_sums()
    const {
  std::lock_guard<std::mutex> lk(mu_);
  return outside_;
}

std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>> WindowLedger::spans()
    const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>> out;
  for (const Window& w : windows_) out.push_back({w.name, {w.begin, w.end}});
  return out;
}

// =============================================================================================
// Global CUPTI state: one callback table for the process (CUPTI allows one subscriber)
// =============================================================================================

namespace {

std::atomic<std::uint64_t> g_cupti_calls{0};

// Every CUPTI function the profiler calls outside the CUPTI callbacks goes through this, so
// that a test can check that a disabled profiler calls none.
inline CUptiResult counted(CUptiResult r) {
  g_cupti_calls.fetch_add(1, std::memory_order_relaxed);
  return r;
}

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) s = "unknown CUPTI error";
  return std::string(s) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

// Runtime callback ids occupy [0, kDomainSlots), driver ids [kDomainSlots, 2 * kDomainSlots).
constexpr std::size_t kDomainSlots = 2048;
constexpr std::size_t kSlots = 2 * kDomainSlots;

enum class TraceInterest : std::uint8_t { Unknown = 0, No, Yes, Prefetch };

struct ApiTable {
  std::array<std::atomic<std::uint64_t>, kSlots> count;
  std::array<std::atomic<const char*>, kSlots> name;  // CUPTI's global constant strings
  std::array<std::atomic<std::uint8_t>, kSlots> interest;
  std::atomic<std::uint64_t> out_of_range{0};
  ApiTable() {
    for (auto& c : count) c.store(0, std::memory_order_relaxed);
    for (auto& n : name) n.store(nullptr, std::memory_order_relaxed);
    for (auto& i : interest) i.store(0, std::memory_order_relaxed);
  }
};

// Never destroyed: CUPTI may call back while static destructors run.
ApiTable& api_table() {
  static ApiTable* t = new ApiTable();
  return *t;
}

thread_local int t_runtime_depth = 0;
thread_local int t_driver_depth = 0;

std::uint32_t this_thread_id() {
  thread_local std::uint32_t id = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  return id;
}

// The API calls drawn in the trace: memory, copies, hints, synchronisation, graph launches.
// Kernel launches are left out (the kernels themselves are on the stream tracks).
TraceInterest classify_for_trace(CUpti_CallbackId cbid, const char* fn) {
  if (fn == nullptr) return TraceInterest::No;
  // Only these two have the parameter layout record_api_exit() reads (CUDA 12.2+ signature).
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemPrefetchAsync_v12020 ||
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemPrefetchAsync_ptsz_v12020)
    return TraceInterest::Prefetch;
  std::string n = normalize_api_name(fn);
  static const char* const prefixes[] = {"cudaMalloc",
                                         "cudaFree",
                                         "cudaHostAlloc",
                                         "cudaMemcpy",
                                         "cudaMemset",
                                         "cudaMemPrefetch",
                                         "cudaMemAdvise",
                                         "cudaStreamSynchronize",
                                         "cudaDeviceSynchronize",
                                         "cudaEventSynchronize",
                                         "cudaStreamWaitEvent",
                                         "cudaGraphLaunch"};
  for (const char* p : prefixes)
    if (n.rfind(p, 0) == 0) return TraceInterest::Yes;
  return TraceInterest::No;
}

std::string demangle(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

const char* memcpy_kind_name(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "unknown";
  }
}

const char* memory_kind_name(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "device-static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "managed-static";
    default:
      return "unknown";
  }
}

const char* migration_cause_name(std::uint32_t flags) {
  switch (flags) {
    // CUPTI: USER = "an explicit call from the user e.g. cudaMemPrefetchAsync";
    // PREFETCH = the driver's own speculative migration ahead of an access.
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER:
      return "prefetch";
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE:
      return "coherence (fault)";
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH:
      return "speculative (driver)";
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION:
      return "eviction";
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_ACCESS_COUNTERS:
      return "access counters";
    default:
      return "unknown";
  }
}

std::string hex_colour(std::uint32_t argb) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%06X", argb & 0xFFFFFFu);
  return buf;
}

std::string format_bytes_mb(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(b) / 1e6);
  return buf;
}

// Greedy interval partitioning: the lowest lane whose last slice ended by `start`. Keeps the
// slices of one track disjoint (the trace-event viewers drop partially overlapping slices).
class Lanes {
 public:
  std::size_t place(std::uint64_t start, std::uint64_t end) {
    for (std::size_t i = 0; i < ends_.size(); ++i) {
      if (ends_[i] <= start) {
        ends_[i] = end;
        return i;
      }
    }
    ends_.push_back(end);
    return ends_.size() - 1;
  }

 private:
  std::vector<std::uint64_t> ends_;
};

constexpr std::size_t kMaxTraceRecords = 4'000'000;

}  // namespace

// =============================================================================================
// Impl
// =============================================================================================

struct CuptiProfiler::Impl {
  // --- trace records (kept only when tracing) ---
  enum class OpKind : std::uint8_t { Kernel, Memcpy, Memset };
  struct GpuOp {
    std::uint64_t start, end, bytes;
    std::uint32_t device, stream, correlation, name;  // name: kernel name id
    OpKind kind;
    std::uint8_t copy_kind, src_kind, dst_kind, flags;
    std::int32_t grid[3], block[3];
  };
  struct UmRec {
    std::uint64_t start, end, address, value;
    std::uint32_t kind, flags, src, dst;
  };
  struct Range {
    std::uint64_t start, end;
    std::uint32_t thread, id;
    std::string name, domain;
    bool instant;
  };
  struct MarkerInfo {
    std::uint32_t category = 0, colour = 0;
    bool has_colour = false;
  };
  struct ApiEvent {
    std::uint64_t start, end, ptr, bytes;
    std::uint32_t slot, thread, stream;  // stream: CUPTI stream id or UINT32_MAX
    bool prefetch;
  };

  explicit Impl(Options o) : opt(std::move(o)), trace(!opt.trace_path.empty()) {}

  Options opt;
  const bool trace;
  WindowLedger ledger;

  mutable std::mutex notes_mu;
  std::vector<std::string> notes;

  bool subscribed = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool api_ok = false;
  bool buffers_registered = false;
  std::vector<CUpti_ActivityKind> enabled_kinds;
  bool kernel_on = false, memcpy_on = false, um_tried = false, um_on = false;
  bool markers_on = false;
  WindowLedger::Snapshot base;  // global API table when this profiler started
  std::uint64_t dropped = 0;

  std::mutex rec_mu;
  std::vector<GpuOp> ops;
  std::vector<UmRec> um;
  std::vector<Range> ranges;
  std::unordered_map<std::uint32_t, Range> open_ranges;
  std::unordered_map<std::uint32_t, MarkerInfo> marker_info;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> stream_names;
  std::vector<ApiEvent> api_events;
  std::vector<std::string> kernel_names;
  std::unordered_map<std::string, std::uint32_t> kernel_name_ids;
  std::uint64_t trace_dropped = 0;
  std::uint64_t marker_records = 0;

  void note(std::string s) {
    std::lock_guard<std::mutex> lk(notes_mu);
    if (std::find(notes.begin(), notes.end(), s) == notes.end()) notes.push_back(std::move(s));
  }

  std::uint64_t now() const {
    if (subscribed) {
      std::uint64_t t = 0;
      if (counted(cuptiGetTimestamp(&t)) == CUPTI_SUCCESS && t != 0) return t;
    }
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }

  WindowLedger::Snapshot snapshot() const {
    WindowLedger::Snapshot s;
    if (!api_ok) return s;
    ApiTable& t = api_table();
    for (std::size_t i = 0; i < kSlots; ++i) {
      std::uint64_t n = t.count[i].load(std::memory_order_relaxed);
      if (n == 0) continue;
      const char* fn = t.name[i].load(std::memory_order_relaxed);
      std::string key =
          fn ? normalize_api_name(fn)
             : (i < kDomainSlots ? "runtime#" : "driver#") + std::to_string(i % kDomainSlots);
      s[key] += n;
    }
    for (auto& [k, n] : s) {
      auto it = base.find(k);
      if (it != base.end()) n -= std::min(n, it->second);
    }
    for (auto it = s.begin(); it != s.end();) it = it->second == 0 ? s.erase(it) : std::next(it);
    return s;
  }

  bool enable_kind(CUpti_ActivityKind kind, const char* what) {
    CUptiResult r = counted(cuptiActivityEnable(kind));
    if (r != CUPTI_SUCCESS) {
      note(std::string(what) + " unavailable: cuptiActivityEnable failed with " + cupti_error(r));
      return false;
    }
    enabled_kinds.push_back(kind);
    return true;
  }

  void enable_activity_kinds() {
    if (!buffers_registered) return;
    if (opt.activity && !kernel_on) {
      kernel_on = enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel_ms (kernel records)");
      if (kernel_on) ledger.mark_available(ActivityCounter::KernelTime, now());
    }
    if (opt.activity && !memcpy_on) {
      memcpy_on = enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy_ms (memcpy records)");
      if (memcpy_on) ledger.mark_available(ActivityCounter::MemcpyTime, now());
    }
  }

  void flush() {
    if (!buffers_registered) return;
    CUptiResult r = counted(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    if (r != CUPTI_SUCCESS) note("cuptiActivityFlushAll failed: " + cupti_error(r));
    std::size_t d = 0;
    if (counted(cuptiActivityGetNumDroppedRecords(nullptr, 0, &d)) == CUPTI_SUCCESS && d > 0) {
      dropped += d;
      note("CUPTI dropped activity records (buffer space): window counters may be low");
    }
  }

  std::uint32_t kernel_name_id(const char* name) {
    std::string n = name ? name : "(unnamed kernel)";
    auto it = kernel_name_ids.find(n);
    if (it != kernel_name_ids.end()) return it->second;
    auto id = static_cast<std::uint32_t>(kernel_names.size());
    kernel_names.push_back(n);
    kernel_name_ids.emplace(std::move(n), id);
    return id;
  }

  bool room() {
    std::size_t n = ops.size() + um.size() + ranges.size() + api_events.size();
    if (n < kMaxTraceRecords) return true;
    ++trace_dropped;
    return false;
  }

  void consume_record(const CUpti_Activity* rec) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        std::uint64_t dur = k->end > k->start ? k->end - k->start : 0;
        ledger.add(ActivityCounter::KernelTime, k->start, dur);
        if (trace && k->start != 0) {
          std::lock_guard<std::mutex> lk(rec_mu);
          if (!room()) break;
          GpuOp op{};
          op.start = k->start;
          op.end = std::max(k->end, k->start);
          op.device = k->deviceId;
          op.stream = k->streamId;
          op.correlation = k->correlationId;
          op.name = kernel_name_id(k->name);
          op.kind = OpKind::Kernel;
          op.grid[0] = k->gridX, op.grid[1] = k->gridY, op.grid[2] = k->gridZ;
          op.block[0] = k->blockX, op.block[1] = k->blockY, op.block[2] = k->blockZ;
          ops.push_back(op);
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        std::uint64_t dur = m->end > m->start ? m->end - m->start : 0;
        ledger.add(ActivityCounter::MemcpyTime, m->start, dur);
        if (trace && m->start != 0) {
          std::lock_guard<std::mutex> lk(rec_mu);
          if (!room()) break;
          GpuOp op{};
          op.start = m->start;
          op.end = std::max(m->end, m->start);
          op.bytes = m->bytes;
          op.device = m->deviceId;
          op.stream = m->streamId;
          op.correlation = m->correlationId;
          op.kind = OpKind::Memcpy;
          op.copy_kind = m->copyKind;
          op.src_kind = m->srcKind;
          op.dst_kind = m->dstKind;
          op.flags = m->flags;
          ops.push_back(op);
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        if (trace && m->start != 0) {
          std::lock_guard<std::mutex> lk(rec_mu);
          if (!room()) break;
          GpuOp op{};
          op.start = m->start;
          op.end = std::max(m->end, m->start);
          op.bytes = m->bytes;
          op.device = m->deviceId;
          op.stream = m->streamId;
          op.correlation = m->correlationId;
          op.kind = OpKind::Memset;
          ops.push_back(op);
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
        auto* u = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(rec);
        switch (u->counterKind) {
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
            ledger.add(ActivityCounter::UmHtoDBytes, u->start, u->value);
            break;
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
            ledger.add(ActivityCounter::UmDtoHBytes, u->start, u->value);
            break;
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
            // value = number of fault groups for the page (at least one per record).
            ledger.add(ActivityCounter::UmGpuFaults, u->start, u->value ? u->value : 1);
            break;
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
            // value is the faulting instruction's PC: one fault per record.
            ledger.add(ActivityCounter::UmCpuFaults, u->start, 1);
            break;
          default:
            break;
        }
        if (trace && u->start != 0) {
          std::lock_guard<std::mutex> lk(rec_mu);
          if (!room()) break;
          um.push_back(UmRec{u->start, std::max(u->end, u->start), u->address, u->value,
                             static_cast<std::uint32_t>(u->counterKind), u->flags, u->srcId,
                             u->dstId});
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER: {
        auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(rec);
        std::lock_guard<std::mutex> lk(rec_mu);
        ++marker_records;
        std::uint32_t thread =
            m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
        const unsigned flags = static_cast<unsigned>(m->flags);
        if (flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
          Range r{m->timestamp, m->timestamp,           thread,
                  m->id,        m->name ? m->name : "", m->domain ? m->domain : "",
                  false};
          open_ranges[m->id] = std::move(r);
        } else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
          auto it = open_ranges.find(m->id);
          if (it != open_ranges.end()) {
            Range r = std::move(it->second);
            open_ranges.erase(it);
            r.end = std::max(m->timestamp, r.start);
            if (room()) ranges.push_back(std::move(r));
          }
        } else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
          if (room())
            ranges.push_back(Range{m->timestamp, m->timestamp, thread, m->id,
                                   m->name ? m->name : "", m->domain ? m->domain : "", true});
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER_DATA: {
        auto* d = reinterpret_cast<const CUpti_ActivityMarkerData2*>(rec);
        std::lock_guard<std::mutex> lk(rec_mu);
        MarkerInfo& info = marker_info[d->id];
        info.category = d->category;
        info.colour = d->color;
        info.has_colour =
            (static_cast<unsigned>(d->flags) & CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB) != 0;
        break;
      }
      case CUPTI_ACTIVITY_KIND_NAME: {
        auto* n = reinterpret_cast<const CUpti_ActivityName*>(rec);
        if (n->objectKind == CUPTI_ACTIVITY_OBJECT_STREAM && n->name != nullptr) {
          std::lock_guard<std::mutex> lk(rec_mu);
          stream_names[{n->objectId.dcs.deviceId, n->objectId.dcs.streamId}] = n->name;
        }
        break;
      }
      default:
        break;
    }
  }

  void consume(std::uint8_t* buffer, std::size_t valid) noexcept {
    try {
      CUpti_Activity* rec = nullptr;
      while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) consume_record(rec);
    } catch (...) {
      // Never let an exception cross into CUPTI; the window simply misses the record.
    }
  }

  void record_api_exit(std::uint32_t slot, const CUpti_CallbackData* info, bool prefetch,
                       bool per_thread) noexcept {
    try {
      std::uint64_t end = 0;
      cuptiGetTimestamp(&end);
      ApiEvent ev{};
      ev.start = info->correlationData ? *info->correlationData : end;
      ev.end = std::max(end, ev.start);
      ev.slot = slot;
      ev.thread = this_thread_id();
      ev.stream = UINT32_MAX;
      ev.prefetch = prefetch;
      if (prefetch && info->functionParams != nullptr) {
        // Same layout for the default and the per-thread-stream variant.
        auto* p = static_cast<const cudaMemPrefetchAsync_v12020_params*>(info->functionParams);
        ev.ptr = reinterpret_cast<std::uint64_t>(p->devPtr);
        ev.bytes = p->count;
        std::uint32_t sid = 0;
        if (cuptiGetStreamIdEx(info->context, reinterpret_cast<CUstream>(p->stream),
                               per_thread ? 1 : 0, &sid) == CUPTI_SUCCESS)
          ev.stream = sid;
      }
      std::lock_guard<std::mutex> lk(rec_mu);
      if (room()) api_events.push_back(ev);
    } catch (...) {
    }
  }

  nlohmann::json build_trace(ChromeTrace& tr);  // returns the otherData block
};

namespace {

std::mutex g_active_mu;
CuptiProfiler::Impl* g_active = nullptr;  // receives activity buffers

constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  {
    std::lock_guard<std::mutex> lk(g_active_mu);
    if (g_active != nullptr && buffer != nullptr && valid > 0) g_active->consume(buffer, valid);
  }
  std::free(buffer);
}

void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* cbdata) {
  auto* info = static_cast<const CUpti_CallbackData*>(cbdata);
  if (info == nullptr) return;
  ApiTable& t = api_table();
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    const bool trace = userdata != nullptr;
    if (info->callbackSite == CUPTI_API_ENTER) {
      ++t_runtime_depth;
      if (cbid >= kDomainSlots) {
        t.out_of_range.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      t.count[cbid].fetch_add(1, std::memory_order_relaxed);
      if (t.name[cbid].load(std::memory_order_relaxed) == nullptr)
        t.name[cbid].store(info->functionName, std::memory_order_relaxed);
      if (trace && info->correlationData != nullptr) {
        std::uint64_t ts = 0;
        cuptiGetTimestamp(&ts);
        *info->correlationData = ts;
      }
    } else {
      if (t_runtime_depth > 0) --t_runtime_depth;
      if (!trace || cbid >= kDomainSlots) return;
      auto interest = static_cast<TraceInterest>(t.interest[cbid].load(std::memory_order_relaxed));
      if (interest == TraceInterest::Unknown) {
        interest = classify_for_trace(cbid, info->functionName);
        t.interest[cbid].store(static_cast<std::uint8_t>(interest), std::memory_order_relaxed);
      }
      if (interest == TraceInterest::No) return;
      const bool per_thread =
          info->functionName != nullptr && std::strstr(info->functionName, "_ptsz") != nullptr;
      static_cast<CuptiProfiler::Impl*>(userdata)->record_api_exit(
          static_cast<std::uint32_t>(cbid), info, interest == TraceInterest::Prefetch, per_thread);
    }
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (info->callbackSite == CUPTI_API_ENTER) {
      // Only driver calls made directly by the program or a library, as nsys reports them.
      if (t_runtime_depth == 0 && t_driver_depth == 0) {
        std::size_t slot = kDomainSlots + cbid;
        if (cbid >= kDomainSlots) {
          t.out_of_range.fetch_add(1, std::memory_order_relaxed);
        } else {
          t.count[slot].fetch_add(1, std::memory_order_relaxed);
          if (t.name[slot].load(std::memory_order_relaxed) == nullptr)
            t.name[slot].store(info->functionName, std::memory_order_relaxed);
        }
      }
      ++t_driver_depth;
    } else if (t_driver_depth > 0) {
      --t_driver_depth;
    }
  }
}

// Path of the libcupti.so this process uses (NVTX_INJECTION64_PATH must name the same one).
std::string loaded_cupti_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetTimestamp), &info) != 0 && info.dli_fname)
    return info.dli_fname;
  return "";
}

}  // namespace

// =============================================================================================
// CuptiProfiler
// =============================================================================================

CuptiProfiler::CuptiProfiler(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  if (!s.opt.enabled) {
    s.note("profiling off (--no-profile): API counts and activity counters are null");
    return;
  }
  {
    std::lock_guard<std::mutex> lk(g_active_mu);
    if (g_active != nullptr) {
      s.note("another CuptiProfiler is active in this process: this one measures nothing");
      return;
    }
  }

  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "memstrat";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof old_name - 1;
  CUptiResult r = counted(cuptiSubscribe_v2(&s.subscriber, api_callback,
                                            s.trace ? static_cast<void*>(&s) : nullptr, &params));
  if (r != CUPTI_SUCCESS) {
    std::string who = old_name[0] ? std::string(" (held by \"") + old_name + "\")" : "";
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      s.note("built-in profiler off: another CUPTI client is attached" + who +
             " - e.g. Nsight Systems/Compute; use its report, or run without it");
    else
      s.note("built-in profiler off: cuptiSubscribe failed with " + cupti_error(r));
    return;
  }
  s.subscribed = true;

  r = counted(cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
  if (r == CUPTI_SUCCESS) {
    s.api_ok = true;
    r = counted(cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
    if (r != CUPTI_SUCCESS)
      s.note("driver API calls are not counted: cuptiEnableDomain(DRIVER_API) failed with " +
             cupti_error(r));
  } else {
    s.note("API counts unavailable: cuptiEnableDomain(RUNTIME_API) failed with " + cupti_error(r));
  }
  s.ledger.set_api_available(s.api_ok);
  s.base.clear();
  if (s.api_ok) s.base = s.snapshot();  // calls counted by an earlier profiler

  if (s.opt.activity || s.opt.unified_memory || s.trace) {
    r = counted(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    if (r == CUPTI_SUCCESS) {
      s.buffers_registered = true;
      std::lock_guard<std::mutex> lk(g_active_mu);
      g_active = &s;
    } else {
      s.note("activity counters unavailable: cuptiActivityRegisterCallbacks failed with " +
             cupti_error(r));
    }
  }
  s.enable_activity_kinds();

  if (s.trace && s.buffers_registered) {
    // Marker thread ids = gettid(), the ids the API tracks use.
    counted(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
    s.enable_kind(CUPTI_ACTIVITY_KIND_MEMSET, "memset records (trace)");
    s.enable_kind(CUPTI_ACTIVITY_KIND_NAME, "stream names (trace)");
    s.markers_on = s.enable_kind(CUPTI_ACTIVITY_KIND_MARKER, "NVTX ranges (trace)");
    if (s.markers_on) s.enable_kind(CUPTI_ACTIVITY_KIND_MARKER_DATA, "NVTX categories (trace)");
    // NVTX hands its calls to the library named here when the first NVTX call is made.
    const char* env = std::getenv("NVTX_INJECTION64_PATH");
    std::string cupti = loaded_cupti_path();
    if (env == nullptr && !cupti.empty()) {
      ::setenv("NVTX_INJECTION64_PATH", cupti.c_str(), 0);
    } else if (env != nullptr && cupti != env) {
      s.note(std::string("NVTX_INJECTION64_PATH is set to '") + env +
             "', not to this process's libcupti ('" + cupti +
             "'): NVTX ranges go there, not into the trace");
    }
  }
}

CuptiProfiler::~CuptiProfiler() {
  if (!impl_) return;
  Impl& s = *impl_;
  try {
    if (s.buffers_registered) {
      s.flush();
      for (CUpti_ActivityKind k : s.enabled_kinds) counted(cuptiActivityDisable(k));
      s.flush();
    }
  } catch (...) {
  }
  {
    std::lock_guard<std::mutex> lk(g_active_mu);
    if (g_active == &s) g_active = nullptr;
  }
  if (s.subscribed) counted(cuptiUnsubscribe(s.subscriber));
}

void CuptiProfiler::enable_device_counters() {
  Impl& s = *impl_;
  if (!s.subscribed) return;
  s.enable_activity_kinds();
  if (!s.opt.unified_memory || s.um_tried || !s.buffers_registered) return;
  s.um_tried = true;

  // Try all four counters; a device or platform may lack CPU faults, so fall back to fewer.
  const CUpti_ActivityUnifiedMemoryCounterKind all[] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT};
  const ActivityCounter as_counter[] = {ActivityCounter::UmHtoDBytes, ActivityCounter::UmDtoHBytes,
                                        ActivityCounter::UmGpuFaults, ActivityCounter::UmCpuFaults};
  auto not_yet = [](CUptiResult r) {
    return r == CUPTI_ERROR_NOT_READY || r == CUPTI_ERROR_NOT_INITIALIZED;
  };
  const std::string no_context =
      " (no CUDA context yet: call enable_device_counters() after cudaFree(0))";
  CUptiResult r = CUPTI_ERROR_UNKNOWN;
  std::uint32_t n = 4;
  for (; n >= 2; --n) {
    CUpti_ActivityUnifiedMemoryCounterConfig config[4] = {};
    for (std::uint32_t i = 0; i < n; ++i) {
      // scope and deviceId are deprecated (ignored since CUDA 7.0); set as the samples do.
      config[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
      config[i].kind = all[i];
      config[i].deviceId = 0;
      config[i].enable = 1;
    }
    r = counted(cuptiActivityConfigureUnifiedMemoryCounter(config, n));
    if (r == CUPTI_SUCCESS || not_yet(r)) break;
  }
  if (r != CUPTI_SUCCESS) {
    s.note(
        "unified-memory counters unavailable: cuptiActivityConfigureUnifiedMemoryCounter "
        "failed with " +
        cupti_error(r) + (not_yet(r) ? no_context : ""));
    if (not_yet(r)) s.um_tried = false;  // may succeed on a later call
    return;
  }
  if (n < 4) s.note("unified-memory CPU page faults unavailable on this platform");
  if (n < 3) s.note("unified-memory GPU page faults unavailable on this device");
  r = counted(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
  if (r != CUPTI_SUCCESS) {
    s.note(
        "unified-memory counters unavailable: cuptiActivityEnable(UNIFIED_MEMORY_COUNTER) "
        "failed with " +
        cupti_error(r) + (not_yet(r) ? no_context : ""));
    if (not_yet(r)) s.um_tried = false;  // may succeed on a later call
    return;
  }
  s.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  s.um_on = true;
  const std::uint64_t t = s.now();
  for (std::uint32_t i = 0; i < n; ++i) s.ledger.mark_available(as_counter[i], t);
}

void CuptiProfiler::begin_window(std::string name) {
  Impl& s = *impl_;
  s.ledger.begin_window(std::move(name), s.now(), s.snapshot());
  if (s.subscribed && s.opt.unified_memory && !s.um_tried)
    s.note(
        "unified-memory counters were not enabled when a window began (call "
        "enable_device_counters() after cudaFree(0)): null in such windows");
}

WindowCounters CuptiProfiler::end_window() {
  Impl& s = *impl_;
  s.ledger.close_window(s.now(), s.snapshot());
  s.flush();
  if (s.um_on) {
    // Unified-memory records come from the driver's fault and migration queue; give the ones
    // of the last kernels a moment to arrive, then flush again.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s.flush();
  }
  std::uint64_t late = s.ledger.late_records();
  if (late > 0)
    s.note("some activity records arrived after their window was reported (" +
           std::to_string(late) + " so far): those windows' activity counters are low");
  return s.ledger.report();
}

std::vector<std::string> CuptiProfiler::notes() const {
  const Impl& s = *impl_;
  std::lock_guard<std::mutex> lk(s.notes_mu);
  std::vector<std::string> out = s.notes;
  std::uint64_t oor = api_table().out_of_range.load(std::memory_order_relaxed);
  if (oor > 0)
    out.push_back(std::to_string(oor) +
                  " API calls had a callback id beyond the table (newer "
                  "CUPTI?): not in the counts");
  return out;
}

bool CuptiProfiler::api_available() const { return impl_->api_ok; }

ApiCounts CuptiProfiler::api_totals() const {
  ApiCounts c;
  if (impl_->api_ok) c.calls = impl_->snapshot();
  return c;
}

const CuptiProfiler::Options& CuptiProfiler::options() const { return impl_->opt; }

std::uint64_t CuptiProfiler::late_records() const { return impl_->ledger.late_records(); }

std::uint64_t CuptiProfiler::cupti_calls_made() {
  return g_cupti_calls.load(std::memory_order_relaxed);
}

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
  auto hist = s.ledger.history();
  std::string out;
  char buf[512];

  // --- API calls: rows = functions, columns = windows + outside + total ---
  out += "CUDA API calls per window (CUPTI callback API; outside = between windows)\n";
  if (!s.api_ok) {
    out += "  n/a: ";
    out += s.opt.enabled ? "API counting unavailable (see notes)" : "profiling off (--no-profile)";
    out += "\n";
  } else {
    ApiCounts totals = api_totals();
    // Watched functions that were called, the allocation functions always (their 0 in every
    // epoch is the point), and any other function called inside an epoch.
    std::vector<std::string> rows;
    for (const std::string& fn : watched_api_names())
      if (totals.count(fn) > 0 || fn == "cudaMalloc" || fn == "cudaMallocHost" ||
          fn == "cudaHostAlloc" || fn == "cudaMallocManaged")
        rows.push_back(fn);
    for (const auto& [wname, wc] : hist) {
      if (wname == "setup") continue;
      for (const auto& [fn, n] : wc.api.calls)
        if (n > 0 && std::find(rows.begin(), rows.end(), fn) == rows.end()) rows.push_back(fn);
    }
    std::size_t name_w = 24;
    for (const auto& r : rows) name_w = std::max(name_w, r.size() + 2);
    std::vector<std::string> cols;
    for (const auto& [wname, wc] : hist) {
      (void)wc;
      cols.push_back(wname);
    }
    cols.push_back("outside");
    cols.push_back("total");
    std::vector<std::size_t> col_w;
    for (const auto& c : cols) col_w.push_back(std::max<std::size_t>(9, c.size() + 2));
    std::snprintf(buf, sizeof buf, "  %-*s", static_cast<int>(name_w), "function");
    out += buf;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%*s", static_cast<int>(col_w[i]), cols[i].c_str());
      out += buf;
    }
    out += "\n";
    for (const auto& fn : rows) {
      std::uint64_t in_windows = 0;
      std::snprintf(buf, sizeof buf, "  %-*s", static_cast<int>(name_w), fn.c_str());
      out += buf;
      for (std::size_t i = 0; i < hist.size(); ++i) {
        std::uint64_t n = hist[i].second.api.count(fn);
        in_windows += n;
        std::snprintf(buf, sizeof buf, "%*" PRIu64, static_cast<int>(col_w[i]), n);
        out += buf;
      }
      std::uint64_t total = totals.count(fn);
      std::uint64_t outside = total >= in_windows ? total - in_windows : 0;
      std::snprintf(buf, sizeof buf, "%*" PRIu64 "%*" PRIu64, static_cast<int>(col_w[hist.size()]),
                    outside, static_cast<int>(col_w[hist.size() + 1]), total);
      out += buf;
      out += "\n";
    }
    std::snprintf(buf, sizeof buf, "  %-*s", static_cast<int>(name_w), "(all functions)");
    out += buf;
    std::uint64_t all_windows = 0;
    for (std::size_t i = 0; i < hist.size(); ++i) {
      std::uint64_t n = hist[i].second.api.total();
      // watched names carry explicit zeros; total() counts calls, so zeros add nothing
      all_windows += n;
      std::snprintf(buf, sizeof buf, "%*" PRIu64, static_cast<int>(col_w[i]), n);
      out += buf;
    }
    std::uint64_t all = totals.total();
    std::snprintf(buf, sizeof buf, "%*" PRIu64 "%*" PRIu64, static_cast<int>(col_w[hist.size()]),
                  all >= all_windows ? all - all_windows : 0,
                  static_cast<int>(col_w[hist.size() + 1]), all);
    out += buf;
    out += "\n";
  }

  // --- Activity: rows = windows ---
  out += "Unified memory and GPU activity per window (CUPTI activity API; n/a = not measured)\n";
  std::snprintf(buf, sizeof buf, "  %-14s%14s%14s%12s%12s%12s%12s\n", "window", "UM HtoD MB",
                "UM DtoH MB", "GPU faults", "CPU faults", "kernel ms", "memcpy ms");
  out += buf;
  auto u64 = [](const std::optional<std::uint64_t>& v) {
    return v ? std::to_string(*v) : std::string("n/a");
  };
  auto mb = [](const std::optional<std::uint64_t>& v) {
    return v ? format_bytes_mb(*v) : std::string("n/a");
  };
  auto ms = [](const std::optional<double>& v) {
    if (!v) return std::string("n/a");
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", *v);
    return std::string(b);
  };
  for (const auto& [wname, wc] : hist) {
    std::snprintf(buf, sizeof buf, "  %-14s%14s%14s%12s%12s%12s%12s\n", wname.c_str(),
                  mb(wc.um_htod_bytes).c_str(), mb(wc.um_dtoh_bytes).c_str(),
                  u64(wc.um_gpu_faults).c_str(), u64(wc.um_cpu_faults).c_str(),
                  ms(wc.kernel_ms).c_str(), ms(wc.memcpy_ms).c_str());
    out += buf;
  }
  return out;
}

// =============================================================================================
// Trace
// =============================================================================================

nlohmann::json CuptiProfiler::Impl::build_trace(ChromeTrace& tr) {
  constexpr int kHostPid = 1;
  auto gpu_pid = [](std::uint32_t device) {
    return 10 + static_cast<int>(std::min(device, 1000u));
  };
  // GPU tracks: stream s, lane k -> tid s*100 + k; its prefetch migrations -> s*100 + 50 + k.
  constexpr int kUmHtoDTid = 1'900'000'000, kUmDtoHTid = 1'950'000'000;
  constexpr int kApiTidOffset = 1 << 24;

  auto spans = ledger.spans();
  std::uint64_t t0 = UINT64_MAX;
  auto see = [&](std::uint64_t t) {
    if (t != 0 && t < t0) t0 = t;
  };
  for (const auto& op : ops) see(op.start);
  for (const auto& u : um) see(u.start);
  for (const auto& r : ranges) see(r.start);
  for (const auto& a : api_events) see(a.start);
  for (const auto& sp : spans) see(sp.second.first);
  if (t0 == UINT64_MAX) t0 = 0;
  auto us = [t0](std::uint64_t t) {
    return (static_cast<double>(t) - static_cast<double>(t0)) / 1e3;
  };
  auto dur_us = [](std::uint64_t a, std::uint64_t b) {
    return b > a ? static_cast<double>(b - a) / 1e3 : 0.0;
  };

  tr.set_process_name(kHostPid, "host: memstrat (pid " + std::to_string(::getpid()) + ")");
  tr.set_process_sort_index(kHostPid, 0);

  // Profiler windows (always present, even without NVTX injection).
  tr.set_thread_name(kHostPid, 0, "profiler windows");
  tr.set_thread_sort_index(kHostPid, 0, 0);
  const std::uint64_t now_ts = now();
  for (const auto& [name, be] : spans) {
    std::uint64_t end = be.second == WindowLedger::kOpen ? std::max(now_ts, be.first) : be.second;
    tr.add_complete(name, "window", kHostPid, 0, us(be.first), dur_us(be.first, end));
  }

  // NVTX ranges per host thread; ranges of other domains get their own track, since push/pop
  // only nest within one domain.
  auto nvtx_tid = [](std::uint32_t thread, bool ours) {
    int t = thread == 0 ? (1 << 24) - 1 : static_cast<int>(thread & 0x00FFFFFF);
    return ours ? t : t + 3 * (1 << 24);
  };
  std::map<std::pair<std::uint32_t, bool>, bool> nvtx_threads;
  for (const auto& r : ranges) {
    const bool ours = r.domain == "memstrat";
    nvtx_threads[{r.thread, ours}] = true;
    std::string cat = "nvtx";
    nlohmann::json args = {{"domain", r.domain.empty() ? "(default)" : r.domain}};
    auto info = marker_info.find(r.id);
    if (info != marker_info.end()) {
      std::uint32_t c = info->second.category;
      if (r.domain == "memstrat" && c >= static_cast<std::uint32_t>(Phase::Run) &&
          c <= static_cast<std::uint32_t>(kLastPhase))
        cat = phase_name(static_cast<Phase>(c));
      if (info->second.has_colour) args["colour"] = hex_colour(info->second.colour);
    }
    const int tid = nvtx_tid(r.thread, ours);
    if (r.instant)
      tr.add_instant(r.name, cat, kHostPid, tid, us(r.start), args);
    else
      tr.add_complete(r.name, cat, kHostPid, tid, us(r.start), dur_us(r.start, r.end), args);
  }
  int order = 1;
  for (const auto& [key, unused] : nvtx_threads) {
    (void)unused;
    const int tid = nvtx_tid(key.first, key.second);
    tr.set_thread_name(kHostPid, tid,
                       "thread " + std::to_string(key.first) +
                           (key.second ? " - NVTX" : " - NVTX (other domains)"));
    tr.set_thread_sort_index(kHostPid, tid, order++);
  }

  // CUDA API calls (memory, copies, hints, synchronisation) per host thread.
  std::map<std::uint32_t, Lanes> api_lanes;
  ApiTable& table = api_table();
  std::vector<const ApiEvent*> prefetches;
  for (const auto& a : api_events) {
    const char* fn = table.name[a.slot].load(std::memory_order_relaxed);
    std::string name = fn ? normalize_api_name(fn) : "cuda API";
    nlohmann::json args = nlohmann::json::object();
    if (a.prefetch) {
      args["bytes"] = a.bytes;
      if (a.stream != UINT32_MAX) args["stream"] = a.stream;
      prefetches.push_back(&a);
    }
    // One thread's calls never overlap; a second lane only guards against clock quirks.
    std::size_t lane = std::min<std::size_t>(api_lanes[a.thread].place(a.start, a.end), 15);
    const int tid = static_cast<int>((a.thread & 0x00FFFFFF) + kApiTidOffset + (lane << 26));
    tr.add_complete(name, "cuda_api", kHostPid, tid, us(a.start), dur_us(a.start, a.end),
                    args.empty() ? nlohmann::json(nullptr) : args);
  }
  for (auto& [thread, lanes] : api_lanes) {
    (void)lanes;
    const int tid = static_cast<int>((thread & 0x00FFFFFF) + kApiTidOffset);
    tr.set_thread_name(kHostPid, tid, "thread " + std::to_string(thread) + " - CUDA API");
    tr.set_thread_sort_index(kHostPid, tid, order++);
  }

  // Kernels, memcpys, memsets on their streams.
  std::sort(ops.begin(), ops.end(),
            [](const GpuOp& a, const GpuOp& b) { return a.start < b.start; });
  std::map<std::pair<std::uint32_t, std::uint32_t>, Lanes> stream_lanes;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> lanes_used;
  std::map<std::uint32_t, bool> devices;
  std::vector<std::string> demangled(kernel_names.size());
  for (const auto& op : ops) {
    const auto key = std::make_pair(op.device, op.stream);
    std::size_t lane = std::min<std::size_t>(stream_lanes[key].place(op.start, op.end), 49);
    lanes_used[key] = std::max(lanes_used[key], lane + 1);
    devices[op.device] = true;
    const int tid = static_cast<int>(op.stream % 20'000'000) * 100 + static_cast<int>(lane);
    switch (op.kind) {
      case OpKind::Kernel: {
        if (demangled[op.name].empty()) demangled[op.name] = demangle(kernel_names[op.name]);
        nlohmann::json args = {
            {"stream", op.stream},
            {"correlation", op.correlation},
            {"grid", std::to_string(op.grid[0]) + "," + std::to_string(op.grid[1]) + "," +
                         std::to_string(op.grid[2])},
            {"block", std::to_string(op.block[0]) + "," + std::to_string(op.block[1]) + "," +
                          std::to_string(op.block[2])}};
        tr.add_complete(demangled[op.name], "kernel", gpu_pid(op.device), tid, us(op.start),
                        dur_us(op.start, op.end), std::move(args));
        break;
      }
      case OpKind::Memcpy: {
        const char* kind = memcpy_kind_name(op.copy_kind);
        nlohmann::json args = {{"kind", kind},
                               {"bytes", op.bytes},
                               {"src", memory_kind_name(op.src_kind)},
                               {"dst", memory_kind_name(op.dst_kind)},
                               {"async", (op.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0},
                               {"stream", op.stream},
                               {"correlation", op.correlation}};
        double d = dur_us(op.start, op.end);
        if (d > 0) args["GB/s"] = static_cast<double>(op.bytes) / (d * 1e3);
        tr.add_complete(std::string("Memcpy ") + kind, "memcpy", gpu_pid(op.device), tid,
                        us(op.start), d, std::move(args));
        break;
      }
      case OpKind::Memset:
        tr.add_complete("Memset", "memset", gpu_pid(op.device), tid, us(op.start),
                        dur_us(op.start, op.end), {{"bytes", op.bytes}, {"stream", op.stream}});
        break;
    }
  }

  // Unified-memory migrations: prefetch migrations under the stream whose cudaMemPrefetchAsync
  // covers the address; the rest on one HtoD and one DtoH track per device.
  std::sort(um.begin(), um.end(), [](const UmRec& a, const UmRec& b) { return a.start < b.start; });
  std::sort(prefetches.begin(), prefetches.end(),
            [](const ApiEvent* a, const ApiEvent* b) { return a->start < b->start; });
  auto prefetch_stream = [&](const UmRec& u) -> std::uint32_t {
    auto it = std::upper_bound(prefetches.begin(), prefetches.end(), u.start,
                               [](std::uint64_t t, const ApiEvent* a) { return t < a->start; });
    for (int back = 0; it != prefetches.begin() && back < 256; ++back) {
      --it;
      const ApiEvent* a = *it;
      if (u.address >= a->ptr && u.address < a->ptr + a->bytes) return a->stream;
    }
    return UINT32_MAX;
  };
  std::map<std::pair<std::uint32_t, int>, Lanes> um_lanes;  // (device, base tid)
  std::map<std::pair<std::uint32_t, int>, std::string> um_track_names;
  std::map<std::uint32_t, std::map<std::int64_t, std::uint64_t>> gpu_fault_bins;
  std::map<std::int64_t, std::uint64_t> cpu_fault_bins;
  constexpr double kBinUs = 100.0;
  for (const auto& u : um) {
    const bool htod = u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
    const bool dtoh = u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH;
    if (u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT) {
      std::uint32_t dev = u.src < 1000 ? u.src : 0;
      devices[dev] = true;
      gpu_fault_bins[dev][static_cast<std::int64_t>(us(u.start) / kBinUs)] += u.value ? u.value : 1;
      continue;
    }
    if (u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT) {
      cpu_fault_bins[static_cast<std::int64_t>(us(u.start) / kBinUs)] += 1;
      continue;
    }
    if (!htod && !dtoh) continue;
    std::uint32_t dev = htod ? u.dst : u.src;
    if (dev >= 1000) dev = 0;  // CPU id on the other side
    devices[dev] = true;
    int base_tid = htod ? kUmHtoDTid : kUmDtoHTid;
    std::string track = htod ? "UM migrations HtoD" : "UM migrations DtoH";
    if (htod && u.flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER) {
      std::uint32_t s = prefetch_stream(u);
      if (s != UINT32_MAX) {
        base_tid = static_cast<int>(s % 20'000'000) * 100 + 50;
        auto nm = stream_names.find({dev, s});
        track = "stream " + std::to_string(s) +
                (nm != stream_names.end() ? " (" + nm->second + ")" : std::string()) +
                " - prefetch migrations";
      }
    }
    const auto key = std::make_pair(dev, base_tid);
    std::size_t lane = std::min<std::size_t>(um_lanes[key].place(u.start, u.end), 49);
    um_track_names[key] = track;
    const int tid = base_tid + static_cast<int>(lane);
    if (lane > 0) um_track_names[{dev, tid}] = track + " (" + std::to_string(lane + 1) + ")";
    tr.add_complete(
        htod ? "UM HtoD" : "UM DtoH", "um_migration", gpu_pid(dev), tid, us(u.start),
        dur_us(u.start, u.end),
        {{"bytes", u.value}, {"cause", migration_cause_name(u.flags)}, {"address", u.address}});
  }

  // Names of GPU tracks.
  for (const auto& [dev, unused] : devices) {
    (void)unused;
    tr.set_process_name(gpu_pid(dev), "GPU " + std::to_string(dev));
    tr.set_process_sort_index(gpu_pid(dev), 1 + static_cast<int>(dev));
  }
  for (const auto& [key, n] : lanes_used) {
    auto nm = stream_names.find(key);
    std::string base = "stream " + std::to_string(key.second);
    if (nm != stream_names.end()) base += " (" + nm->second + ")";
    for (std::size_t lane = 0; lane < n; ++lane) {
      const int tid = static_cast<int>(key.second % 20'000'000) * 100 + static_cast<int>(lane);
      tr.set_thread_name(gpu_pid(key.first), tid,
                         lane == 0 ? base : base + " (" + std::to_string(lane + 1) + ")");
      tr.set_thread_sort_index(gpu_pid(key.first), tid, tid);
    }
  }
  for (const auto& [key, name] : um_track_names) {
    tr.set_thread_name(gpu_pid(key.first), key.second, name);
    if (key.second < kUmHtoDTid)
      tr.set_thread_sort_index(gpu_pid(key.first), key.second, key.second);
  }

  // Page faults as counters: faults per 100 us bin (0 after each run of bins).
  auto emit_bins = [&](int pid, const std::string& name,
                       const std::map<std::int64_t, std::uint64_t>& bins) {
    for (auto it = bins.begin(); it != bins.end(); ++it) {
      tr.add_counter(name, pid, static_cast<double>(it->first) * kBinUs, {{"faults", it->second}});
      auto next = std::next(it);
      if (next == bins.end() || next->first != it->first + 1)
        tr.add_counter(name, pid, static_cast<double>(it->first + 1) * kBinUs, {{"faults", 0}});
    }
  };
  for (const auto& [dev, bins] : gpu_fault_bins)
    emit_bins(gpu_pid(dev), "UM GPU page faults per 100 us", bins);
  emit_bins(kHostPid, "UM CPU page faults per 100 us", cpu_fault_bins);

  nlohmann::json other;
  other["generator"] = "memstrat CuptiProfiler";
  other["clock"] = "CUPTI timestamps; ts 0 = " + std::to_string(t0) + " ns";
  other["nvtx_ranges"] = ranges.size();
  other["trace_records_dropped"] = trace_dropped;
  other["cupti_records_dropped"] = dropped;
  return other;
}

void CuptiProfiler::write_trace() {
  Impl& s = *impl_;
  if (s.opt.trace_path.empty()) return;
  ChromeTrace tr;
  nlohmann::json other = nlohmann::json::object();
  if (s.subscribed) {
    s.flush();
    std::lock_guard<std::mutex> lk(s.rec_mu);
    other = s.build_trace(tr);
    if (s.markers_on && s.marker_records == 0)
      s.note(
          "no NVTX ranges reached CUPTI: NVTX was initialised before the profiler, or "
          "NVTX_INJECTION64_PATH names another tool (the trace has no NVTX tracks)");
    if (s.trace_dropped > 0)
      s.note("trace kept the first " + std::to_string(kMaxTraceRecords) + " records; " +
             std::to_string(s.trace_dropped) + " later ones are not in the trace");
  } else {
    tr.set_process_name(1, "host: memstrat");
    other["generator"] = "memstrat CuptiProfiler";
  }
  other["notes"] = notes();
  tr.set_other_data(nlohmann::json{{"memstrat", std::move(other)}});
  tr.write(s.opt.trace_path);
}

}  // namespace memstrat
