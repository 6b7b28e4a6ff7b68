#include "common/profiler/trace_export.h"

#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/nvtx.h"
#include "common/profiler/api_callback.h"
#include "common/profiler/api_names.h"

namespace memstrat {

namespace {

using ApiEvent = TraceRecords::ApiEvent;
using GpuOp = TraceRecords::GpuOp;
using UmRecord = TraceRecords::UmRecord;
using StreamNames = std::map<std::pair<std::uint32_t, std::uint32_t>, std::string>;

// Track ids. Host: windows on tid 0, NVTX and API tracks per thread. GPU: stream s, lane k ->
// tid s*100 + k; its prefetch migrations -> s*100 + 50 + k; other migrations on two fixed tids.
constexpr int kHostPid = 1;
constexpr int kUmHtoDTid = 1'900'000'000, kUmDtoHTid = 1'950'000'000;
constexpr int kApiTidOffset = 1 << 24;
constexpr double kBinUs = 100.0;  // page faults are counted per bin of this many us

int gpu_pid(std::uint32_t device) { return 10 + static_cast<int>(std::min(device, 1000u)); }

int stream_tid(std::uint32_t stream, std::size_t lane) {
  return static_cast<int>(stream % 20'000'000) * 100 + static_cast<int>(lane);
}

std::string stream_label(const StreamNames& names, std::uint32_t device, std::uint32_t stream) {
  auto nm = names.find({device, stream});
  return "stream " + std::to_string(stream) +
         (nm != names.end() ? " (" + nm->second + ")" : std::string());
}

// Trace time: microseconds since the earliest recorded timestamp.
struct TraceClock {
  std::uint64_t t0;
  double us(std::uint64_t t) const {
    return (static_cast<double>(t) - static_cast<double>(t0)) / 1e3;
  }
};

double dur_us(std::uint64_t a, std::uint64_t b) {
  return b > a ? static_cast<double>(b - a) / 1e3 : 0.0;
}

TraceClock trace_clock(const TraceRecords& rec, const WindowLedger::Spans& windows) {
  std::uint64_t t0 = UINT64_MAX;
  auto see = [&](std::uint64_t t) {
    if (t != 0 && t < t0) t0 = t;
  };
  for (const auto& op : rec.ops) see(op.start);
  for (const auto& u : rec.um) see(u.start);
  for (const auto& r : rec.ranges) see(r.start);
  for (const auto& a : rec.api_events) see(a.start);
  for (const auto& w : windows) see(w.second.first);
  return TraceClock{t0 == UINT64_MAX ? 0 : t0};
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

std::string demangle(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

std::string hex_colour(std::uint32_t argb) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%06X", argb & 0xFFFFFFu);
  return buf;
}

// =============================================================================================
// Host tracks
// =============================================================================================

// Profiler windows (always present, even without NVTX injection).
void add_windows(ChromeTrace& tr, const WindowLedger::Spans& windows, const TraceClock& clock,
                 std::uint64_t now_ns) {
  tr.set_thread_name(kHostPid, 0, "profiler windows");
  tr.set_thread_sort_index(kHostPid, 0, 0);
  for (const auto& [name, be] : windows) {
    std::uint64_t end = be.second == WindowLedger::kOpen ? std::max(now_ns, be.first) : be.second;
    tr.add_complete(name, "window", kHostPid, 0, clock.us(be.first), dur_us(be.first, end));
  }
}

// NVTX ranges of memstrat's domain on one track per thread; ranges of other domains on another,
// since push/pop only nest within one domain.
int nvtx_tid(std::uint32_t thread, bool ours) {
  int t = thread == 0 ? (1 << 24) - 1 : static_cast<int>(thread & 0x00FFFFFF);
  return ours ? t : t + 3 * (1 << 24);
}

// memstrat's ranges take their phase as category; colours go into args.
void add_nvtx_range(ChromeTrace& tr, const TraceRecords& rec, const TraceRecords::Range& r,
                    const TraceClock& clock) {
  const bool ours = r.domain == "memstrat";
  std::string cat = "nvtx";
  nlohmann::json args = {{"domain", r.domain.empty() ? "(default)" : r.domain}};
  auto info = rec.marker_info.find(r.id);
  if (info != rec.marker_info.end()) {
    std::uint32_t c = info->second.category;
    if (ours && c >= static_cast<std::uint32_t>(Phase::Run) &&
        c <= static_cast<std::uint32_t>(kLastPhase))
      cat = phase_name(static_cast<Phase>(c));
    if (info->second.has_colour) args["colour"] = hex_colour(info->second.colour);
  }
  const int tid = nvtx_tid(r.thread, ours);
  if (r.instant)
    tr.add_instant(r.name, cat, kHostPid, tid, clock.us(r.start), args);
  else
    tr.add_complete(r.name, cat, kHostPid, tid, clock.us(r.start), dur_us(r.start, r.end), args);
}

// Returns the next free thread sort index.
int add_nvtx_ranges(ChromeTrace& tr, const TraceRecords& rec, const TraceClock& clock) {
  std::set<std::pair<std::uint32_t, bool>> threads;  // (thread, memstrat's domain)
  for (const auto& r : rec.ranges) {
    threads.insert({r.thread, r.domain == "memstrat"});
    add_nvtx_range(tr, rec, r, clock);
  }
  int order = 1;
  for (const auto& [thread, ours] : threads) {
    const int tid = nvtx_tid(thread, ours);
    tr.set_thread_name(
        kHostPid, tid,
        "thread " + std::to_string(thread) + (ours ? " - NVTX" : " - NVTX (other domains)"));
    tr.set_thread_sort_index(kHostPid, tid, order++);
  }
  return order;
}

// CUDA API calls (memory, copies, hints, synchronisation) per host thread, sorted after the
// NVTX tracks from `order` on. Returns the prefetch calls (for placing their migrations).
std::vector<const ApiEvent*> add_api_calls(ChromeTrace& tr, const TraceRecords& rec,
                                           const TraceClock& clock, int order) {
  std::map<std::uint32_t, Lanes> lanes;  // by thread
  std::vector<const ApiEvent*> prefetches;
  for (const auto& a : rec.api_events) {
    const char* fn = api_slot_name(a.slot);
    std::string name = fn ? normalize_api_name(fn) : "cuda API";
    nlohmann::json args = nlohmann::json::object();
    if (a.prefetch) {
      args["bytes"] = a.bytes;
      if (a.stream != UINT32_MAX) args["stream"] = a.stream;
      prefetches.push_back(&a);
    }
    // One thread's calls never overlap; a second lane only guards against clock quirks.
    std::size_t lane = std::min<std::size_t>(lanes[a.thread].place(a.start, a.end), 15);
    const int tid = static_cast<int>((a.thread & 0x00FFFFFF) + kApiTidOffset + (lane << 26));
    tr.add_complete(name, "cuda_api", kHostPid, tid, clock.us(a.start), dur_us(a.start, a.end),
                    args.empty() ? nlohmann::json(nullptr) : args);
  }
  for (const auto& [thread, unused] : lanes) {
    (void)unused;
    const int tid = static_cast<int>((thread & 0x00FFFFFF) + kApiTidOffset);
    tr.set_thread_name(kHostPid, tid, "thread " + std::to_string(thread) + " - CUDA API");
    tr.set_thread_sort_index(kHostPid, tid, order++);
  }
  return prefetches;
}

// =============================================================================================
// GPU tracks
// =============================================================================================

// What the GPU events used, for naming their processes and tracks afterwards.
struct GpuTracks {
  std::set<std::uint32_t> devices;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> stream_lanes;  // -> lanes used
  std::map<std::pair<std::uint32_t, int>, std::string> um_track_names;          // (device, tid)
};

void add_kernel(ChromeTrace& tr, const GpuOp& op, const std::string& name, int tid,
                const TraceClock& clock) {
  auto triple = [](const std::int32_t v[3]) {
    return std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]);
  };
  nlohmann::json args = {{"stream", op.stream},
                         {"correlation", op.correlation},
                         {"grid", triple(op.grid)},
                         {"block", triple(op.block)}};
  tr.add_complete(name, "kernel", gpu_pid(op.device), tid, clock.us(op.start),
                  dur_us(op.start, op.end), std::move(args));
}

void add_memcpy(ChromeTrace& tr, const GpuOp& op, int tid, const TraceClock& clock) {
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
                  clock.us(op.start), d, std::move(args));
}

