#include "common/nvml.h"

#include <dlfcn.h>

#include <cstdio>
#include <memory>

// NVML's ABI, written out rather than taken from nvml.h: the header is not part of every CUDA
// toolkit, and the binary must build where it is missing. The values are NVML's (nvml.h,
// stable since NVML 2.285): nvmlReturn_t and the enum arguments are ints, NVML_SUCCESS is 0,
// NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2, NVML_TEMPERATURE_GPU 0, NVML_FEATURE_ENABLED 1.
#if __has_include(<nvml.h>)
#include <nvml.h>
static_assert(NVML_SUCCESS == 0 && NVML_CLOCK_SM == 1 && NVML_CLOCK_MEM == 2 &&
                  NVML_TEMPERATURE_GPU == 0 && NVML_FEATURE_ENABLED == 1,
              "common/nvml.cpp's copy of NVML's constants disagrees with nvml.h");
static_assert(sizeof(nvmlReturn_t) == sizeof(int) && sizeof(nvmlEnableState_t) == sizeof(int),
              "NVML's enums are not int-sized");
#endif

namespace memstrat {

namespace {
using Ret = int;  // nvmlReturn_t
constexpr Ret kSuccess = 0;
constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0, kFeatureEnabled = 1;

// Bit -> name, in bit order (nvmlClocksEventReason* / nvmlClocksThrottleReason*).
constexpr struct {
  unsigned long long bit;
  const char* name;
} kReasons[] = {
    {0x1ull, "gpu_idle"},         {0x2ull, "applications_clocks_setting"},
    {0x4ull, "sw_power_cap"},     {0x8ull, "hw_slowdown"},
    {0x10ull, "sync_boost"},      {0x20ull, "sw_thermal"},
    {0x40ull, "hw_thermal"},      {0x80ull, "hw_power_brake"},
    {0x100ull, "display_clock_setting"},
};

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}
}  // namespace

std::vector<std::string> clock_event_reason_names(unsigned long long mask) {
  std::vector<std::string> names;
  for (int b = 0; b < 64; ++b) {
    const unsigned long long bit = 1ull << b;
    if (!(mask & bit)) continue;
    const char* known = nullptr;
    for (const auto& r : kReasons)
      if (r.bit == bit) known = r.name;
    if (known) {
      names.emplace_back(known);
    } else {
      char hex[24];
      std::snprintf(hex, sizeof hex, "0x%llx", bit);
      names.emplace_back(hex);
    }
  }
  return names;
}

