#include "common/host_info.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>

namespace memstrat {

namespace {
std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::optional<long> parse_long(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(t.c_str(), &end, 10);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

}  // namespace

// The set grows until it holds every CPU the kernel knows (hosts beyond CPU_SETSIZE exist).
std::vector<int> affinity_cpus(pid_t tid) {
  long conf = sysconf(_SC_NPROCESSORS_CONF);
  for (int n = static_cast<int>(std::max<long>(conf, CPU_SETSIZE)); n <= (1 << 20); n *= 2) {
    const std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set(CPU_ALLOC(n), [](cpu_set_t* s) { CPU_FREE(s); });
    if (!set) return {};
    const std::size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set.get());
    if (sched_getaffinity(tid, size, set.get()) != 0) {
      if (errno == EINVAL) continue;  // the kernel's mask is wider than this set
      return {};
    }
    std::vector<int> cpus;
    for (int c = 0; c < n; ++c)
      if (CPU_ISSET_S(c, size, set.get())) cpus.push_back(c);
    return cpus;
  }
  return {};
}

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

std::optional<std::string> cpu_model_from_cpuinfo(std::istream& cpuinfo) {
  std::optional<std::string> model, processor, implementer, part;
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (value.empty()) continue;
    if (key == "model name" && !model) model = value;
    else if ((key == "Processor" || key == "cpu") && !processor) processor = value;
    else if (key == "CPU implementer" && !implementer) implementer = value;
    else if (key == "CPU part" && !part) part = value;
  }
  if (model) return model;
  if (processor) return processor;
  if (implementer && part) return "implementer " + *implementer + " part " + *part;
  return std::nullopt;
}

std::string compact_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string sysfs_pci_device_dir(const std::string& bus_id) {
  std::string id = bus_id;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto colon = id.find(':');
  if (colon != std::string::npos && colon != 4) {
    std::string domain = id.substr(0, colon);
    // sysfs writes the domain with four digits; CUDA and NVML may write eight ("00000000").
    while (domain.size() > 4 && domain.front() == '0') domain.erase(0, 1);
    while (domain.size() < 4) domain.insert(0, "0");
    id = domain + id.substr(colon);
  }
  return "/sys/bus/pci/devices/" + id + "/";
}

std::optional<int> pcie_gen_from_speed(const std::string& speed) {
  const std::string t = trim(speed);
  char* end = nullptr;
  const double gts = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || gts <= 0) return std::nullopt;
  // Per-lane rates: 2.5, 5, 8, 16, 32, 64 GT/s for generations 1..6.
  if (gts >= 60) return 6;
  if (gts >= 30) return 5;
  if (gts >= 15) return 4;
  if (gts >= 7.5) return 3;
  if (gts >= 4.5) return 2;
  return 1;
}

PciLink pci_current_link(const std::string& bus_id) {
  const std::string dir = sysfs_pci_device_dir(bus_id);
  PciLink link;
  link.gen = pcie_gen_from_speed(read_first_line(dir + "current_link_speed"));
  if (const auto w = parse_long(read_first_line(dir + "current_link_width")); w && *w > 0)
    link.width = static_cast<int>(*w);
  return link;
}

std::optional<int> pci_numa_node(const std::string& bus_id) {
  const auto node = parse_long(read_first_line(sysfs_pci_device_dir(bus_id) + "numa_node"));
  if (!node || *node < -1) return std::nullopt;
  return static_cast<int>(*node);
}

HostHardware read_host_hardware() {
  HostHardware h;
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (cpuinfo) h.cpu_model = cpu_model_from_cpuinfo(cpuinfo);
  if (const long n = sysconf(_SC_NPROCESSORS_ONLN); n > 0) h.cpu_count = static_cast<int>(n);
  if (const std::vector<int> cpus = affinity_cpus(); !cpus.empty()) {
    h.cpu_affinity = compact_cpu_list(cpus);
    h.cpu_affinity_count = static_cast<int>(cpus.size());
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0)
    h.memory_bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  return h;
}

std::optional<std::uint64_t> mem_available_from_meminfo(std::istream& meminfo) {
  const std::string key = "MemAvailable:";
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::string v = trim(line.substr(key.size()));
    const bool kb = v.size() > 3 && v.compare(v.size() - 3, 3, " kB") == 0;
    if (!kb) return std::nullopt;  // the kernel writes kB; anything else is not this file
    const std::optional<long> n = parse_long(v.substr(0, v.size() - 3));
    if (!n || *n < 0) return std::nullopt;
    return static_cast<std::uint64_t>(*n) * 1024u;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo) return std::nullopt;
  return mem_available_from_meminfo(meminfo);
}

std::optional<std::string> read_boot_id(const std::string& path) {
  std::ifstream f(path);
  std::string id;
  if (!f || !std::getline(f, id)) return std::nullopt;
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
  if (id.empty()) return std::nullopt;
  return id;
}

std::string gpu_uuid_string(const unsigned char (&bytes)[16]) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[bytes[i] >> 4];
    s += hex[bytes[i] & 0xF];
  }
  return s;
}

}  // namespace memstrat
