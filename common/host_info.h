// host_info.h: the host a run ran on, as far as it can explain spread between runs: the CPU
// model, how many CPUs are online and which of them the process may run on (a run pinned to
// two cores of a busy socket is not the run pinned to sixteen), the memory, and the NUMA node a
// PCI device hangs off. Read from /proc, /sys and sched_getaffinity; no GPU needed. What the
// platform does not tell is empty, never guessed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace memstrat {

/// The kernel's boot id (/proc/sys/kernel/random/boot_id, a UUID new at every boot): which boot
/// of which machine a run ran on, where the host name says nothing (a VM named "vm" on every
/// machine). Records of one machine and boot share it. None where the file is absent.
std::optional<std::string> read_boot_id(
    const std::string& path = "/proc/sys/kernel/random/boot_id");

/// A CUDA device UUID's 16 bytes in nvidia-smi's form, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
/// (lower-case hex): the physical GPU a run ran on.
std::string gpu_uuid_string(const unsigned char (&bytes)[16]);

struct HostHardware {
  std::optional<std::string> cpu_model;     // cpu_model
  std::optional<int> cpu_count;             // online CPUs
  std::optional<std::string> cpu_affinity;  // CPUs this process may run on, "0-15,32-47"
  std::optional<int> cpu_affinity_count;
  std::optional<std::uint64_t> memory_bytes;  // host_memory_bytes
};

/// This machine and this process, now.
HostHardware read_host_hardware();

/// The CPU model from /proc/cpuinfo text: the first "model name" (x86), else the first
/// "Processor" or "cpu" line (some ARM and POWER kernels), else the first "CPU implementer" /
/// "CPU part" pair as "implementer 0x41 part 0xd4f" (ARM); none when the text has none of these.
std::optional<std::string> cpu_model_from_cpuinfo(std::istream& cpuinfo);

/// The CPUs a thread may run on (sched_getaffinity; 0: the calling thread), in increasing
/// order; empty when the kernel will not say.
std::vector<int> affinity_cpus(pid_t tid = 0);

/// {0,1,2,3,8,10,11} -> "0-3,8,10-11" (the kernel's cpulist form); the input in any order,
/// duplicates allowed; "" for none.
std::string compact_cpu_list(std::vector<int> cpus);

/// The sysfs folder of a PCI device from a bus id as CUDA writes it ("0000:C1:00.0",
/// "00000000:c1:00.0"): lower case, a four-digit domain: "/sys/bus/pci/devices/0000:c1:00.0/".
std::string sysfs_pci_device_dir(const std::string& bus_id);

/// sysfs current_link_speed text ("32.0 GT/s PCIe") -> PCIe generation (5); none when the
/// text is empty or not a speed.
std::optional<int> pcie_gen_from_speed(const std::string& speed);

/// The PCIe link a device trained to, from sysfs (current_link_speed / current_link_width);
/// empty where the platform does not expose them (some VMs).
struct PciLink {
  std::optional<int> gen, width;
};
PciLink pci_current_link(const std::string& bus_id);

/// The NUMA node of that PCI device (sysfs numa_node): -1 where the kernel gives the device no
/// node (one-node hosts, many VMs); none where the file cannot be read.
std::optional<int> pci_numa_node(const std::string& bus_id);

/// MemAvailable from /proc/meminfo text ("MemAvailable:   123456 kB"), in bytes: the kernel's
/// estimate of what can be allocated without swapping. None when the text has no such line.
std::optional<std::uint64_t> mem_available_from_meminfo(std::istream& meminfo);
/// This host's MemAvailable now; none where /proc/meminfo cannot be read.
std::optional<std::uint64_t> available_memory_bytes();

/// The first line of a /proc or /sys file; "" when it cannot be read.
std::string read_first_line(const std::string& path);

}  // namespace memstrat
