#include "experiments/cli/commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "common/cupti_profiler.h"
#include "common/cuda_raii.h"
#include "common/mnist.h"
#include "common/nvtx.h"
#include "common/run_record.h"
#include "experiments/core/trainer.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/registry.h"

namespace memstrat {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string fmt(double v, int prec = 2) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}
std::string fmt_opt(const std::optional<double>& v, int prec = 2) { return v ? fmt(*v, prec) : "-"; }
std::string fmt_opt_u(const json& v, double scale = 1.0, int prec = 0) {
  if (v.is_null()) return "-";
  return fmt(v.get<double>() / scale, prec);
}

/// Fail before training, not after: the results file must be appendable.
void check_appendable(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::invalid_argument(std::string(what) + ": cannot open '" + path + "' for writing: " +
                                std::strerror(errno) + " (does the directory exist?)");
  ::close(fd);
}

void check_writable_new(const std::string& path, const char* what) {
  std::ofstream f(path, std::ios::app);
  if (!f)
    throw std::invalid_argument(std::string(what) + ": cannot write '" + path +
                                "' (does the directory exist?)");
}

json config_json(const TrainArgs& a, const TrainConfig& c, const HostDataset& data) {
  std::vector<int> hidden(c.mlp.layers.begin() + 1, c.mlp.layers.end() - 1);
  return json{{"strategy", a.strategy},
              {"scenario", a.scenario},
              {"transfer", a.transfer},
              {"batch", a.batch},
              {"hidden", hidden},
              {"epochs", a.epochs},
              {"lr", a.lr},
              {"momentum", a.momentum},
              {"seed", a.seed},
              {"gemm", a.gemm},
              {"tf32", a.tf32},
              {"graphs", c.graphs},
              {"depth", a.depth},
              {"streams", a.copy_streams},
              {"advise", c.strategy.advise.to_string()},
              {"profile", a.profile},
              {"run_tag", a.run_tag.empty() ? json(nullptr) : json(a.run_tag)},
              {"device", a.device},
              {"dataset",
               {{"name", data.name},
                {"path", data.source},
                {"train_samples", data.n_train()},
                {"test_samples", data.n_test()}}}};
}

void export_init(const std::string& dir, const Mlp& mlp, const HostDataset& data,
                 const TrainConfig& cfg, const TrainArgs& a) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::vector<float> p = mlp.parameters();
  std::ofstream(dir + "/init_params.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
  const std::vector<std::int32_t> order = EpochWriter(data, cfg.strategy).order(1);
  std::ofstream(dir + "/order_epoch1.i32", std::ios::binary)
      .write(reinterpret_cast<const char*>(order.data()),
             static_cast<std::streamsize>(order.size() * sizeof(std::int32_t)));
  json m;
  m["layers"] = mlp.config().layers;
  json layers = json::array();
  for (int l = 0; l < mlp.layer_count(); ++l)
    layers.push_back({{"weight_offset", mlp.weight_offset(l)}, {"bias_offset", mlp.bias_offset(l)}});
  m["params"] = layers;
  m["param_count"] = p.size();
  m["layout"] = "flat float32 little-endian; per layer W [in x out] row-major, then b [out]";
  m["order"] = "order_epoch1.i32: int32 indices into the training set, the sample order of epoch 1";
  m["normalize"] = "x = float(pixel) / 255.0f";
  m["seed"] = a.seed;
  m["lr"] = a.lr;
  m["momentum"] = a.momentum;
  m["batch"] = a.batch;
  m["scenario"] = a.scenario;
  m["dataset"] = data.source;
  m["train_samples"] = data.n_train();
  m["test_samples"] = data.n_test();
  std::ofstream(dir + "/manifest.json") << m.dump(2) << "\n";
}

