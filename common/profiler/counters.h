// counters.h: what the built-in profiler measures in one window: ApiCounts (CUDA API calls by
// name), WindowCounters (API calls, unified-memory counters, kernel/memcpy time) and
// ActivityCounter (the activity-API counters that a window sums).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace memstrat {

/// CUDA API function name (normalised, see normalize_api_name) -> number of calls.
struct ApiCounts {
  std::map<std::string, std::uint64_t> calls;
  /// Calls of `name`; 0 when absent.
  std::uint64_t count(std::string_view name) const;
  /// Calls of all functions.
  std::uint64_t total() const;
};

/// One window = set-up, or one epoch. std::nullopt / api_available == false means "not
/// measured" (profiler off, counter not supported by the device, not enabled for the whole
/// window), never "zero".
struct WindowCounters {
  ApiCounts api;  // empty map and api_available = false when profiling is off
  bool api_available = false;
  std::optional<std::uint64_t> um_htod_bytes, um_dtoh_bytes, um_gpu_faults, um_cpu_faults;
  std::optional<double> kernel_ms, memcpy_ms;  // summed activity durations in the window
};

/// The counters of the activity API that a window carries.
enum class ActivityCounter : int {
  KernelTime = 0,  // value: ns of one kernel
  MemcpyTime,      // value: ns of one memcpy
  UmHtoDBytes,     // value: bytes of one host->device unified-memory migration
  UmDtoHBytes,     // value: bytes of one device->host migration
  UmGpuFaults,     // value: GPU page-fault groups in one record
  UmCpuFaults,     // value: 1 per CPU page-fault record
  Count
};

}  // namespace memstrat
