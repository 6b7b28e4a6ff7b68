// The environment readers without a GPU: CPU model, affinity, boot id, GPU UUID and PCI sysfs
// readers on hand-made inputs, NVML's clock-event reasons decoded from bit masks, and NVML
// absent (a library name that does not exist): every NVML value empty, a note that says why, no
// crash. The binary must never link NVML: it has to start where the driver is missing.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_monitor.h"
#include "common/host_info.h"
#include "common/nvml.h"

using namespace memstrat;
using Names = std::vector<std::string>;

TEST(ClockEventReasons, DecodesEachKnownBitByName) {
  EXPECT_EQ(clock_event_reason_names(0), Names{});
  EXPECT_EQ(clock_event_reason_names(0x1), Names{"gpu_idle"});
  EXPECT_EQ(clock_event_reason_names(0x4 | 0x40), (Names{"sw_power_cap", "hw_thermal"}));
  EXPECT_EQ(clock_event_reason_names(0x1FF),
            (Names{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                   "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake",
                   "display_clock_setting"}));
}

TEST(ClockEventReasons, AnUnknownBitIsKeptAsItsHexValue) {
  EXPECT_EQ(clock_event_reason_names(0x200 | 0x8), (Names{"hw_slowdown", "0x200"}));
  EXPECT_EQ(clock_event_reason_names(1ull << 63), Names{"0x8000000000000000"});
}

TEST(HostInfo, CompactCpuListsAsTheKernelWritesThem) {
  EXPECT_EQ(compact_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(compact_cpu_list({11, 10, 8, 3, 2, 1, 0, 2}), "0-3,8,10-11");  // any order, repeats
  EXPECT_EQ(compact_cpu_list({5}), "5");
  EXPECT_EQ(compact_cpu_list({1, 3}), "1,3");
  EXPECT_EQ(compact_cpu_list({}), "");
}

TEST(HostInfo, CpuModelFromCpuinfoOfEachArchitecture) {
  std::istringstream x86("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 "
                         "96-Core Processor\nprocessor\t: 1\nmodel name\t: other\n");
  EXPECT_EQ(cpu_model_from_cpuinfo(x86), "AMD EPYC 9654 96-Core Processor");
  std::istringstream arm("processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\n"
                         "CPU architecture: 8\nCPU part\t: 0xd4f\n");
  EXPECT_EQ(cpu_model_from_cpuinfo(arm), "implementer 0x41 part 0xd4f");
  std::istringstream power("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n");
  EXPECT_EQ(cpu_model_from_cpuinfo(power), "POWER9 (raw), altivec supported");
  std::istringstream blank("model name\t:\nflags\t: fpu\n");
  EXPECT_FALSE(cpu_model_from_cpuinfo(blank).has_value());
}

TEST(HostInfo, SysfsPathOfABusIdInCudasForm) {
  EXPECT_EQ(sysfs_pci_device_dir("0000:C1:00.0"), "/sys/bus/pci/devices/0000:c1:00.0/");
  EXPECT_EQ(sysfs_pci_device_dir("00000000:41:00.0"), "/sys/bus/pci/devices/0000:41:00.0/");
  EXPECT_EQ(sysfs_pci_device_dir("0001:02:00.0"), "/sys/bus/pci/devices/0001:02:00.0/");
}

TEST(HostInfo, PcieGenerationFromLinkSpeed) {
  EXPECT_EQ(pcie_gen_from_speed("2.5 GT/s PCIe"), 1);
  EXPECT_EQ(pcie_gen_from_speed("8.0 GT/s PCIe"), 3);
  EXPECT_EQ(pcie_gen_from_speed("16.0 GT/s PCIe"), 4);
  EXPECT_EQ(pcie_gen_from_speed("32.0 GT/s PCIe\n"), 5);
  EXPECT_EQ(pcie_gen_from_speed("64.0 GT/s PCIe"), 6);
  EXPECT_FALSE(pcie_gen_from_speed("Unknown speed").has_value());
  EXPECT_FALSE(pcie_gen_from_speed("").has_value());
}

TEST(HostInfo, ADeviceThatIsNotThereHasNoNumaNodeOrLink) {
  EXPECT_FALSE(pci_numa_node("ffff:ff:1f.7").has_value());
  const PciLink link = pci_current_link("ffff:ff:1f.7");
  EXPECT_FALSE(link.gen || link.width);
}

// sched_getaffinity(0) is the calling thread's mask: pin a thread to one allowed CPU and the
// reader must say exactly that CPU.
TEST(HostInfo, AffinityIsTheCallersMask) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) last = c;
  ASSERT_GE(last, 0);
  HostHardware pinned;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) pinned = read_host_hardware();
  });
  t.join();
  ASSERT_TRUE(pinned.cpu_affinity.has_value()) << "could not pin a thread to CPU " << last;
  EXPECT_EQ(*pinned.cpu_affinity, std::to_string(last));
  EXPECT_EQ(pinned.cpu_affinity_count, 1);
  EXPECT_GE(pinned.cpu_count.value_or(0), 1);
  EXPECT_GT(pinned.memory_bytes.value_or(0), 0u);
}

