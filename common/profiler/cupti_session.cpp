#include "common/profiler/cupti_session.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>

#include "common/profiler/api_callback.h"

namespace memstrat {

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

// CUPTI delivers activity buffers process-wide: they go to the records of the one session that
// registered the buffer callbacks.
std::mutex g_active_mu;
ActivityRecords* g_active = nullptr;

// The unified-memory counters, once enabled, stay enabled for the rest of the process: disabling
// them waits about 2 s in the driver when no unified-memory record was produced (measured on an
// H200, driver 580: a profiled pinned run ended in 3.2 s instead of 1.0 s), and while no session
// is active their records find no target and are dropped. The number of counters configured, 0
// until then; a later session in the same process uses them as they are.
std::atomic<std::uint32_t> g_um_counters{0};

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
    if (g_active != nullptr && buffer != nullptr && valid > 0)
      g_active->consume_buffer(buffer, valid);
  }
  std::free(buffer);
}

// Path of the libcupti.so this process uses (NVTX_INJECTION64_PATH must name the same one).
std::string loaded_cupti_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetTimestamp), &info) != 0 && info.dli_fname)
    return info.dli_fname;
  return "";
}

// All four unified-memory counters; a device or platform may lack CPU faults (the last), then
// GPU faults, so the session falls back to a prefix of this list.
constexpr CUpti_ActivityUnifiedMemoryCounterKind kUmCounterKinds[] = {
    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT};
constexpr ActivityCounter kUmCounters[] = {
    ActivityCounter::UmHtoDBytes, ActivityCounter::UmDtoHBytes, ActivityCounter::UmGpuFaults,
    ActivityCounter::UmCpuFaults};

// CUPTI answers these before a CUDA context exists: worth retrying later.
bool not_yet(CUptiResult r) {
  return r == CUPTI_ERROR_NOT_READY || r == CUPTI_ERROR_NOT_INITIALIZED;
}

}  // namespace

// =============================================================================================
// Start
// =============================================================================================

void CuptiSession::start() {
  {
    std::lock_guard<std::mutex> lk(g_active_mu);
    if (g_active != nullptr) {
      notes_.add("another CuptiProfiler is active in this process: this one measures nothing");
      return;
    }
  }
  if (!subscribe()) return;
  enable_api_domains();
  if (opt_.activity || opt_.unified_memory || tracing()) register_buffers();
  enable_activity_kinds();
  if (tracing() && buffers_registered_) enable_trace_kinds();
}

bool CuptiSession::subscribe() {
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "memstrat";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof old_name - 1;
  // The API callback hands the calls drawn in the trace to records_ (only when tracing).
  void* userdata = tracing() ? static_cast<void*>(&records_) : nullptr;
  CUptiResult r = counted(cuptiSubscribe_v2(&subscriber_, api_callback, userdata, &params));
  if (r != CUPTI_SUCCESS) {
    std::string who = old_name[0] ? std::string(" (held by \"") + old_name + "\")" : "";
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      notes_.add("built-in profiler off: another CUPTI client is attached" + who +
                 " - e.g. Nsight Systems/Compute; use its report, or run without it");
    else
      notes_.add("built-in profiler off: cuptiSubscribe failed with " + cupti_error(r));
    return false;
  }
  subscribed_ = true;
  return true;
}

void CuptiSession::enable_api_domains() {
  CUptiResult r = counted(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API));
  if (r == CUPTI_SUCCESS) {
    api_ok_ = true;
    r = counted(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API));
    if (r != CUPTI_SUCCESS)
      notes_.add("driver API calls are not counted: cuptiEnableDomain(DRIVER_API) failed with " +
                 cupti_error(r));
  } else {
    notes_.add("API counts unavailable: cuptiEnableDomain(RUNTIME_API) failed with " +
               cupti_error(r));
  }
  ledger_.set_api_available(api_ok_);
  base_.clear();
  if (api_ok_) base_ = snapshot();  // calls counted by an earlier profiler
}