void print_table(std::ostream& out, const json& rec) {
  out << "\n" << std::left << std::setw(6) << "epoch" << std::right << std::setw(10) << "wall ms"
      << std::setw(10) << "gpu ms" << std::setw(9) << "copy" << std::setw(9) << "compute"
      << std::setw(9) << "stall" << std::setw(8) << "idle" << std::setw(9) << "host"
      << std::setw(9) << "H2D MB" << std::setw(11) << "UM HtoD MB" << std::setw(10) << "GPU flt"
      << std::setw(10) << "cudaMalloc" << std::setw(9) << "loss" << std::setw(8) << "acc %"
      << std::setw(8) << "test %" << "\n";
  for (const json& e : rec["epochs"]) {
    const json& api = e["api_calls"];
    std::string mallocs = "-";
    if (!api.is_null()) mallocs = std::to_string(api.value("cudaMalloc", 0));
    out << std::left << std::setw(6) << e["epoch"].get<int>() << std::right << std::setw(10)
        << fmt(e["wall_ms"].get<double>()) << std::setw(10) << fmt(e["gpu_ms"].get<double>())
        << std::setw(9) << fmt_opt_u(e["copy_ms"], 1.0, 2) << std::setw(9)
        << fmt(e["compute_ms"].get<double>()) << std::setw(9) << fmt(e["stall_ms"].get<double>())
        << std::setw(8) << fmt(e["idle_ms"].get<double>()) << std::setw(9)
        << fmt(e["host_ms"].get<double>()) << std::setw(9)
        << fmt(e["h2d_bytes"].get<double>() / 1e6, 1) << std::setw(11)
        << fmt_opt_u(e["um_htod_bytes"], 1e6, 1) << std::setw(10) << fmt_opt_u(e["um_gpu_faults"])
        << std::setw(10) << mallocs << std::setw(9) << fmt(e["train_loss"].get<double>(), 4)
        << std::setw(8) << fmt(100 * e["train_acc"].get<double>()) << std::setw(8)
        << fmt(100 * e["test_acc"].get<double>()) << "\n";
  }
}

json summary_json(const json& epochs, std::int64_t n_train) {
  std::vector<double> wall, gpu;
  const std::size_t first = epochs.size() > 1 ? 1 : 0;  // epoch 1 is warm-up
  for (std::size_t i = first; i < epochs.size(); ++i) {
    wall.push_back(epochs[i]["wall_ms"].get<double>());
    gpu.push_back(epochs[i]["gpu_ms"].get<double>());
  }
  const Spread w = spread_of(wall), g = spread_of(gpu);
  const double sps = w.median > 0 ? static_cast<double>(n_train) / (w.median / 1000.0) : 0.0;
  return json{{"steady_epochs", wall.size()},
              {"wall_ms_median", w.median},
              {"wall_ms_min", w.min},
              {"wall_ms_max", w.max},
              {"wall_ms_p25", w.p25},
              {"wall_ms_p75", w.p75},
              {"gpu_ms_median", g.median},
              {"epoch1_wall_ms", epochs[0]["wall_ms"]},
              {"samples_per_s", sps}};
}

