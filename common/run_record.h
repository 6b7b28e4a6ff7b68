// run_record.h: the pieces every results record shares (docs/schema/run_record.schema.json):
// the schema version, the environment block, run id and timestamps, steady-state summary
// statistics, and the atomic JSON Lines append.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/gpu_monitor.h"
#include "common/host_info.h"

namespace memstrat {

inline constexpr int kSchemaVersion = 1;

/// The GPU part of a record's environment (what `memstrat info` shows).
struct GpuEnvironment {
  std::string name;                // gpu_name
  std::string uuid;                // gpu_uuid, "GPU-..." as nvidia-smi writes it
  std::string compute_capability;  // "9.0"
  int sm_count = 0;
  std::uint64_t memory_bytes = 0;  // gpu_memory_bytes
  std::string driver_version;      // CUDA version the driver supports, "13.0"
  std::string runtime_version;     // "13.0"
  std::optional<std::string> driver_release;  // kernel module release, "580.159.04"
  std::optional<int> pcie_gen, pcie_width;    // absent where the platform does not expose them
  bool concurrent_managed_access = false;
  bool pageable_memory_access = false;
  int async_engine_count = 0;
  int l2_bytes = 0;
  // From NVML (common/gpu_monitor.h): null where it is not loaded or the GPU does not say.
  std::optional<int> pcie_max_gen, pcie_max_width;  // the fastest link the GPU and its slot allow
  std::optional<int> sm_clock_max_mhz, mem_clock_max_mhz;
  std::optional<bool> persistence_mode;
  GpuState start;                        // clocks, reasons, temperature, power when read
  std::optional<std::string> nvml_note;  // why NVML fields are null; none when all were read
  std::optional<int> numa_node;          // gpu_numa_node (sysfs; -1: the kernel gives none)
};

/// Where a run ran: the host and the build always, the GPU once a device is known. to_json()
/// writes one flat object (the record's `env`).
/// NCCL as a multi-GPU run found it: the library's version and every NCCL_* variable.
struct NcclEnvironment {
  std::string version;
  std::map<std::string, std::string> settings;
};

struct Environment {
  std::string host;
  std::optional<std::string> boot_id;  // the kernel's boot id: which machine and boot (host_info.h)
  std::string git_sha;
  bool git_dirty = false;
  std::string memstrat_version;
  HostHardware hardware;  // cpu_model, cpu_count, cpu_affinity, ..., host_memory_bytes
  std::optional<GpuEnvironment> gpu;
  std::optional<NcclEnvironment> nccl;  // runs on several GPUs only (env.nccl, absent otherwise)
  nlohmann::json to_json() const;
};

/// Host (CPU, affinity, memory), git revision and version only: needs no GPU.
Environment host_environment();
/// host_environment() plus GPU, driver/runtime, PCIe link, NUMA node, and what `monitor` reads
/// from NVML now (the start of a run: read monitor.state() again at its end). Needs a CUDA device.
Environment device_environment(int device, GpuMonitor& monitor);
/// The same through a monitor of its own.
Environment device_environment(int device);

std::string iso_utc_now();
/// "20261121T233012Z-4f3a9c1e": sortable, unique per run.
std::string make_run_id();

struct Spread {
  double median = 0, min = 0, max = 0, p25 = 0, p75 = 0;
};
/// Median, min, max and quartiles (linear interpolation). Empty input -> all zero.
Spread spread_of(std::vector<double> v);

/// True when `s` is valid UTF-8: a record holds it as JSON text exactly as given.
bool is_utf8(const std::string& s);

/// Append one record as a single line with one write() on an O_APPEND descriptor, then fsync,
/// so concurrent writers and crashes never leave a partial line. Strings that are not UTF-8 are
/// written with U+FFFD in place of the bad bytes (the record is kept). Throws
/// std::runtime_error when the line was not written in full or fsync/close report an error.
void append_jsonl(const std::string& path, const nlohmann::json& record);

}  // namespace memstrat
