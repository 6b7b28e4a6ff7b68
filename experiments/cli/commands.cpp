#include "experiments/cli/commands.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "common/idx.h"
#include "common/run_record.h"
#include "experiments/core/data_parallel_request.h"
#include "experiments/core/device_check.h"
#include "experiments/core/output_files.h"
#include "experiments/core/run_inputs.h"
#include "experiments/core/session.h"
#include "experiments/primitives/run_primitives.h"
#include "memory_strategies/registry.h"

namespace memstrat {

namespace {
using nlohmann::json;

int usage_error(std::ostream& err, const std::exception& e) {
  err << "memstrat: " << e.what() << "\n";
  return kExitUsage;
}

/// Appends `rec` to `path`; where that fails, says so and prints the record on `err` instead,
/// so that a finished run's figures are never lost. Returns whether it was appended.
bool append_or_print(const std::string& path, const nlohmann::json& rec, std::ostream& err) {
  try {
    append_jsonl(path, rec);
    return true;
  } catch (const std::exception& e) {
    err << "memstrat: the record could not be appended: " << e.what()
        << "\nmemstrat: the record, as one JSON line:\n"
        << rec.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    return false;
  }
}

/// A set of forms as names, in kEpochForms order.
json form_names(const EpochFormSet& s) {
  json a = json::array();
  for (const EpochForm f : s.forms()) a.push_back(to_string(f));
  return a;
}

json describe_json() {
  json d;
  d["record_schema_version"] = kSchemaVersion;
  d["strategies"] = json::array();
  for (const StrategyEntry& e : strategy_registry()) {
    json s{{"name", e.name}, {"description", e.description}, {"options", json::array()}};
    for (const StrategyOption& o : e.options) s["options"].push_back(std::string("--") + std::string(o.name));
    if (!e.improves.empty()) s["improves"] = e.improves;
    // The --launch-form values it runs per scenario (auto always; a kernel form also needs the
    // single-launch step: launch_forms below), and why not the others.
    json forms;
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh, Scenario::Stream})
      forms[std::string(to_string(sc))] = form_names(e.launch_forms.in(sc));
    s["launch_forms"] = forms;
    s["launch_note"] = e.launch_note.empty() ? json(nullptr) : json(e.launch_note);
    // --fused on then takes the layer-by-layer step, so a kernel form needs --fused single.
    s["batch_in_host_memory"] = e.batch_in_host_memory;
    // The scenarios in which it takes --augment-device gpu (every strategy takes host).
    s["augment_device_gpu"] = json::array();
    for (const Scenario sc : e.gpu_augment) s["augment_device_gpu"].push_back(to_string(sc));
    // The scenarios in which it runs with --gpus N > 1 (every strategy emulates N shards).
    s["several_gpus"] = json::array();
    for (const Scenario sc : several_gpu_scenarios(e.name))
      s["several_gpus"].push_back(to_string(sc));
    // A data path across GPUs that is another strategy's on one GPU (the matrix's "all" skips it).
    s["one_gpu_as"] = e.one_gpu_as.empty() ? json(nullptr) : json(e.one_gpu_as);
    d["strategies"].push_back(s);
  }
  // What each form needs beyond the strategy's declaration.
  d["launch_forms"] = json::array();
  for (const EpochForm f : kEpochForms)
    d["launch_forms"].push_back(
        {{"name", to_string(f)},
         {"needs_step", is_kernel_form(f) ? json("single-launch") : json(nullptr)}});
  d["train_options"] = json::array();
  for (const OptionInfo& o : train_option_table()) d["train_options"].push_back(o.to_json());
  // Where --thread-placement apart or shared runs (thread_placement_refusal): its scenarios, and
  // whether with --gpus N > 1; os runs everywhere.
  RunConfig placed;
  placed.thread_placement = ThreadPlacement::Apart;
  json scenarios = json::array();
  for (const Scenario sc : {Scenario::Static, Scenario::Refresh, Scenario::Stream}) {
    placed.scenario = sc;
    if (thread_placement_refusal(placed).empty()) scenarios.push_back(to_string(sc));
  }
  placed.scenario = Scenario::Static;
  placed.gpus = 2;
  d["thread_placement_runs"] = {{"scenarios", scenarios},
                                {"several_gpus", thread_placement_refusal(placed).empty()}};
  return d;
}