// Kernels, memcpys, memsets on their streams (sorts rec.ops by start).
void add_gpu_ops(ChromeTrace& tr, TraceRecords& rec, const TraceClock& clock, GpuTracks& gpu) {
  std::sort(rec.ops.begin(), rec.ops.end(),
            [](const GpuOp& a, const GpuOp& b) { return a.start < b.start; });
  std::map<std::pair<std::uint32_t, std::uint32_t>, Lanes> lanes;  // (device, stream)
  std::vector<std::string> demangled(rec.kernel_names.size());
  for (const auto& op : rec.ops) {
    const auto key = std::make_pair(op.device, op.stream);
    std::size_t lane = std::min<std::size_t>(lanes[key].place(op.start, op.end), 49);
    gpu.stream_lanes[key] = std::max(gpu.stream_lanes[key], lane + 1);
    gpu.devices.insert(op.device);
    const int tid = stream_tid(op.stream, lane);
    switch (op.kind) {
      case TraceRecords::OpKind::Kernel:
        if (demangled[op.name].empty()) demangled[op.name] = demangle(rec.kernel_names[op.name]);
        add_kernel(tr, op, demangled[op.name], tid, clock);
        break;
      case TraceRecords::OpKind::Memcpy:
        add_memcpy(tr, op, tid, clock);
        break;
      case TraceRecords::OpKind::Memset:
        tr.add_complete("Memset", "memset", gpu_pid(op.device), tid, clock.us(op.start),
                        dur_us(op.start, op.end), {{"bytes", op.bytes}, {"stream", op.stream}});
        break;
    }
  }
}

