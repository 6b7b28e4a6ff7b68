// activity.h: what the profiler keeps of CUPTI activity records. ActivityRecords consumes the
// buffers CUPTI completes: every record is counted into its window (WindowLedger, by start
// timestamp) and, when tracing, kept in TraceRecords (kernels, memcpys, memsets, unified-memory
// records, NVTX ranges, stream names, the API calls drawn in the trace) for the trace export.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/profiler/window_ledger.h"

namespace memstrat {

/// The trace keeps at most this many records (ops + unified-memory records + NVTX ranges +
/// API calls); later ones are counted as dropped.
constexpr std::size_t kMaxTraceRecords = 4'000'000;

/// Everything the trace is drawn from (kept only when tracing). Plain data: ActivityRecords
/// guards it with its mutex.
struct TraceRecords {
  enum class OpKind : std::uint8_t { Kernel, Memcpy, Memset };
  struct GpuOp {
    std::uint64_t start, end, bytes;
    std::uint32_t device, stream, correlation, name;  // name: kernel name id
    OpKind kind;
    std::uint8_t copy_kind, src_kind, dst_kind, flags;
    std::int32_t grid[3], block[3];
  };
  struct UmRecord {
    std::uint64_t start, end, address, value;
    std::uint32_t kind, flags, src, dst;
  };
  struct Range {  // an NVTX range or instant marker
    std::uint64_t start, end;
    std::uint32_t thread, id;
    std::string name, domain;
    bool instant;
  };
  struct MarkerInfo {
    std::uint32_t category = 0, colour = 0;
    bool has_colour = false;
  };
  struct ApiEvent {  // one CUDA API call drawn in the trace
    std::uint64_t start, end, ptr, bytes;
    std::uint32_t slot, thread, stream;  // stream: CUPTI stream id or UINT32_MAX
    bool prefetch;
  };

  std::vector<GpuOp> ops;
  std::vector<UmRecord> um;
  std::vector<Range> ranges;
  std::unordered_map<std::uint32_t, Range> open_ranges;  // started, not yet ended
  std::unordered_map<std::uint32_t, MarkerInfo> marker_info;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> stream_names;  // (device, stream)
  std::vector<ApiEvent> api_events;
  std::vector<std::string> kernel_names;
  std::unordered_map<std::string, std::uint32_t> kernel_name_ids;
  std::uint64_t dropped = 0;         // records beyond kMaxTraceRecords
  std::uint64_t marker_records = 0;  // NVTX marker records seen (0: NVTX did not reach CUPTI)

  /// Whether one more record fits; counts it as dropped when not.
  bool room();
  /// Id of `name` in kernel_names (added on first use).
  std::uint32_t kernel_name_id(const char* name);
};

/// Receives the activity records of one profiler. Thread-safe: CUPTI delivers buffers on its
/// own threads while the program's thread reads the ledger and writes the trace.
class ActivityRecords {
 public:
  /// Counts into `ledger`; keeps trace records only when `trace`.
  ActivityRecords(WindowLedger& ledger, bool trace) : ledger_(ledger), trace_(trace) {}

  /// Consumes every record of a completed CUPTI buffer. Never throws (it runs inside CUPTI).
  void consume_buffer(std::uint8_t* buffer, std::size_t valid) noexcept;
  /// Consumes one record.
  void consume(const CUpti_Activity* rec);
  /// Keeps one API call for the trace (from the API callback).
  void add_api_event(const TraceRecords::ApiEvent& ev);

  /// Runs f(TraceRecords&) under the records' lock and returns its result.
  template <class F>
  auto with_records(F&& f) {
    std::lock_guard<std::mutex> lk(mu_);
    return f(data_);
  }

 private:
  void on_kernel(const CUpti_ActivityKernel10& k);
  void on_memcpy(const CUpti_ActivityMemcpy6& m);
  void on_memset(const CUpti_ActivityMemset4& m);
  void on_um_counter(const CUpti_ActivityUnifiedMemoryCounter3& u);
  void on_marker(const CUpti_ActivityMarker2& m);
  void on_marker_data(const CUpti_ActivityMarkerData2& d);
  void on_name(const CUpti_ActivityName& n);
  // Keeps a kernel, memcpy or memset (kernel_name: a kernel's name, interned here).
  void keep_op(TraceRecords::GpuOp op, const char* kernel_name = nullptr);

  WindowLedger& ledger_;
  const bool trace_;
  std::mutex mu_;
  TraceRecords data_;
};

/// Names of record fields, as the trace shows them.
const char* memcpy_kind_name(std::uint8_t kind);        // "HtoD", "DtoH", ...
const char* memory_kind_name(std::uint8_t kind);        // "pageable", "pinned", ...
const char* migration_cause_name(std::uint32_t flags);  // "prefetch", "coherence (fault)", ...

}  // namespace memstrat
