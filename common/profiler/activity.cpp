#include "common/profiler/activity.h"

#include <algorithm>

namespace memstrat {

// =============================================================================================
// TraceRecords
// =============================================================================================

bool TraceRecords::room() {
  std::size_t n = ops.size() + um.size() + ranges.size() + api_events.size();
  if (n < kMaxTraceRecords) return true;
  ++dropped;
  return false;
}

std::uint32_t TraceRecords::kernel_name_id(const char* name) {
  std::string n = name ? name : "(unnamed kernel)";
  auto it = kernel_name_ids.find(n);
  if (it != kernel_name_ids.end()) return it->second;
  auto id = static_cast<std::uint32_t>(kernel_names.size());
  kernel_names.push_back(n);
  kernel_name_ids.emplace(std::move(n), id);
  return id;
}

// =============================================================================================
// ActivityRecords
// =============================================================================================

void ActivityRecords::consume_buffer(std::uint8_t* buffer, std::size_t valid) noexcept {
  try {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) consume(rec);
  } catch (...) {
    // Never let an exception cross into CUPTI; the window simply misses the record.
  }
}

void ActivityRecords::consume(const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      on_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(rec));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      on_memcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      on_memset(*reinterpret_cast<const CUpti_ActivityMemset4*>(rec));
      break;
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
      on_um_counter(*reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(rec));
      break;
    case CUPTI_ACTIVITY_KIND_MARKER:
      on_marker(*reinterpret_cast<const CUpti_ActivityMarker2*>(rec));
      break;
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      on_marker_data(*reinterpret_cast<const CUpti_ActivityMarkerData2*>(rec));
      break;
    case CUPTI_ACTIVITY_KIND_NAME:
      on_name(*reinterpret_cast<const CUpti_ActivityName*>(rec));
      break;
    default:
      break;
  }
}

void ActivityRecords::add_api_event(const TraceRecords::ApiEvent& ev) {
  std::lock_guard<std::mutex> lk(mu_);
  if (data_.room()) data_.api_events.push_back(ev);
}

// Kernel names are interned only for ops that fit, under the lock (the name table is shared).
void ActivityRecords::keep_op(TraceRecords::GpuOp op, const char* kernel_name) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!data_.room()) return;
  if (op.kind == TraceRecords::OpKind::Kernel) op.name = data_.kernel_name_id(kernel_name);
  data_.ops.push_back(op);
}

namespace {

// Kernel, memcpy and memset records share these fields.
template <class Record>
std::uint64_t duration(const Record& r) {
  return r.end > r.start ? r.end - r.start : 0;
}

template <class Record>
TraceRecords::GpuOp gpu_op(const Record& r, TraceRecords::OpKind kind) {
  TraceRecords::GpuOp op{};
  op.start = r.start;
  op.end = std::max(r.end, r.start);
  op.device = r.deviceId;
  op.stream = r.streamId;
  op.correlation = r.correlationId;
  op.kind = kind;
  return op;
}

}  // namespace

void ActivityRecords::on_kernel(const CUpti_ActivityKernel10& k) {
  ledger_.add(ActivityCounter::KernelTime, k.start, duration(k));
  if (!trace_ || k.start == 0) return;
  TraceRecords::GpuOp op = gpu_op(k, TraceRecords::OpKind::Kernel);
  op.grid[0] = k.gridX, op.grid[1] = k.gridY, op.grid[2] = k.gridZ;
  op.block[0] = k.blockX, op.block[1] = k.blockY, op.block[2] = k.blockZ;
  keep_op(op, k.name);
}

void ActivityRecords::on_memcpy(const CUpti_ActivityMemcpy6& m) {
  ledger_.add(ActivityCounter::MemcpyTime, m.start, duration(m));
  if (!trace_ || m.start == 0) return;
  TraceRecords::GpuOp op = gpu_op(m, TraceRecords::OpKind::Memcpy);
  op.bytes = m.bytes;
  op.copy_kind = m.copyKind;
  op.src_kind = m.srcKind;
  op.dst_kind = m.dstKind;
  op.flags = m.flags;
  keep_op(op);
}

void ActivityRecords::on_memset(const CUpti_ActivityMemset4& m) {
  if (!trace_ || m.start == 0) return;
  TraceRecords::GpuOp op = gpu_op(m, TraceRecords::OpKind::Memset);
  op.bytes = m.bytes;
  keep_op(op);
}

void ActivityRecords::on_um_counter(const CUpti_ActivityUnifiedMemoryCounter3& u) {
  switch (u.counterKind) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
      ledger_.add(ActivityCounter::UmHtoDBytes, u.start, u.value);
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
      ledger_.add(ActivityCounter::UmDtoHBytes, u.start, u.value);
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
      // value = number of fault groups for the page (at least one per record).
      ledger_.add(ActivityCounter::UmGpuFaults, u.start, u.value ? u.value : 1);
      break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
      // value is the faulting instruction's PC: one fault per record.
      ledger_.add(ActivityCounter::UmCpuFaults, u.start, 1);
      break;
    default:
      break;
  }
  if (!trace_ || u.start == 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (!data_.room()) return;
  data_.um.push_back(TraceRecords::UmRecord{u.start, std::max(u.end, u.start), u.address, u.value,
                                            static_cast<std::uint32_t>(u.counterKind), u.flags,
                                            u.srcId, u.dstId});
}

// NVTX push/pop and start/end arrive as two records sharing an id; instant markers as one.
void ActivityRecords::on_marker(const CUpti_ActivityMarker2& m) {
  std::lock_guard<std::mutex> lk(mu_);
  ++data_.marker_records;
  std::uint32_t thread = m.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m.objectId.pt.threadId : 0;
  const unsigned flags = static_cast<unsigned>(m.flags);
  if (flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
    TraceRecords::Range r{m.timestamp, m.timestamp,          thread,
                          m.id,        m.name ? m.name : "", m.domain ? m.domain : "",
                          false};
    data_.open_ranges[m.id] = std::move(r);
  } else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
    auto it = data_.open_ranges.find(m.id);
    if (it != data_.open_ranges.end()) {
      TraceRecords::Range r = std::move(it->second);
      data_.open_ranges.erase(it);
      r.end = std::max(m.timestamp, r.start);
      if (data_.room()) data_.ranges.push_back(std::move(r));
    }
  } else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
    if (data_.room())
      data_.ranges.push_back(TraceRecords::Range{m.timestamp, m.timestamp, thread, m.id,
                                                 m.name ? m.name : "", m.domain ? m.domain : "",
                                                 true});
  }
}

void ActivityRecords::on_marker_data(const CUpti_ActivityMarkerData2& d) {
  std::lock_guard<std::mutex> lk(mu_);
  TraceRecords::MarkerInfo& info = data_.marker_info[d.id];
  info.category = d.category;
  info.colour = d.color;
  info.has_colour = (static_cast<unsigned>(d.flags) & CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB) != 0;
}

void ActivityRecords::on_name(const CUpti_ActivityName& n) {
  if (n.objectKind != CUPTI_ACTIVITY_OBJECT_STREAM || n.name == nullptr) return;
  std::lock_guard<std::mutex> lk(mu_);
  data_.stream_names[{n.objectId.dcs.deviceId, n.objectId.dcs.streamId}] = n.name;
}

// =============================================================================================
// Field names
// =============================================================================================

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

}  // namespace memstrat
