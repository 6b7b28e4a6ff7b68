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

// PCIe link from sysfs (null when the platform does not expose it, e.g. some VMs).
void add_pcie(nlohmann::json& env, int device) {
  env["pcie_gen"] = nullptr;
  env["pcie_width"] = nullptr;
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
    if (gen) env["pcie_gen"] = gen;
  }
  if (!width.empty() && std::atoi(width.c_str()) > 0) env["pcie_width"] = std::atoi(width.c_str());
}
}  // namespace

nlohmann::json host_environment_json() {
  nlohmann::json env;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  env["host"] = host;
  env["git_sha"] = MEMSTRAT_GIT_SHA;
  env["git_dirty"] = MEMSTRAT_GIT_DIRTY != 0;
  env["memstrat_version"] = MEMSTRAT_VERSION;
  return env;
}

nlohmann::json environment_json(int device) {
  nlohmann::json env = host_environment_json();
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  env["gpu_name"] = p.name;
  env["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  env["sm_count"] = p.multiProcessorCount;
  env["gpu_memory_bytes"] = p.totalGlobalMem;
  int drv = 0, rt = 0;
  CUDA_CHECK(cudaDriverGetVersion(&drv));
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  env["driver_version"] = version_string(drv);
  env["runtime_version"] = version_string(rt);
  // The kernel module's release, e.g. "580.159.04", from a line like "NVRM version: NVIDIA UNIX
  // x86_64 Kernel Module for x86_64  580.159.04  Release Build ..." (null where absent).
  env["driver_release"] = nullptr;
  const std::string nv = read_first_line("/proc/driver/nvidia/version");
  std::smatch m;
  if (std::regex_search(nv, m, std::regex(R"(\b(\d{2,4}\.\d{1,4}(\.\d{1,4})?)\b)")))
    env["driver_release"] = m[1].str();
  add_pcie(env, device);
  int v = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, device));
  env["concurrent_managed_access"] = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, device));
  env["pageable_memory_access"] = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrAsyncEngineCount, device));
  env["async_engine_count"] = v;
  env["l2_bytes"] = p.l2CacheSize;
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