/// kExitNoDevice / kExitUsage with a message when `device` cannot be used, else nullopt.
/// `needs` finishes the no-GPU sentence for the command at hand.
std::optional<int> check_device(int device, const char* needs, std::ostream& err) {
  std::string reason;
  if (!cuda_device_available(&reason)) {
    err << "memstrat: " << reason << "; " << needs << "\n";
    return kExitNoDevice;
  }
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= count) {
    err << "memstrat: --device " << device << " does not exist (" << count << " device(s))\n";
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace

int run_list(std::ostream& out) {
  for (const auto& e : strategy_registry())
    out << std::left << std::setw(15) << e.name << e.description << "\n";
  return kExitOk;
}

int run_info(const TrainArgs& a, std::ostream& out, std::ostream& err) {
  if (auto code = check_device(a.device, "`info` needs an NVIDIA GPU and driver.", err)) return *code;
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  CUDA_CHECK(cudaSetDevice(a.device));
  const json env = environment_json(a.device);
  const DeviceCaps caps = DeviceCaps::query(a.device);
  int pools = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, a.device));
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  out << "device " << a.device << " of " << count << ": " << env["gpu_name"].get<std::string>() << "\n"
      << "  compute capability        " << env["compute_capability"].get<std::string>() << ", "
      << env["sm_count"] << " SMs, L2 " << (env["l2_bytes"].get<long>() >> 20) << " MiB\n"
      << "  memory                    " << (caps.total_bytes >> 20) << " MiB total, "
      << (caps.free_bytes >> 20) << " MiB free\n"
      << "  driver / runtime          " << env["driver_version"].get<std::string>() << " / "
      << env["runtime_version"].get<std::string>();
  if (!env["driver_release"].is_null()) out << " (kernel module " << env["driver_release"].get<std::string>() << ")";
  out << "\n  PCIe link                 ";
  if (env["pcie_gen"].is_null()) out << "not reported by this platform";
  else out << "gen " << env["pcie_gen"] << " x" << (env["pcie_width"].is_null() ? json("?") : env["pcie_width"]);
  out << "\n  copy engines (async)      " << caps.async_engine_count
      << "\n  managedMemory             " << yn(caps.managed_memory)
      << "\n  concurrentManagedAccess   " << yn(caps.concurrent_managed_access)
      << "  (needed by um-prefetch/um-advise; without it, CPU and GPU may not touch managed memory concurrently)"
      << "\n  pageableMemoryAccess      " << yn(env["pageable_memory_access"].get<bool>())
      << "  (yes = GPU can read plain malloc memory, HMM/ATS)"
      << "\n  canMapHostMemory          " << yn(caps.can_map_host_memory) << "  (zero-copy)"
      << "\n  memory pools              " << yn(pools != 0) << "\n\nstrategies on this device:\n";
  for (const auto& e : strategy_registry()) {
    const std::string why = e.unsupported(caps);
    out << "  " << std::left << std::setw(15) << e.name << (why.empty() ? "supported" : "waived: " + why) << "\n";
  }
  return kExitOk;
}