// The stream of the cudaMemPrefetchAsync that covers a migrated address: the latest prefetch
// that started before the migration and whose range holds the address (256 back at most).
class PrefetchIndex {
 public:
  explicit PrefetchIndex(std::vector<const ApiEvent*> prefetches) : p_(std::move(prefetches)) {
    std::sort(p_.begin(), p_.end(),
              [](const ApiEvent* a, const ApiEvent* b) { return a->start < b->start; });
  }
  std::uint32_t stream_of(const UmRecord& u) const {
    auto it = std::upper_bound(p_.begin(), p_.end(), u.start,
                               [](std::uint64_t t, const ApiEvent* a) { return t < a->start; });
    for (int back = 0; it != p_.begin() && back < 256; ++back) {
      --it;
      const ApiEvent* a = *it;
      if (u.address >= a->ptr && u.address < a->ptr + a->bytes) return a->stream;
    }
    return UINT32_MAX;
  }

 private:
  std::vector<const ApiEvent*> p_;
};

struct FaultBins {
  std::map<std::uint32_t, std::map<std::int64_t, std::uint64_t>> gpu;  // by device
  std::map<std::int64_t, std::uint64_t> cpu;
};

// Prefetch migrations go under the stream whose cudaMemPrefetchAsync covers the address; the
// rest on one HtoD and one DtoH track per device.
std::pair<int, std::string> migration_track(const UmRecord& u, bool htod, std::uint32_t dev,
                                            const PrefetchIndex& prefetches,
                                            const StreamNames& stream_names) {
  if (htod && u.flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER) {
    std::uint32_t s = prefetches.stream_of(u);
    if (s != UINT32_MAX)
      return {stream_tid(s, 50), stream_label(stream_names, dev, s) + " - prefetch migrations"};
  }
  return htod ? std::make_pair(kUmHtoDTid, std::string("UM migrations HtoD"))
              : std::make_pair(kUmDtoHTid, std::string("UM migrations DtoH"));
}

// Unified-memory migrations as slices, page faults into bins (sorts rec.um by start).
void add_um_records(ChromeTrace& tr, TraceRecords& rec, const TraceClock& clock,
                    const PrefetchIndex& prefetches, GpuTracks& gpu, FaultBins& faults) {
  std::sort(rec.um.begin(), rec.um.end(),
            [](const UmRecord& a, const UmRecord& b) { return a.start < b.start; });
  std::map<std::pair<std::uint32_t, int>, Lanes> lanes;  // (device, base tid)
  for (const auto& u : rec.um) {
    const auto bin = static_cast<std::int64_t>(clock.us(u.start) / kBinUs);
    if (u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT) {
      std::uint32_t dev = u.src < 1000 ? u.src : 0;
      gpu.devices.insert(dev);
      faults.gpu[dev][bin] += u.value ? u.value : 1;
      continue;
    }
    if (u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT) {
      faults.cpu[bin] += 1;
      continue;
    }
    const bool htod = u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
    const bool dtoh = u.kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH;
    if (!htod && !dtoh) continue;
    std::uint32_t dev = htod ? u.dst : u.src;
    if (dev >= 1000) dev = 0;  // CPU id on the other side
    gpu.devices.insert(dev);
    const auto [base_tid, track] = migration_track(u, htod, dev, prefetches, rec.stream_names);
    const auto key = std::make_pair(dev, base_tid);
    std::size_t lane = std::min<std::size_t>(lanes[key].place(u.start, u.end), 49);
    gpu.um_track_names[key] = track;
    const int tid = base_tid + static_cast<int>(lane);
    if (lane > 0) gpu.um_track_names[{dev, tid}] = track + " (" + std::to_string(lane + 1) + ")";
    tr.add_complete(
        htod ? "UM HtoD" : "UM DtoH", "um_migration", gpu_pid(dev), tid, clock.us(u.start),
        dur_us(u.start, u.end),
        {{"bytes", u.value}, {"cause", migration_cause_name(u.flags)}, {"address", u.address}});
  }
}