void describe_text(std::ostream& out) {
  out << "strategies:\n";
  for (const StrategyEntry& e : strategy_registry())
    out << "  " << std::left << std::setw(15) << e.name << e.description << "\n";
  out << "\nlaunch forms (--launch-form) per scenario; kernel forms need the single-launch step:\n";
  for (const StrategyEntry& e : strategy_registry()) {
    out << "  " << std::left << std::setw(20) << e.name;
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh, Scenario::Stream})
      out << (sc == Scenario::Static ? "" : "; ") << to_string(sc) << ": "
          << e.launch_forms.in(sc).to_string();
    out << "\n";
  }
  out << "\ntrain options (default; key in the record's config):\n";
  for (const OptionInfo& o : train_option_table()) {
    out << "  " << std::left << std::setw(16) << o.name << o.default_value.dump();
    if (!o.choices.empty()) {
      out << "  of";
      for (const std::string& c : o.choices) out << " " << c;
    }
    out << (o.record_key.empty() ? "" : "  -> config." + o.record_key) << "\n";
  }
  out << "\nrecords: schema version " << kSchemaVersion << " (docs/schema/run_record.schema.json)\n";
}

/// "n/a" for what the platform did not give.
template <typename T>
std::string shown(const std::optional<T>& v, const std::string& unit = "") {
  if (!v) return "n/a";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << *v << unit;
  return s.str();
}

/// What NVML and sysfs say beyond the CUDA properties: the link's maximum, NUMA node, clocks.
void print_gpu_state(std::ostream& out, const GpuEnvironment& gpu) {
  if (gpu.pcie_max_gen || gpu.pcie_max_width)
    out << " (max gen " << shown(gpu.pcie_max_gen) << " x" << shown(gpu.pcie_max_width) << ")";
  out << "\n  NUMA node of the GPU      "
      << (!gpu.numa_node ? "not readable"
          : *gpu.numa_node < 0 ? "none (the kernel gives the device no node)"
                               : std::to_string(*gpu.numa_node));
  const GpuState& s = gpu.start;
  out << "\n  clocks now (max)          SM " << shown(s.sm_clock_mhz, " MHz") << " ("
      << shown(gpu.sm_clock_max_mhz) << "), memory " << shown(s.mem_clock_mhz, " MHz") << " ("
      << shown(gpu.mem_clock_max_mhz) << ")"
      << "\n  clock-event reasons       ";
  if (!s.clock_event_reasons) out << "n/a";
  else if (s.clock_event_reasons->empty()) out << "none";
  for (std::size_t i = 0; s.clock_event_reasons && i < s.clock_event_reasons->size(); ++i)
    out << (i ? ", " : "") << (*s.clock_event_reasons)[i];
  out << "\n  temperature / power       " << shown(s.temperature_c, " C") << " / "
      << shown(s.power_w, " W")
      << "\n  persistence mode          "
      << (gpu.persistence_mode ? (*gpu.persistence_mode ? "on" : "off") : "n/a");
  if (gpu.nvml_note) out << "\n  " << *gpu.nvml_note;
}

/// The host part of the environment; needs no GPU.
void print_host(std::ostream& out, const Environment& env) {
  const HostHardware& h = env.hardware;
  out << "host " << env.host << "\n  CPU                       "
      << h.cpu_model.value_or("not reported") << ", " << shown(h.cpu_count) << " online"
      << "\n  CPU affinity              " << h.cpu_affinity.value_or("n/a") << " ("
      << shown(h.cpu_affinity_count) << " CPUs)"
      << "\n  memory                    "
      << (h.memory_bytes ? std::to_string(*h.memory_bytes >> 20) + " MiB" : "n/a") << "\n";
}
}  // namespace

int run_list(std::ostream& out) {
  std::size_t width = 0;
  for (const auto& e : strategy_registry()) width = std::max(width, e.name.size());
  for (const auto& e : strategy_registry())
    out << std::left << std::setw(static_cast<int>(width + 2)) << e.name << e.description << "\n";
  return kExitOk;
}