int run_train(const CliRequest& req, std::ostream& out, std::ostream& err) {
  const TrainArgs& a = req.train;
  // ---- everything that needs no GPU first: options, files, outputs --------------------------
  TrainConfig cfg;
  HostDataset data;
  const StrategyEntry* entry = find_strategy(a.strategy);
  try {
    cfg = make_train_config(a);
    data = load_mnist(resolve_data_dir(a.data));
    truncate_dataset(data, a.train_samples, a.test_samples);
    if (a.batch > data.n_train())
      throw std::invalid_argument("--batch " + std::to_string(a.batch) +
                                  " is larger than the training set (" +
                                  std::to_string(data.n_train()) + " samples); use --batch <= " +
                                  std::to_string(data.n_train()));
    if (!a.json.empty()) check_appendable(a.json, "--json");
    if (!a.trace.empty()) check_writable_new(a.trace, "--trace");
    if (!a.loss_curve.empty()) check_writable_new(a.loss_curve, "--loss-curve");
  } catch (const DataError& e) {
    err << "memstrat: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::invalid_argument& e) {
    err << "memstrat: " << e.what() << "\n";
    return kExitUsage;
  }
  cfg.mlp.layers.front() = data.features();
  cfg.mlp.layers.back() = data.classes;

  // ---- device -------------------------------------------------------------------------------
  if (auto code = check_device(
          a.device, "`train` needs an NVIDIA GPU (`memstrat list` works without one).", err))
    return *code;
  CuptiProfiler::Options popt;
  popt.enabled = a.profile;
  popt.trace_path = a.trace;
  CuptiProfiler prof(popt);
  CUDA_CHECK(cudaSetDevice(a.device));
  CUDA_CHECK(cudaFree(nullptr));  // create the context: CUPTI's UM counters need one
  prof.enable_device_counters();
  const DeviceCaps caps = DeviceCaps::query(a.device);
  if (const std::string why = entry->unsupported(caps); !why.empty()) {
    err << "memstrat: strategy '" << a.strategy << "' is waived on this device: " << why << "\n";
    return kExitNoDevice;
  }

  json rec;
  rec["schema_version"] = kSchemaVersion;
  rec["run_id"] = make_run_id();
  rec["started_at"] = iso_utc_now();
  rec["status"] = "ok";
  rec["error"] = nullptr;
  rec["argv"] = req.argv;
  rec["env"] = environment_json(a.device);
  rec["config"] = config_json(a, cfg, data);
  rec["epochs"] = json::array();

  if (!a.quiet)
    out << "memstrat: " << a.strategy << " | " << a.scenario << " | " << a.transfer << " | batch "
        << a.batch << " | hidden " << a.hidden << " | " << a.epochs << " epochs | "
        << rec["env"]["gpu_name"].get<std::string>() << " | data " << data.name << " ("
        << data.n_train() << " train, " << data.n_test() << " test) from " << data.source << "\n";

  std::ofstream curve;
  try {
    NvtxRange run(Phase::Run, "memstrat " + a.strategy);
    const auto t_setup = Clock::now();
    prof.begin_window("setup");
    Stream compute;
    std::unique_ptr<MemoryStrategy> strategy;
    std::unique_ptr<Mlp> mlp;
    std::unique_ptr<Trainer> trainer;
    {
      NvtxRange sr(Phase::Setup, "setup");
      compute = Stream::create();
      nvtx_name_stream(compute, "compute");
      mlp = std::make_unique<Mlp>(cfg.mlp, compute);
      rec["config"]["fused"] = mlp->fused();
      rec["config"]["step"] = mlp->step_kind();
      rec["config"]["single_launch_off_reason"] =
          mlp->step_kind() == "single-launch" ? json(nullptr) : json(mlp->single_off_reason());
      rec["config"]["fused_off_reason"] =
          mlp->fused() ? json(nullptr) : json(mlp->fused_off_reason());
      strategy = entry->make();
      strategy->attach(data, cfg.strategy, compute);
      trainer = std::make_unique<Trainer>(*mlp, *strategy, data, a.batch, cfg.graphs, compute,
                                          cfg.epoch_launch);
      rec["config"]["epoch_launch"] = trainer->epoch_launch();
      rec["config"]["epoch_launch_off_reason"] =
          trainer->epoch_launch() ? json(nullptr) : json(trainer->epoch_launch_off_reason());
      CUDA_CHECK(cudaStreamSynchronize(compute));
    }
    const double setup_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_setup).count();
    const WindowCounters setup = prof.end_window();
    json setup_json = CuptiProfiler::to_json(setup);
    rec["setup"] = {{"ms", setup_ms}, {"api_calls", setup_json["api_calls"]}};

    if (!a.export_init.empty()) export_init(a.export_init, *mlp, data, cfg, a);
    if (!a.loss_curve.empty()) {
      curve.open(a.loss_curve, std::ios::trunc);
      curve << "epoch,batch,loss\n";
    }

    for (int e = 1; e <= a.epochs; ++e) {
      prof.begin_window("epoch " + std::to_string(e));
      const EpochResult r = trainer->run_epoch(e);
      const WindowCounters w = prof.end_window();
      const EvalResult ev = trainer->evaluate();
      json ej = CuptiProfiler::to_json(w);
      // The design promises no allocation after set-up; say so loudly if anything broke it.
      for (const char* fn : {"cudaMalloc", "cudaMallocAsync", "cudaMallocHost", "cudaHostAlloc",
                             "cudaMallocManaged"})
        if (w.api_available && w.api.count(fn) > 0)
          err << "memstrat: warning: " << w.api.count(fn) << " call(s) to " << fn << " during epoch "
              << e << " (allocation after set-up)\n";
      ej["epoch"] = e;
      ej["wall_ms"] = r.wall_ms;
      ej["gpu_ms"] = r.gpu_ms;
      ej["host_ms"] = r.host_ms;
      ej["copy_ms"] = optional_json(r.strategy.copy_ms);
      ej["compute_ms"] = r.compute_ms;
      ej["stall_ms"] = r.stall_ms;
      ej["idle_ms"] = r.idle_ms;
      ej["h2d_bytes"] = r.strategy.h2d_bytes;
      ej["train_loss"] = r.train_loss;
      ej["train_acc"] = r.train_acc;
      ej["test_loss"] = ev.loss;
      ej["test_acc"] = ev.acc;
      rec["epochs"].push_back(ej);
      if (curve.is_open()) {
        const auto& losses = trainer->last_sample_losses();
        for (int b = 0; b < trainer->batches(); ++b) {
          const std::int64_t lo = static_cast<std::int64_t>(b) * a.batch;
          const std::int64_t hi = std::min<std::int64_t>(lo + a.batch, data.n_train());
          double s = 0;
          for (std::int64_t i = lo; i < hi; ++i) s += losses[static_cast<std::size_t>(i)];
          char line[96];
          std::snprintf(line, sizeof line, "%d,%d,%.9g\n", e, b, s / static_cast<double>(hi - lo));
          curve << line;
        }
      }
      if (!a.quiet) {
        out << "epoch " << std::setw(3) << e << "/" << a.epochs << "  wall " << std::setw(8)
            << fmt(r.wall_ms) << " ms  gpu " << std::setw(8) << fmt(r.gpu_ms) << " ms  copy "
            << std::setw(7) << fmt_opt(r.strategy.copy_ms) << "  stall " << std::setw(7)
            << fmt(r.stall_ms) << "  loss " << fmt(r.train_loss, 4) << "  train "
            << fmt(100 * r.train_acc) << "%  test " << fmt(100 * ev.acc) << "%\n";
        out.flush();
      }
    }
    const EvalResult fin = trainer->evaluate();
    rec["summary"] = summary_json(rec["epochs"], data.n_train());
    rec["final"] = {{"test_loss", fin.loss},
                    {"test_acc", fin.acc},
                    {"samples_per_s", rec["summary"]["samples_per_s"]}};
    rec["api_totals"] = a.profile ? json(prof.api_totals().calls) : json(nullptr);
    json notes = json::array();
    for (const auto& n : prof.notes()) notes.push_back(n);
    rec["profiler_notes"] = notes;
  } catch (const std::exception& ex) {
    rec["status"] = "failed";
    rec["error"] = ex.what();
    err << "memstrat: run failed: " << ex.what() << "\n";
    if (!a.json.empty()) {
      try {
        append_jsonl(a.json, rec);
        err << "memstrat: a record marked \"failed\" was appended to " << a.json << "\n";
      } catch (const std::exception& e2) {
        err << "memstrat: could not write the failed record: " << e2.what() << "\n";
      }
    }
    return kExitRunFailed;
  }

  if (!a.quiet) {
    print_table(out, rec);
    out << "set-up " << fmt(rec["setup"]["ms"].get<double>(), 1) << " ms";
    if (!rec["setup"]["api_calls"].is_null()) {
      out << "; set-up API calls:";
      for (const char* k : {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged", "cudaFree"})
        out << " " << k << "=" << rec["setup"]["api_calls"].value(k, 0);
    }
    out << "\n";
    for (const auto& n : rec["profiler_notes"]) out << "profiler: " << n.get<std::string>() << "\n";
    if (a.profile) out << prof.table();
  }
  const json& s = rec["summary"];
  out << "summary: " << a.strategy << " " << a.scenario << " " << a.transfer << " batch " << a.batch
      << ": median epoch " << fmt(s["wall_ms_median"].get<double>()) << " ms (min "
      << fmt(s["wall_ms_min"].get<double>()) << ", max " << fmt(s["wall_ms_max"].get<double>())
      << ", epochs 2.." << a.epochs << "), epoch 1 " << fmt(s["epoch1_wall_ms"].get<double>())
      << " ms, " << fmt(s["samples_per_s"].get<double>() / 1e6, 2) << " M samples/s, test acc "
      << fmt(100 * rec["final"]["test_acc"].get<double>()) << "%\n";
  if (!a.trace.empty()) {
    prof.write_trace();
    if (!a.quiet) out << "trace written to " << a.trace << "\n";
  }
  if (!a.json.empty()) append_jsonl(a.json, rec);
  return kExitOk;
}

}  // namespace memstrat
