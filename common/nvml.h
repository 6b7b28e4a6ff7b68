// nvml.h: Nvml, the NVIDIA Management Library opened at run time (dlopen), never linked: the
// binary must start, and its CPU paths run, on a machine without the NVIDIA driver. One object is
// one nvmlInit/nvmlShutdown pair over the few entry points a record's environment reads (clocks,
// clock-event reasons, temperature, power, PCIe link, persistence mode). Nothing here throws:
// a missing library, symbol or GPU, or a query the GPU does not support, is an empty value with
// NVML's reason, because a record without clocks is still a record.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memstrat {

/// The soname the driver installs (the unversioned name needs the -dev package).
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

/// NVML's device handle (the same opaque type nvml.h declares).
using NvmlDevice = struct nvmlDevice_st*;

/// Names of the clock-event (formerly "throttle") reason bits set in `mask`, lowest bit first:
/// gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, sync_boost, sw_thermal,
/// hw_thermal, hw_power_brake, display_clock_setting; a bit this list does not know appears as
/// its hex value ("0x200") rather than disappearing.
std::vector<std::string> clock_event_reason_names(unsigned long long mask);

/// A value NVML gave, or why not (NVML's error string, or the missing entry point).
template <typename T>
struct NvmlValue {
  std::optional<T> value;
  std::string error;  // empty when value is set
};

class Nvml {
 public:
  enum class Clock { Sm, Memory };
  enum class Link { Gen, Width, MaxGen, MaxWidth };

  /// Loads `library` (a parameter so that tests can point it at a name that does not exist)
  /// and initialises NVML; on any failure available() is false and unavailable_reason() says
  /// which step failed.
  explicit Nvml(const std::string& library = kNvmlLibrary);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return initialised_; }
  const std::string& unavailable_reason() const { return reason_; }

  /// The GPU at this PCI bus id, in cudaDeviceGetPCIBusId's form ("0000:41:00.0").
  NvmlValue<NvmlDevice> device_by_pci_bus_id(const std::string& bus_id) const;

  /// The current clock (max = false) or the highest it may run at (max = true), MHz.
  NvmlValue<unsigned> clock_mhz(NvmlDevice d, Clock which, bool max) const;
  /// Bit mask of why the clocks are below their maximum now (clock_event_reason_names).
  NvmlValue<unsigned long long> clock_event_reasons(NvmlDevice d) const;
  NvmlValue<unsigned> temperature_c(NvmlDevice d) const;
  NvmlValue<unsigned> power_mw(NvmlDevice d) const;
  /// Current generation / lanes of the PCIe link, or the highest the GPU and its slot allow.
  NvmlValue<unsigned> pcie_link(NvmlDevice d, Link which) const;
  NvmlValue<bool> persistence_mode(NvmlDevice d) const;

 private:
  struct Api;  // the resolved entry points (nvml.cpp)
  template <typename T, typename Fn, typename... Args>
  NvmlValue<T> query(Fn fn, const char* symbol, Args... args) const;

  void* lib_ = nullptr;
  std::unique_ptr<Api> api_;  // always set; its pointers null where not resolved
  bool initialised_ = false;
  std::string reason_;
};

}  // namespace memstrat
