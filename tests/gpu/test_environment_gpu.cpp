// The environment on a real GPU: NVML finds the CUDA device by its PCI bus id and gives clocks,
// reasons, temperature and power at the start of a run (env) and after its last epoch
// (env_end); the NUMA node is the one sysfs states, or explicitly unknown. Skips without a GPU,
// and the NVML parts without the driver's libnvidia-ml.so.1 (then a run records nulls and a
// note, which tests/cpu/test_environment.cpp covers).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/gpu_monitor.h"
#include "common/host_info.h"
#include "common/run_record.h"
#include "tests/gpu/gpu_test_support.h"

using namespace memstrat;
using nlohmann::json;

namespace {
/// Why NVML cannot be loaded here ("" when it can): a machine without it is skipped, but a
/// library that loads and then fails in our loader is a failure.
std::string nvml_missing() {
  void* lib = dlopen(kNvmlLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return e ? e : "dlopen failed";
  }
  dlclose(lib);
  return "";
}

/// The clock snapshot keys of env or env_end hold real readings.
void expect_state(const json& s, const std::string& where) {
  SCOPED_TRACE(where + ": " + s.dump());
  ASSERT_TRUE(s["sm_clock_mhz"].is_number_integer());
  EXPECT_GT(s["sm_clock_mhz"].get<int>(), 0);
  ASSERT_TRUE(s["mem_clock_mhz"].is_number_integer());
  EXPECT_GT(s["mem_clock_mhz"].get<int>(), 0);
  ASSERT_TRUE(s["clock_event_reasons"].is_array());
  for (const json& r : s["clock_event_reasons"]) EXPECT_TRUE(r.is_string());
  ASSERT_TRUE(s["temperature_c"].is_number_integer());
  EXPECT_GT(s["temperature_c"].get<int>(), 0);
  EXPECT_LT(s["temperature_c"].get<int>(), 120);
  ASSERT_TRUE(s["power_w"].is_number());
  EXPECT_GT(s["power_w"].get<double>(), 0.0);
}
}  // namespace

TEST(EnvironmentGpu, MonitorFindsTheCudaDeviceThroughNvml) {
  MEMSTRAT_REQUIRE_GPU();
  if (const std::string why = nvml_missing(); !why.empty()) GTEST_SKIP() << "no NVML: " << why;
  const std::string bus = cuda_pci_bus_id(0);
  ASSERT_FALSE(bus.empty());
  GpuMonitor m(bus);
  const GpuState s = m.state();
  const GpuLimits l = m.limits();
  EXPECT_EQ(m.note().rfind("NVML: ", 0), std::string::npos) << m.note();  // NVML and GPU found
  ASSERT_TRUE(s.sm_clock_mhz && l.sm_clock_max_mhz) << m.note();
  EXPECT_GT(*s.sm_clock_mhz, 0);
  EXPECT_LE(*s.sm_clock_mhz, *l.sm_clock_max_mhz);
  // The link's maximum and persistence mode: read, or refused by the platform (some VMs), never
  // lost to the loader (a missing entry point reads differently in the note).
  const std::string note = m.note();
  auto read_or_refused = [&](bool read, const std::string& key) {
    return read || note.find(key + ": Not Supported") != std::string::npos;
  };
  EXPECT_TRUE(read_or_refused(l.pcie_max_gen && *l.pcie_max_gen >= 1, "pcie_max_gen")) << note;
  EXPECT_TRUE(read_or_refused(l.pcie_max_width && *l.pcie_max_width >= 1, "pcie_max_width")) << note;
  EXPECT_TRUE(read_or_refused(l.persistence_mode.has_value(), "persistence_mode")) << note;
}

TEST(EnvironmentGpu, ARunRecordsClocksAtItsStartAndEnd) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  if (const std::string why = nvml_missing(); !why.empty()) GTEST_SKIP() << "no NVML: " << why;
  const json j = memstrat::testing::run_session(memstrat::testing::short_run("resident")).to_json();
  const json& env = j["env"];
  expect_state(env, "env");
  ASSERT_TRUE(j.contains("env_end"));
  expect_state(j["env_end"], "env_end");
  EXPECT_LE(env["sm_clock_mhz"].get<int>(), env["sm_clock_max_mhz"].get<int>());
  EXPECT_LE(j["env_end"]["sm_clock_mhz"].get<int>(), env["sm_clock_max_mhz"].get<int>());
  if (env["pcie_gen"].is_number() && env["pcie_max_gen"].is_number()) {
    EXPECT_LE(env["pcie_gen"].get<int>(), env["pcie_max_gen"].get<int>());
  }
  // NVML and the GPU were found; a note may only name single queries the platform refused.
  if (env["nvml_note"].is_string()) {
    EXPECT_EQ(env["nvml_note"].get<std::string>().rfind("NVML: ", 0), std::string::npos)
        << env["nvml_note"];
  }
}

TEST(EnvironmentGpu, NumaNodeIsWhatSysfsSaysOrExplicitlyUnknown) {
  MEMSTRAT_REQUIRE_GPU();
  const Environment env = device_environment(0);
  const std::string bus = cuda_pci_bus_id(0);
  ASSERT_FALSE(bus.empty());
  const std::string path = sysfs_pci_device_dir(bus) + "numa_node";
  std::ifstream f(path);
  int node = 0;
  if (f >> node) {
    ASSERT_TRUE(env.gpu->numa_node.has_value()) << path << " says " << node;
    EXPECT_EQ(*env.gpu->numa_node, node);
    EXPECT_GE(node, -1);
  } else {
    EXPECT_FALSE(env.gpu->numa_node.has_value()) << path << " is not readable";
  }
  const json j = env.to_json();
  EXPECT_TRUE(j["gpu_numa_node"].is_number_integer() || j["gpu_numa_node"].is_null());
  // The host part is there with a GPU too.
  EXPECT_GT(j["cpu_count"].get<int>(), 0);
  EXPECT_GT(j["cpu_affinity_count"].get<int>(), 0);
}
