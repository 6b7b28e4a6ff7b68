#include "common/run_record.h"

#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <stdexcept>

#include "common/build_info.h"
#include "common/cuda_check.h"
#include "common/json_optional.h"

namespace memstrat {

namespace {
// Fill the GPU's PCIe link and NUMA node from sysfs, the rest from NVML. pcie_gen/pcie_width
// keep their source (sysfs, the link as trained now) and fall back to NVML's current link where
// sysfs does not expose it; the maximum is NVML's only.
void add_link_and_nvml(GpuEnvironment& gpu, const std::string& bus_id, GpuMonitor& monitor) {
  if (!bus_id.empty()) {
    const PciLink link = pci_current_link(bus_id);
    gpu.pcie_gen = link.gen;
    gpu.pcie_width = link.width;
    gpu.numa_node = pci_numa_node(bus_id);
  }
  gpu.start = monitor.state();
  const GpuLimits l = monitor.limits();
  if (!gpu.pcie_gen) gpu.pcie_gen = l.pcie_gen;
  if (!gpu.pcie_width) gpu.pcie_width = l.pcie_width;
  gpu.pcie_max_gen = l.pcie_max_gen;
  gpu.pcie_max_width = l.pcie_max_width;
  gpu.sm_clock_max_mhz = l.sm_clock_max_mhz;
  gpu.mem_clock_max_mhz = l.mem_clock_max_mhz;
  gpu.persistence_mode = l.persistence_mode;
  if (const std::string note = monitor.note(); !note.empty()) gpu.nvml_note = note;
}
}  // namespace

nlohmann::json Environment::to_json() const {
  nlohmann::json env;
  env["host"] = host;
  env["boot_id"] = or_null(boot_id);
  env["git_sha"] = git_sha;
  env["git_dirty"] = git_dirty;
  env["memstrat_version"] = memstrat_version;
  env["cpu_model"] = or_null(hardware.cpu_model);
  env["cpu_count"] = or_null(hardware.cpu_count);
  env["cpu_affinity"] = or_null(hardware.cpu_affinity);
  env["cpu_affinity_count"] = or_null(hardware.cpu_affinity_count);
  env["host_memory_bytes"] = or_null(hardware.memory_bytes);
  if (nccl) env["nccl"] = {{"version", nccl->version}, {"settings", nccl->settings}};
  if (!gpu) return env;
  env["gpu_name"] = gpu->name;
  env["gpu_uuid"] = gpu->uuid.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu->uuid);
  env["compute_capability"] = gpu->compute_capability;
  env["sm_count"] = gpu->sm_count;
  env["gpu_memory_bytes"] = gpu->memory_bytes;
  env["driver_version"] = gpu->driver_version;
  env["runtime_version"] = gpu->runtime_version;
  env["driver_release"] = or_null(gpu->driver_release);
  env["pcie_gen"] = or_null(gpu->pcie_gen);
  env["pcie_width"] = or_null(gpu->pcie_width);
  env["concurrent_managed_access"] = gpu->concurrent_managed_access;
  env["pageable_memory_access"] = gpu->pageable_memory_access;
  env["async_engine_count"] = gpu->async_engine_count;
  env["l2_bytes"] = gpu->l2_bytes;
  env["gpu_numa_node"] = or_null(gpu->numa_node);
  env["pcie_max_gen"] = or_null(gpu->pcie_max_gen);
  env["pcie_max_width"] = or_null(gpu->pcie_max_width);
  env["persistence_mode"] = or_null(gpu->persistence_mode);
  env["sm_clock_max_mhz"] = or_null(gpu->sm_clock_max_mhz);
  env["mem_clock_max_mhz"] = or_null(gpu->mem_clock_max_mhz);
  env.update(gpu->start.to_json());  // sm_clock_mhz ... power_w, at the start
  env["nvml_note"] = or_null(gpu->nvml_note);
  return env;
}

Environment host_environment() {
  Environment env;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  env.host = host;
  const BuildInfo build = build_info();
  env.git_sha = build.git_sha;
  env.git_dirty = build.git_dirty;
  env.memstrat_version = build.version;
  env.hardware = read_host_hardware();
  env.boot_id = read_boot_id();
  return env;
}

Environment device_environment(int device) {
  GpuMonitor monitor = GpuMonitor::for_device(device);
  return device_environment(device, monitor);
}

Environment device_environment(int device, GpuMonitor& monitor) {
  Environment env = host_environment();
  GpuEnvironment& gpu = env.gpu.emplace();
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  gpu.name = p.name;
  unsigned char uuid[16];
  std::copy(std::begin(p.uuid.bytes), std::end(p.uuid.bytes), uuid);
  gpu.uuid = gpu_uuid_string(uuid);
  gpu.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
  gpu.sm_count = p.multiProcessorCount;
  gpu.memory_bytes = p.totalGlobalMem;
  int drv = 0, rt = 0;
  CUDA_CHECK(cudaDriverGetVersion(&drv));
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  gpu.driver_version = cuda_version_string(drv);
  gpu.runtime_version = cuda_version_string(rt);
  // The kernel module's release, e.g. "580.159.04", from a line like "NVRM version: NVIDIA UNIX
  // x86_64 Kernel Module for x86_64  580.159.04  Release Build ..." (absent where there is none).
  const std::string nv = read_first_line("/proc/driver/nvidia/version");
  std::smatch m;
  if (std::regex_search(nv, m, std::regex(R"(\b(\d{2,4}\.\d{1,4}(\.\d{1,4})?)\b)")))
    gpu.driver_release = m[1].str();
  add_link_and_nvml(gpu, cuda_pci_bus_id(device), monitor);
  int v = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, device));
  gpu.concurrent_managed_access = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, device));
  gpu.pageable_memory_access = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrAsyncEngineCount, device));
  gpu.async_engine_count = v;
  gpu.l2_bytes = p.l2CacheSize;
  return env;
}

std::string iso_utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string make_run_id() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "-%08x", rd());
  return std::string(buf) + suffix;
}

Spread spread_of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto q = [&](double f) {
    const double pos = f * static_cast<double>(v.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.min = v.front();
  s.max = v.back();
  s.median = q(0.5);
  s.p25 = q(0.25);
  s.p75 = q(0.75);
  return s;
}

bool is_utf8(const std::string& s) {
  // The record writer's own rule: what nlohmann::json refuses to dump strictly is not UTF-8.
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

void append_jsonl(const std::string& path, const nlohmann::json& record) {
  // Bytes that are not UTF-8 (a path, a message) become U+FFFD instead of losing the record.
  const std::string line =
      record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open results file '" + path + "': " + std::strerror(errno));
  const ssize_t n = ::write(fd, line.data(), line.size());
  int err = errno;
  bool ok = n == static_cast<ssize_t>(line.size());
  // A write can be accepted and still fail on its way to the disk (a full or remote file
  // system): fsync and close say so. A pipe cannot be synced (EINVAL): nothing to wait for.
  if (ok && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS && errno != ENOTSUP) {
    ok = false;
    err = errno;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok)
    throw std::runtime_error("could not write to results file '" + path + "': " +
                             (n >= 0 && n < static_cast<ssize_t>(line.size())
                                  ? "short write (" + std::to_string(n) + " of " +
                                        std::to_string(line.size()) + " bytes): "
                                  : std::string()) +
                             std::strerror(err));
}

}  // namespace memstrat