TEST(HostInfo, BootIdIsTheFilesLineOrNone) {
  char tmpl[] = "/tmp/memstrat_boot_id_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  const std::string id = "6f1c1f7e-2f5d-4b8e-9a53-0c7d1e2a3b4c";
  ASSERT_EQ(write(fd, (id + "\n").data(), id.size() + 1), static_cast<ssize_t>(id.size() + 1));
  close(fd);
  EXPECT_EQ(read_boot_id(tmpl), id);
  std::ofstream(tmpl) << "\n";
  EXPECT_FALSE(read_boot_id(tmpl).has_value()) << "an empty file says nothing";
  std::remove(tmpl);
  EXPECT_FALSE(read_boot_id(tmpl).has_value()) << "no file";
}

TEST(HostInfo, GpuUuidInNvidiaSmisForm) {
  const unsigned char b[16] = {0x8f, 0x2a, 0x01, 0xc3, 0x4d, 0x5e, 0x6f, 0x70,
                               0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8};
  EXPECT_EQ(gpu_uuid_string(b), "GPU-8f2a01c3-4d5e-6f70-8192-a3b4c5d6e7f8");
}

TEST(Nvml, AbsentLibraryGivesEmptyValuesAndSaysWhy) {
  const Nvml nvml("libnvidia-ml-absent.so.1");
  EXPECT_FALSE(nvml.available());
  EXPECT_NE(nvml.unavailable_reason().find("cannot load libnvidia-ml-absent.so.1"), std::string::npos)
      << nvml.unavailable_reason();
  const NvmlValue<unsigned> clock = nvml.clock_mhz(nullptr, Nvml::Clock::Sm, false);
  EXPECT_FALSE(clock.value.has_value());
  EXPECT_EQ(clock.error, nvml.unavailable_reason());
  EXPECT_FALSE(nvml.device_by_pci_bus_id("0000:41:00.0").value.has_value());
  EXPECT_FALSE(nvml.persistence_mode(nullptr).value.has_value());
}

TEST(Nvml, MonitorWithoutNvmlReadsNothingAndNotesWhy) {
  GpuMonitor m("0000:41:00.0", "libnvidia-ml-absent.so.1");
  const GpuState s = m.state();
  const GpuLimits l = m.limits();
  EXPECT_FALSE(s.sm_clock_mhz || s.mem_clock_mhz || s.clock_event_reasons || s.temperature_c ||
               s.power_w);
  EXPECT_FALSE(l.sm_clock_max_mhz || l.mem_clock_max_mhz || l.pcie_gen || l.pcie_width ||
               l.pcie_max_gen || l.pcie_max_width || l.persistence_mode);
  EXPECT_EQ(m.note().rfind("NVML: cannot load libnvidia-ml-absent.so.1", 0), 0u) << m.note();
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j.size(), 5u) << j.dump();
  for (const auto& [key, value] : j.items()) EXPECT_TRUE(value.is_null()) << key;
}

TEST(Nvml, TheBinaryDoesNotLinkIt) {
  FILE* p = popen("readelf -d " MEMSTRAT_BINARY " 2>&1", "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) text += buf;
  if (pclose(p) != 0) GTEST_SKIP() << "readelf not usable here: " << text;
  ASSERT_NE(text.find("(NEEDED)"), std::string::npos) << text;
  EXPECT_EQ(text.find("nvidia-ml"), std::string::npos) << text;
}
