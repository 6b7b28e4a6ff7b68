#include "common/gpu_monitor.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "common/json_optional.h"

namespace memstrat {

std::string cuda_pci_bus_id(int device) {
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the next CUDA_CHECK
    return "";
  }
  return bus;
}

nlohmann::json GpuState::to_json() const {
  return {{"sm_clock_mhz", or_null(sm_clock_mhz)},
          {"mem_clock_mhz", or_null(mem_clock_mhz)},
          {"clock_event_reasons", or_null(clock_event_reasons)},
          {"temperature_c", or_null(temperature_c)},
          {"power_w", or_null(power_w)}};
}

GpuMonitor::GpuMonitor(const std::string& pci_bus_id, const std::string& library)
    : nvml_(library) {
  if (!nvml_.available()) {
    unavailable_ = nvml_.unavailable_reason();
  } else if (pci_bus_id.empty()) {
    unavailable_ = "the CUDA runtime gave no PCI bus id for the device";
  } else {
    const NvmlValue<NvmlDevice> d = nvml_.device_by_pci_bus_id(pci_bus_id);
    if (d.value) device_ = *d.value;
    else unavailable_ = d.error;
  }
}

template <typename T>
std::optional<T> GpuMonitor::keep(NvmlValue<T> v, const char* key) {
  if (!v.value && unavailable_.empty()) {
    const std::string gap = std::string(key) + ": " + v.error;
    if (std::find(gaps_.begin(), gaps_.end(), gap) == gaps_.end()) gaps_.push_back(gap);
  }
  return v.value;
}

namespace {
template <typename T>
std::optional<int> as_int(const std::optional<T>& v) {
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}
}  // namespace

GpuState GpuMonitor::state() {
  GpuState s;
  if (!unavailable_.empty()) return s;
  s.sm_clock_mhz = as_int(keep(nvml_.clock_mhz(device_, Nvml::Clock::Sm, false), "sm_clock_mhz"));
  s.mem_clock_mhz = as_int(keep(nvml_.clock_mhz(device_, Nvml::Clock::Memory, false), "mem_clock_mhz"));
  if (const auto mask = keep(nvml_.clock_event_reasons(device_), "clock_event_reasons"))
    s.clock_event_reasons = clock_event_reason_names(*mask);
  s.temperature_c = as_int(keep(nvml_.temperature_c(device_), "temperature_c"));
  if (const auto mw = keep(nvml_.power_mw(device_), "power_w")) s.power_w = *mw / 1000.0;
  return s;
}

GpuLimits GpuMonitor::limits() {
  GpuLimits l;
  if (!unavailable_.empty()) return l;
  using L = Nvml::Link;
  l.sm_clock_max_mhz = as_int(keep(nvml_.clock_mhz(device_, Nvml::Clock::Sm, true), "sm_clock_max_mhz"));
  l.mem_clock_max_mhz =
      as_int(keep(nvml_.clock_mhz(device_, Nvml::Clock::Memory, true), "mem_clock_max_mhz"));
  l.pcie_gen = as_int(keep(nvml_.pcie_link(device_, L::Gen), "pcie_gen"));
  l.pcie_width = as_int(keep(nvml_.pcie_link(device_, L::Width), "pcie_width"));
  l.pcie_max_gen = as_int(keep(nvml_.pcie_link(device_, L::MaxGen), "pcie_max_gen"));
  l.pcie_max_width = as_int(keep(nvml_.pcie_link(device_, L::MaxWidth), "pcie_max_width"));
  l.persistence_mode = keep(nvml_.persistence_mode(device_), "persistence_mode");
  return l;
}

std::string GpuMonitor::note() const {
  if (!unavailable_.empty()) return "NVML: " + unavailable_;
  if (gaps_.empty()) return "";
  std::string n = "NVML did not give";
  for (std::size_t i = 0; i < gaps_.size(); ++i) n += (i ? "; " : " ") + gaps_[i];
  return n;
}

}  // namespace memstrat
