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
#include <random>
#include <regex>
#include <stdexcept>

#include "common/cuda_check.h"

#ifndef MEMSTRAT_GIT_SHA
#define MEMSTRAT_GIT_SHA "unknown"
#endif
#ifndef MEMSTRAT_GIT_DIRTY
#define MEMSTRAT_GIT_DIRTY 0
#endif
#ifndef MEMSTRAT_VERSION
#define MEMSTRAT_VERSION "0.0.0"
#endif

namespace memstrat {

namespace {
std::string version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// PCIe link from sysfs (absent when the platform does not expose it, e.g. some VMs).
void add_pcie(GpuEnvironment& gpu, int device) {
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  std::string id(bus);
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string base = "/sys/bus/pci/devices/" + id + "/";
  const std::string speed = read_first_line(base + "current_link_speed");
  const std::string width = read_first_line(base + "current_link_width");
  if (!speed.empty()) {
    const double gts = std::atof(speed.c_str());
    int gen = 0;
    if (gts >= 60) gen = 6;
    else if (gts >= 30) gen = 5;
    else if (gts >= 15) gen = 4;
    else if (gts >= 7.5) gen = 3;
    else if (gts >= 4.5) gen = 2;
    else if (gts > 0) gen = 1;
    if (gen) gpu.pcie_gen = gen;
  }
  if (!width.empty() && std::atoi(width.c_str()) > 0) gpu.pcie_width = std::atoi(width.c_str());
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json Environment::to_json() const {
  nlohmann::json env;
  env["host"] = host;
  env["git_sha"] = git_sha;
  env["git_dirty"] = git_dirty;
  env["memstrat_version"] = memstrat_version;
  if (!gpu) return env;
  env["gpu_name"] = gpu->name;
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
  return env;
}

Environment host_environment() {
  Environment env;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  env.host = host;
  env.git_sha = MEMSTRAT_GIT_SHA;
  env.git_dirty = MEMSTRAT_GIT_DIRTY != 0;
  env.memstrat_version = MEMSTRAT_VERSION;
  return env;
}

Environment device_environment(int device) {
  Environment env = host_environment();
  GpuEnvironment& gpu = env.gpu.emplace();
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  gpu.name = p.name;
  gpu.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
  gpu.sm_count = p.multiProcessorCount;
  gpu.memory_bytes = p.totalGlobalMem;
  int drv = 0, rt = 0;
  CUDA_CHECK(cudaDriverGetVersion(&drv));
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  gpu.driver_version = version_string(drv);
  gpu.runtime_version = version_string(rt);
  // The kernel module's release, e.g. "580.159.04", from a line like "NVRM version: NVIDIA UNIX
  // x86_64 Kernel Module for x86_64  580.159.04  Release Build ..." (absent where there is none).
  const std::string nv = read_first_line("/proc/driver/nvidia/version");
  std::smatch m;
  if (std::regex_search(nv, m, std::regex(R"(\b(\d{2,4}\.\d{1,4}(\.\d{1,4})?)\b)")))
    gpu.driver_release = m[1].str();
  add_pcie(gpu, device);
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

nlohmann::json environment_json(int device) { return device_environment(device).to_json(); }

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

void append_jsonl(const std::string& path, const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open results file '" + path + "': " + std::strerror(errno));
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::fsync(fd);
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("short write to results file '" + path + "': " + std::strerror(err));
}

}  // namespace memstrat