void CuptiSession::register_buffers() {
  CUptiResult r = counted(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  if (r != CUPTI_SUCCESS) {
    notes_.add("activity counters unavailable: cuptiActivityRegisterCallbacks failed with " +
               cupti_error(r));
    return;
  }
  buffers_registered_ = true;
  std::lock_guard<std::mutex> lk(g_active_mu);
  g_active = &records_;
}

bool CuptiSession::enable_kind(CUpti_ActivityKind kind, const char* what) {
  CUptiResult r = counted(cuptiActivityEnable(kind));
  if (r != CUPTI_SUCCESS) {
    notes_.add(std::string(what) + " unavailable: cuptiActivityEnable failed with " +
               cupti_error(r));
    return false;
  }
  enabled_kinds_.push_back(kind);
  return true;
}

// Also a retry: a kind that failed in start() is tried again by enable_device_counters().
void CuptiSession::enable_activity_kinds() {
  if (!buffers_registered_) return;
  if (opt_.activity && !kernel_on_) {
    kernel_on_ = enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel_ms (kernel records)");
    if (kernel_on_) ledger_.mark_available(ActivityCounter::KernelTime, now());
  }
  if (opt_.activity && !memcpy_on_) {
    memcpy_on_ = enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy_ms (memcpy records)");
    if (memcpy_on_) ledger_.mark_available(ActivityCounter::MemcpyTime, now());
  }
}

void CuptiSession::enable_trace_kinds() {
  // Marker thread ids = gettid(), the ids the API tracks use.
  counted(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  enable_kind(CUPTI_ACTIVITY_KIND_MEMSET, "memset records (trace)");
  enable_kind(CUPTI_ACTIVITY_KIND_NAME, "stream names (trace)");
  markers_on_ = enable_kind(CUPTI_ACTIVITY_KIND_MARKER, "NVTX ranges (trace)");
  if (markers_on_) enable_kind(CUPTI_ACTIVITY_KIND_MARKER_DATA, "NVTX categories (trace)");
  route_nvtx_to_cupti();
}

// NVTX hands its calls to the library named here when the first NVTX call is made.
void CuptiSession::route_nvtx_to_cupti() {
  const char* env = std::getenv("NVTX_INJECTION64_PATH");
  std::string cupti = loaded_cupti_path();
  if (env == nullptr && !cupti.empty()) {
    ::setenv("NVTX_INJECTION64_PATH", cupti.c_str(), 0);
  } else if (env != nullptr && cupti != env) {
    notes_.add(std::string("NVTX_INJECTION64_PATH is set to '") + env +
               "', not to this process's libcupti ('" + cupti +
               "'): NVTX ranges go there, not into the trace");
  }
}

// =============================================================================================
// Unified-memory counters
// =============================================================================================

void CuptiSession::enable_device_counters() {
  if (!subscribed_) return;
  enable_activity_kinds();
  if (!opt_.unified_memory || um_tried_ || !buffers_registered_) return;
  um_tried_ = true;

  const std::string no_context =
      " (no CUDA context yet: call enable_device_counters() after cudaFree(0))";
  auto unavailable = [&](const char* call, CUptiResult r) {
    notes_.add(std::string("unified-memory counters unavailable: ") + call + " failed with " +
               cupti_error(r) + (not_yet(r) ? no_context : ""));
    if (not_yet(r)) um_tried_ = false;  // may succeed on a later call
  };
  std::uint32_t n = g_um_counters.load();
  if (n == 0) {  // the first session of the process that asks for them
    CUptiResult r = configure_um_counters(&n);
    if (r != CUPTI_SUCCESS) {
      unavailable("cuptiActivityConfigureUnifiedMemoryCounter", r);
      return;
    }
    r = counted(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
    if (r != CUPTI_SUCCESS) {
      unavailable("cuptiActivityEnable(UNIFIED_MEMORY_COUNTER)", r);
      return;
    }
    g_um_counters.store(n);  // not in enabled_kinds_: never disabled (g_um_counters says why)
  }
  if (n < 4) notes_.add("unified-memory CPU page faults unavailable on this platform");
  if (n < 3) notes_.add("unified-memory GPU page faults unavailable on this device");
  um_on_ = true;
  const std::uint64_t t = now();
  for (std::uint32_t i = 0; i < n; ++i) ledger_.mark_available(kUmCounters[i], t);
}

// Configures the first 4, else 3, else 2 counters of kUmCounterKinds; *enabled = how many.
CUptiResult CuptiSession::configure_um_counters(std::uint32_t* enabled) {
  CUptiResult r = CUPTI_ERROR_UNKNOWN;
  std::uint32_t n = 4;
  for (; n >= 2; --n) {
    CUpti_ActivityUnifiedMemoryCounterConfig config[4] = {};
    for (std::uint32_t i = 0; i < n; ++i) {
      // scope and deviceId are deprecated (ignored since CUDA 7.0); set as the samples do.
      config[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
      config[i].kind = kUmCounterKinds[i];
      config[i].deviceId = 0;
      config[i].enable = 1;
    }
    r = counted(cuptiActivityConfigureUnifiedMemoryCounter(config, n));
    if (r == CUPTI_SUCCESS || not_yet(r)) break;
  }
  *enabled = n;
  return r;
}

// =============================================================================================
// Running and teardown
// =============================================================================================

void CuptiSession::flush() {
  if (!buffers_registered_) return;
  CUptiResult r = counted(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (r != CUPTI_SUCCESS) notes_.add("cuptiActivityFlushAll failed: " + cupti_error(r));
  std::size_t d = 0;
  if (counted(cuptiActivityGetNumDroppedRecords(nullptr, 0, &d)) == CUPTI_SUCCESS && d > 0) {
    dropped_ += d;
    notes_.add("CUPTI dropped activity records (buffer space): window counters may be low");
  }
}

std::uint64_t CuptiSession::now() const {
  if (subscribed_) {
    std::uint64_t t = 0;
    if (counted(cuptiGetTimestamp(&t)) == CUPTI_SUCCESS && t != 0) return t;
  }
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

WindowLedger::Snapshot CuptiSession::snapshot() const {
  if (!api_ok_) return {};
  WindowLedger::Snapshot s = api_calls_so_far();
  for (auto& [k, n] : s) {
    auto it = base_.find(k);
    if (it != base_.end()) n -= std::min(n, it->second);
  }
  for (auto it = s.begin(); it != s.end();) it = it->second == 0 ? s.erase(it) : std::next(it);
  return s;
}

std::uint64_t CuptiSession::cupti_calls_made() {
  return g_cupti_calls.load(std::memory_order_relaxed);
}

CuptiSession::~CuptiSession() {
  try {
    if (buffers_registered_) {
      flush();
      for (CUpti_ActivityKind k : enabled_kinds_) counted(cuptiActivityDisable(k));
      flush();
    }
  } catch (...) {
  }
  {
    std::lock_guard<std::mutex> lk(g_active_mu);
    if (g_active == &records_) g_active = nullptr;
  }
  if (subscribed_) counted(cuptiUnsubscribe(subscriber_));
}

}  // namespace memstrat
