// gpu_monitor.h: GpuMonitor, what NVML (common/nvml.h) says about the GPU a run uses: its clocks,
// the reasons they are below their maximum, temperature and power at a moment (GpuState; the
// record's env at the start of a run and its env_end at the end), and what does not move during
// a run (GpuLimits: maximum clocks, the PCIe link, persistence mode). Without NVML, or for a GPU
// NVML does not list, every reading is empty and note() says why.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/nvml.h"

namespace memstrat {

/// A GPU's clocks and state at one moment.
struct GpuState {
  std::optional<int> sm_clock_mhz, mem_clock_mhz;
  std::optional<std::vector<std::string>> clock_event_reasons;  // clock_event_reason_names
  std::optional<int> temperature_c;
  std::optional<double> power_w;
  /// Flat: sm_clock_mhz, mem_clock_mhz, clock_event_reasons, temperature_c, power_w (null when
  /// not read). The keys of the record's env_end, and part of its env.
  nlohmann::json to_json() const;
};

/// What NVML says that does not change during a run.
struct GpuLimits {
  std::optional<int> sm_clock_max_mhz, mem_clock_max_mhz;
  std::optional<int> pcie_gen, pcie_width;          // the link now
  std::optional<int> pcie_max_gen, pcie_max_width;  // the fastest the GPU and its slot allow
  std::optional<bool> persistence_mode;
};

/// cudaDeviceGetPCIBusId of CUDA device `device` ("0000:41:00.0"); "" when the runtime does not
/// give one.
std::string cuda_pci_bus_id(int device);

class GpuMonitor {
 public:
  /// The GPU at `pci_bus_id` (cudaDeviceGetPCIBusId's form), through NVML loaded from `library`
  /// (a parameter so that tests can name one that does not exist).
  explicit GpuMonitor(const std::string& pci_bus_id, const std::string& library = kNvmlLibrary);
  /// CUDA device `device` (cuda_pci_bus_id).
  static GpuMonitor for_device(int device) { return GpuMonitor(cuda_pci_bus_id(device)); }

  GpuState state();
  GpuLimits limits();
  /// Why readings are empty: NVML as a whole ("cannot load libnvidia-ml.so.1 ..."), or the
  /// queries this GPU did not answer ("power_w: Not Supported"); "" when every query answered.
  std::string note() const;

 private:
  template <typename T>
  std::optional<T> keep(NvmlValue<T> v, const char* key);

  Nvml nvml_;
  NvmlDevice device_ = nullptr;
  std::string unavailable_;         // NVML or the GPU is not there: nothing was read
  std::vector<std::string> gaps_;   // single queries that failed, once each
};

}  // namespace memstrat