// Each pointer is null when the library lacks the symbol; a query then says so.
struct Nvml::Api {
  Ret (*init)() = nullptr;
  Ret (*shutdown)() = nullptr;
  const char* (*error_string)(Ret) = nullptr;
  Ret (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  Ret (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  Ret (*max_clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  Ret (*clock_event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  Ret (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  Ret (*power_usage)(NvmlDevice, unsigned*) = nullptr;
  Ret (*link[4])(NvmlDevice, unsigned*) = {nullptr, nullptr, nullptr, nullptr};  // by Link
  Ret (*persistence_mode)(NvmlDevice, int*) = nullptr;
};

namespace {
// Link -> entry point, in the order of Nvml::Link.
constexpr const char* kLinkSymbols[] = {
    "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth"};
}  // namespace

Nvml::Nvml(const std::string& library) : api_(std::make_unique<Api>()) {
  // RTLD_LOCAL: NVML's symbols stay out of the global namespace of the process.
  lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    const char* e = dlerror();
    reason_ = "cannot load " + library + " (no NVIDIA driver on this machine?): " +
              (e ? e : "unknown dlopen error");
    return;
  }
  Api& a = *api_;
  a.init = symbol<decltype(a.init)>(lib_, "nvmlInit_v2");
  a.shutdown = symbol<decltype(a.shutdown)>(lib_, "nvmlShutdown");
  a.error_string = symbol<decltype(a.error_string)>(lib_, "nvmlErrorString");
  a.handle_by_pci_bus_id = symbol<decltype(a.handle_by_pci_bus_id)>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  a.clock_info = symbol<decltype(a.clock_info)>(lib_, "nvmlDeviceGetClockInfo");
  a.max_clock_info = symbol<decltype(a.max_clock_info)>(lib_, "nvmlDeviceGetMaxClockInfo");
  // Renamed in NVML 12.535 ("throttle" -> "clocks event"); older drivers have only the old name.
  a.clock_event_reasons =
      symbol<decltype(a.clock_event_reasons)>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!a.clock_event_reasons)
    a.clock_event_reasons =
        symbol<decltype(a.clock_event_reasons)>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  a.temperature = symbol<decltype(a.temperature)>(lib_, "nvmlDeviceGetTemperature");
  a.power_usage = symbol<decltype(a.power_usage)>(lib_, "nvmlDeviceGetPowerUsage");
  for (int i = 0; i < 4; ++i) a.link[i] = symbol<Ret (*)(NvmlDevice, unsigned*)>(lib_, kLinkSymbols[i]);
  a.persistence_mode = symbol<decltype(a.persistence_mode)>(lib_, "nvmlDeviceGetPersistenceMode");
  if (!a.init || !a.shutdown || !a.handle_by_pci_bus_id) {
    reason_ = library + " lacks nvmlInit_v2, nvmlShutdown or nvmlDeviceGetHandleByPciBusId_v2";
    return;
  }
  const Ret r = a.init();
  if (r != kSuccess) {
    reason_ = "nvmlInit_v2 failed: " + std::string(a.error_string ? a.error_string(r) : "") +
              " (error " + std::to_string(r) + ")";
    return;
  }
  initialised_ = true;
}

Nvml::~Nvml() {
  if (initialised_) api_->shutdown();
  if (lib_) dlclose(lib_);
}

template <typename T, typename Fn, typename... Args>
NvmlValue<T> Nvml::query(Fn fn, const char* name, Args... args) const {
  NvmlValue<T> v;
  if (!initialised_) {
    v.error = reason_;
    return v;
  }
  if (!fn) {
    v.error = std::string("this driver's NVML has no ") + name;
    return v;
  }
  T out{};
  const Ret r = fn(args..., &out);
  if (r == kSuccess)
    v.value = out;
  else
    v.error = api_->error_string ? api_->error_string(r) : "NVML error " + std::to_string(r);
  return v;
}

NvmlValue<NvmlDevice> Nvml::device_by_pci_bus_id(const std::string& bus_id) const {
  NvmlValue<NvmlDevice> v =
      query<NvmlDevice>(api_->handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2", bus_id.c_str());
  if (!v.value && initialised_) v.error = "no GPU at PCI bus id " + bus_id + ": " + v.error;
  return v;
}

NvmlValue<unsigned> Nvml::clock_mhz(NvmlDevice d, Clock which, bool max) const {
  const int type = which == Clock::Sm ? kClockSm : kClockMem;
  if (max) return query<unsigned>(api_->max_clock_info, "nvmlDeviceGetMaxClockInfo", d, type);
  return query<unsigned>(api_->clock_info, "nvmlDeviceGetClockInfo", d, type);
}

NvmlValue<unsigned long long> Nvml::clock_event_reasons(NvmlDevice d) const {
  return query<unsigned long long>(api_->clock_event_reasons,
                                   "nvmlDeviceGetCurrentClocksEventReasons (or ...ThrottleReasons)", d);
}

NvmlValue<unsigned> Nvml::temperature_c(NvmlDevice d) const {
  return query<unsigned>(api_->temperature, "nvmlDeviceGetTemperature", d,
                         kTemperatureGpu);
}

NvmlValue<unsigned> Nvml::power_mw(NvmlDevice d) const {
  return query<unsigned>(api_->power_usage, "nvmlDeviceGetPowerUsage", d);
}

NvmlValue<unsigned> Nvml::pcie_link(NvmlDevice d, Link which) const {
  const int i = static_cast<int>(which);
  return query<unsigned>(api_->link[i], kLinkSymbols[i], d);
}

NvmlValue<bool> Nvml::persistence_mode(NvmlDevice d) const {
  const NvmlValue<int> m =
      query<int>(api_->persistence_mode, "nvmlDeviceGetPersistenceMode", d);
  NvmlValue<bool> v;
  v.error = m.error;
  if (m.value) v.value = *m.value == kFeatureEnabled;
  return v;
}

}  // namespace memstrat