void name_gpu_tracks(ChromeTrace& tr, const GpuTracks& gpu, const StreamNames& stream_names) {
  for (std::uint32_t dev : gpu.devices) {
    tr.set_process_name(gpu_pid(dev), "GPU " + std::to_string(dev));
    tr.set_process_sort_index(gpu_pid(dev), 1 + static_cast<int>(dev));
  }
  for (const auto& [key, n] : gpu.stream_lanes) {
    const std::string base = stream_label(stream_names, key.first, key.second);
    for (std::size_t lane = 0; lane < n; ++lane) {
      const int tid = stream_tid(key.second, lane);
      tr.set_thread_name(gpu_pid(key.first), tid,
                         lane == 0 ? base : base + " (" + std::to_string(lane + 1) + ")");
      tr.set_thread_sort_index(gpu_pid(key.first), tid, tid);
    }
  }
  for (const auto& [key, name] : gpu.um_track_names) {
    tr.set_thread_name(gpu_pid(key.first), key.second, name);
    if (key.second < kUmHtoDTid)
      tr.set_thread_sort_index(gpu_pid(key.first), key.second, key.second);
  }
}

// Page faults as counters: faults per bin, and 0 after each run of consecutive bins.
void add_fault_counters(ChromeTrace& tr, const FaultBins& faults) {
  auto emit = [&](int pid, const std::string& name,
                  const std::map<std::int64_t, std::uint64_t>& bins) {
    for (auto it = bins.begin(); it != bins.end(); ++it) {
      tr.add_counter(name, pid, static_cast<double>(it->first) * kBinUs, {{"faults", it->second}});
      auto next = std::next(it);
      if (next == bins.end() || next->first != it->first + 1)
        tr.add_counter(name, pid, static_cast<double>(it->first + 1) * kBinUs, {{"faults", 0}});
    }
  };
  for (const auto& [dev, bins] : faults.gpu)
    emit(gpu_pid(dev), "UM GPU page faults per 100 us", bins);
  emit(kHostPid, "UM CPU page faults per 100 us", faults.cpu);
}

}  // namespace

nlohmann::json export_trace(ChromeTrace& tr, TraceRecords& records,
                            const WindowLedger::Spans& windows, std::uint64_t now_ns,
                            std::uint64_t cupti_dropped) {
  const TraceClock clock = trace_clock(records, windows);
  tr.set_process_name(kHostPid, "host: memstrat (pid " + std::to_string(::getpid()) + ")");
  tr.set_process_sort_index(kHostPid, 0);
  add_windows(tr, windows, clock, now_ns);
  const int order = add_nvtx_ranges(tr, records, clock);
  const PrefetchIndex prefetches(add_api_calls(tr, records, clock, order));
  GpuTracks gpu;
  add_gpu_ops(tr, records, clock, gpu);
  FaultBins faults;
  add_um_records(tr, records, clock, prefetches, gpu, faults);
  name_gpu_tracks(tr, gpu, records.stream_names);
  add_fault_counters(tr, faults);

  nlohmann::json other;
  other["generator"] = "memstrat CuptiProfiler";
  other["clock"] = "CUPTI timestamps; ts 0 = " + std::to_string(clock.t0) + " ns";
  other["nvtx_ranges"] = records.ranges.size();
  other["trace_records_dropped"] = records.dropped;
  other["cupti_records_dropped"] = cupti_dropped;
  return other;
}

}  // namespace memstrat
