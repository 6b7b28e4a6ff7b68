#include "common/profiler/api_callback.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>

#include "common/profiler/activity.h"
#include "common/profiler/api_names.h"

namespace memstrat {

namespace {

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

void count_call(ApiTable& t, std::size_t slot, const char* fn) {
  t.count[slot].fetch_add(1, std::memory_order_relaxed);
  if (t.name[slot].load(std::memory_order_relaxed) == nullptr)
    t.name[slot].store(fn, std::memory_order_relaxed);
}

TraceInterest classify_for_trace(CUpti_CallbackId cbid, const char* fn) {
  if (fn == nullptr) return TraceInterest::No;
  // Only these two have the parameter layout record_api_exit() reads (CUDA 12.2+ signature).
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemPrefetchAsync_v12020 ||
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemPrefetchAsync_ptsz_v12020)
    return TraceInterest::Prefetch;
  return is_traced_api(normalize_api_name(fn)) ? TraceInterest::Yes : TraceInterest::No;
}

TraceInterest trace_interest(ApiTable& t, CUpti_CallbackId cbid, const char* fn) {
  auto interest = static_cast<TraceInterest>(t.interest[cbid].load(std::memory_order_relaxed));
  if (interest == TraceInterest::Unknown) {
    interest = classify_for_trace(cbid, fn);
    t.interest[cbid].store(static_cast<std::uint8_t>(interest), std::memory_order_relaxed);
  }
  return interest;
}

// The API call that just returned, as a trace slice (its start was stored on entry in
// correlationData); for a prefetch also the range and the stream it covers.
void record_api_exit(ActivityRecords& records, std::uint32_t slot, const CUpti_CallbackData* info,
                     bool prefetch, bool per_thread) noexcept {
  try {
    std::uint64_t end = 0;
    cuptiGetTimestamp(&end);
    TraceRecords::ApiEvent ev{};
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
    records.add_api_event(ev);
  } catch (...) {
  }
}

void on_runtime_api(ActivityRecords* trace, CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  ApiTable& t = api_table();
  if (info->callbackSite == CUPTI_API_ENTER) {
    ++t_runtime_depth;
    if (cbid >= kDomainSlots) {
      t.out_of_range.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    count_call(t, cbid, info->functionName);
    if (trace != nullptr && info->correlationData != nullptr) {
      std::uint64_t ts = 0;
      cuptiGetTimestamp(&ts);
      *info->correlationData = ts;
    }
    return;
  }
  if (t_runtime_depth > 0) --t_runtime_depth;
  if (trace == nullptr || cbid >= kDomainSlots) return;
  const TraceInterest interest = trace_interest(t, cbid, info->functionName);
  if (interest == TraceInterest::No) return;
  const bool per_thread =
      info->functionName != nullptr && std::strstr(info->functionName, "_ptsz") != nullptr;
  record_api_exit(*trace, static_cast<std::uint32_t>(cbid), info,
                  interest == TraceInterest::Prefetch, per_thread);
}

void on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  if (info->callbackSite != CUPTI_API_ENTER) {
    if (t_driver_depth > 0) --t_driver_depth;
    return;
  }
  // Only driver calls made directly by the program or a library, as nsys reports them.
  if (t_runtime_depth == 0 && t_driver_depth == 0) {
    ApiTable& t = api_table();
    if (cbid >= kDomainSlots)
      t.out_of_range.fetch_add(1, std::memory_order_relaxed);
    else
      count_call(t, kDomainSlots + cbid, info->functionName);
  }
  ++t_driver_depth;
}

}  // namespace

void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* cbdata) {
  auto* info = static_cast<const CUpti_CallbackData*>(cbdata);
  if (info == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    on_runtime_api(static_cast<ActivityRecords*>(userdata), cbid, info);
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
    on_driver_api(cbid, info);
}

WindowLedger::Snapshot api_calls_so_far() {
  WindowLedger::Snapshot s;
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
  return s;
}

const char* api_slot_name(std::uint32_t slot) {
  return api_table().name[slot].load(std::memory_order_relaxed);
}

std::uint64_t api_calls_out_of_range() {
  return api_table().out_of_range.load(std::memory_order_relaxed);
}

}  // namespace memstrat