int run_info(const CliRequest& req, std::ostream& out, std::ostream& err) {
  const int device = req.run.device;
  try {
    require_device(device, "`info` needs an NVIDIA GPU and driver.");
  } catch (const DeviceUnavailable& e) {
    print_host(out, host_environment());
    err << "memstrat: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const std::invalid_argument& e) {
    return usage_error(err, e);
  }
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  CUDA_CHECK(cudaSetDevice(device));
  const Environment env = device_environment(device);
  const GpuEnvironment& gpu = *env.gpu;
  const DeviceCaps caps = DeviceCaps::query(device);
  int pools = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  out << "device " << device << " of " << count << ": " << gpu.name << "\n"
      << "  compute capability        " << gpu.compute_capability << ", " << gpu.sm_count
      << " SMs, L2 " << (gpu.l2_bytes >> 20) << " MiB\n"
      << "  memory                    " << (caps.total_bytes >> 20) << " MiB total, "
      << (caps.free_bytes >> 20) << " MiB free\n"
      << "  driver / runtime          " << gpu.driver_version << " / " << gpu.runtime_version;
  if (gpu.driver_release) out << " (kernel module " << *gpu.driver_release << ")";
  out << "\n  PCIe link                 ";
  if (!gpu.pcie_gen) out << "not reported by this platform";
  else out << "gen " << *gpu.pcie_gen << " x" << (gpu.pcie_width ? std::to_string(*gpu.pcie_width) : "?");
  print_gpu_state(out, gpu);
  out << "\n  copy engines (async)      " << caps.async_engine_count
      << "\n  managedMemory             " << yn(caps.managed_memory)
      << "\n  concurrentManagedAccess   " << yn(caps.concurrent_managed_access)
      << "  (needed by um-prefetch/um-advise; without it, CPU and GPU may not touch managed memory concurrently)"
      << "\n  pageableMemoryAccess      " << yn(gpu.pageable_memory_access)
      << "  (yes = GPU can read plain malloc memory, HMM/ATS)"
      << "\n  canMapHostMemory          " << yn(caps.can_map_host_memory) << "  (zero-copy)"
      << "\n  memory pools              " << yn(pools != 0) << "\n";
  print_host(out, env);
  out << "\nstrategies on this device:\n";
  for (const auto& e : strategy_registry()) {
    const std::string why = e.unsupported(caps);
    out << "  " << std::left << std::setw(15) << e.name << (why.empty() ? "supported" : "waived: " + why) << "\n";
  }
  // The stream scenario asks more of some strategies (StrategyEntry::unsupported_with).
  out << "\nstream scenario (--scenario stream) on this device:\n";
  for (const auto& e : strategy_registry()) {
    std::string line;
    for (const Augment a : {Augment::None, Augment::Light}) {
      StrategyOptions o;
      o.scenario = Scenario::Stream;
      o.augment = a;
      const std::string why = waiver_reason(e, o, caps);
      line += std::string(line.empty() ? "" : "; ") + "--augment " +
              (a == Augment::None ? "none" : "light/heavy") + ": " +
              (why.empty() ? "supported" : why);
    }
    out << "  " << std::left << std::setw(15) << e.name << line << "\n";
  }
  return kExitOk;
}

int run_describe(const CliRequest& req, std::ostream& out) {
  if (req.json) out << describe_json().dump(2) << "\n";
  else describe_text(out);
  return kExitOk;
}

int run_train(const CliRequest& req, std::ostream& out, std::ostream& err) {
  const RunConfig& cfg = req.run;
  // Everything that needs no GPU first: the output files, the data set.
  HostDataset data;
  try {
    check_outputs(cfg);
    data = load_run_data(cfg, &err);
  } catch (const DataError& e) {
    return usage_error(err, e);
  } catch (const std::invalid_argument& e) {
    return usage_error(err, e);
  }
  RunRecord rec;
  try {
    rec = Session(cfg, data).run(out, err);
  } catch (const DeviceUnavailable& e) {
    err << "memstrat: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const std::invalid_argument& e) {
    return usage_error(err, e);
  }
  if (rec.status == RunStatus::Failed) {
    err << "memstrat: run failed: " << rec.error << "\n";
    if (!cfg.json.empty() && append_or_print(cfg.json, rec.to_json(), err))
      err << "memstrat: a record marked \"failed\" was appended to " << cfg.json << "\n";
    return kExitRunFailed;
  }
  // The run finished; a record that cannot be written fails it all the same (exit 1).
  if (!cfg.json.empty() && !append_or_print(cfg.json, rec.to_json(), err)) return kExitRunFailed;
  return kExitOk;
}

int run_primitives_command(const CliRequest& req, std::ostream& out, std::ostream& err) {
  const PrimitivesArgs& a = req.primitives;
  if (a.list) {
    print_primitive_list(out, a.gpus);
    return kExitOk;
  }
  try {
    if (!a.json.empty()) check_output_file(a.json, "--json");
    require_device(a.device,
                   "`primitives` needs an NVIDIA GPU (`memstrat primitives --list` works without one).");
    if (a.gpus > 1) {
      int count = 0;
      CUDA_CHECK(cudaGetDeviceCount(&count));
      if (a.gpus > count)
        throw std::invalid_argument("--gpus " + std::to_string(a.gpus) + ": this machine shows " +
                                    std::to_string(count) +
                                    " CUDA device(s) (CUDA_VISIBLE_DEVICES)");
    }
  } catch (const DeviceUnavailable& e) {
    err << "memstrat: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const std::invalid_argument& e) {
    return usage_error(err, e);
  }
  return run_primitives(a, req.run.argv, out, err);
}

}  // namespace memstrat
