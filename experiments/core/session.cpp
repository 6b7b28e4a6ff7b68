#include "experiments/core/session.h"

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "common/profiler/profiler.h"
#include "common/nvtx.h"
#include "common/nccl_settings.h"
#include "experiments/core/console.h"
#include "experiments/core/data_parallel_request.h"
#include "experiments/core/data_parallel_trainer.h"
#include "experiments/core/device_budget.h"
#include "experiments/core/launch_request.h"
#include "experiments/core/mlp.h"
#include "experiments/core/run_outputs.h"
#include "experiments/core/trainer.h"
#include "kernels/single_launch/step_launcher.h"  // step_unsupported_here

namespace memstrat {

namespace {
using Clock = std::chrono::steady_clock;

/// The design promises no allocation after set-up; say so loudly if anything broke it.
void warn_allocations(std::ostream& err, const WindowCounters& w, int epoch) {
  if (!w.api_available) return;
  for (const char* fn : {"cudaMalloc", "cudaMallocAsync", "cudaMallocHost", "cudaHostAlloc",
                         "cudaMallocManaged"})
    if (w.api.count(fn) > 0)
      err << "memstrat: warning: " << w.api.count(fn) << " call(s) to " << fn << " during epoch "
          << epoch << " (allocation after set-up)\n";
}

/// The record's step: which implementation ran and, for each faster kind that did not, why.
StepRecord step_record(const Mlp& m, const std::string& single_off, const std::string& fused_off) {
  StepRecord r{m.fused(), m.step_kind(), std::nullopt, std::nullopt};
  if (m.step() != StepKind::SingleLaunch) r.single_launch_off_reason = single_off;
  if (!m.fused()) r.fused_off_reason = fused_off;
  return r;
}
}  // namespace

// Declared in this order so that they are destroyed trainer first, compute stream and the
// --device-budget hold last. A data-parallel run's trainer owns its replicas (stream, Mlp,
// strategy per GPU); `mlp` then points at rank 0's.
struct Session::Pipeline {
  DeviceBudgetHold budget_hold;
  Stream compute;
  std::unique_ptr<MemoryStrategy> strategy;
  std::unique_ptr<Mlp> owned_mlp;
  std::unique_ptr<EpochLoop> trainer;
  Mlp* mlp = nullptr;
};

Session::Session(const RunConfig& cfg, const HostDataset& data) : cfg_(cfg), data_(data) {}

RunRecord Session::run(std::ostream& out, std::ostream& err, const SampleLossSink& sink) {
  const std::string name(cfg_.strategy->name);
  // A launch form the options cannot run is a usage error, found before any device work.
  if (const std::string why =
          launch_form_refusal(cfg_, data_.features(), data_.classes, any_device_runs_it);
      !why.empty())
    throw std::invalid_argument("--launch-form " + std::string(to_string(cfg_.launch_form)) +
                                " with --strategy " + name + ": " + why);
  // A strategy whose data does not fit --device-budget is refused before any device work.
  if (const std::string why = budget_refusal(cfg_, data_.n_train(), data_.features()); !why.empty())
    throw std::invalid_argument(why);
  if (const std::string why = data_parallel_refusal(cfg_); !why.empty())
    throw std::invalid_argument(why);
  if (const std::string why = thread_placement_refusal(cfg_); !why.empty())
    throw std::invalid_argument(why);
  require_device(cfg_.device, "`train` needs an NVIDIA GPU (`memstrat list` works without one).");
  // The GPU this process starts on: --device, or its local rank's under --processes per-gpu.
  const int device = DataParallelTrainer::local_device(cfg_);
  const int gpus_here = cfg_.process ? 1 : cfg_.gpus;  // the GPUs this process drives
  if (cfg_.gpus > 1 && !cfg_.process) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (cfg_.device + cfg_.gpus > count)
      throw std::invalid_argument("--gpus " + std::to_string(cfg_.gpus) + " from --device " +
                                  std::to_string(cfg_.device) + ": this machine shows " +
                                  std::to_string(count) + " CUDA device(s) (CUDA_VISIBLE_DEVICES)");
  }
  CuptiProfiler::Options popt;
  popt.enabled = cfg_.profile;
  popt.trace_path = cfg_.trace;
  CuptiProfiler prof(popt);  // before the first CUDA call of the run
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaFree(nullptr));  // create the context: CUPTI's UM counters need one
  prof.enable_device_counters();
  for (int d = device; d < device + gpus_here; ++d)
    if (const std::string why =
            waiver_reason(*cfg_.strategy, strategy_options(cfg_),
                          // several GPUs in this process: also whether d can read rank 0's memory
                          DeviceCaps::query(d, gpus_here > 1 ? device : -1));
        !why.empty())
      throw DeviceUnavailable("strategy '" + name + "' is waived on device " + std::to_string(d) +
                              ": " + why);
  // A kernel form whose single-launch step this device cannot run is waived like a strategy.
  if (const std::string why = launch_form_refusal(cfg_, data_.features(), data_.classes,
                                                  kernels::step_unsupported_here);
      !why.empty())
    throw DeviceUnavailable("--launch-form " + std::string(to_string(cfg_.launch_form)) +
                            " is waived on this device: " + why);

  GpuMonitor monitor = GpuMonitor::for_device(device);  // NVML, read now and at the end
  Environment env = device_environment(device, monitor);
  if (cfg_.gpus > 1) env.nccl = NcclEnvironment{nccl_version(), nccl_settings()};
  RunRecord rec = RunRecord::start(cfg_, data_, std::move(env));
  if (!cfg_.quiet) print_run_header(out, rec);
  try {
    NvtxRange range(Phase::Run, "memstrat " + name);
    Pipeline p = set_up(rec, prof);
    if (!cfg_.export_init.empty()) export_init(cfg_.export_init, *p.mlp, data_, cfg_);
    // After set-up (its host threads keep every CPU), for the epochs; undone when they end.
    const ThreadPlacementScope placed(cfg_.thread_placement);
    if (!cfg_.quiet && !placed.description().empty())
      out << "thread placement: " << placed.description() << "\n";
    run_epochs(p, rec, prof, out, err, sink);
    if (rec.device_budget) {  // what the margin beside the budget left unused
      std::size_t free = 0, total = 0;
      CUDA_CHECK(cudaMemGetInfo(&free, &total));
      rec.device_budget->free_after_run_bytes = free;
    }
    rec.env_end = monitor.state();  // after the last epoch, outside every timed region
    RunTotals t;
    t.final_test = p.trainer->evaluate();
    t.summary = summarize(rec.epochs, data_.n_train());
    if (cfg_.profile) t.api_totals = prof.api_totals();
    t.profiler_notes = prof.notes();
    rec.totals = std::move(t);
  } catch (const BudgetRefused&) {
    throw;  // a budget the device cannot give: a usage error, not a failed run
  } catch (const std::exception& ex) {
    rec.status = RunStatus::Failed;
    rec.error = ex.what();
    return rec;
  }
  // The pipeline is gone: the tables below count its frees as outside every window.
  if (!cfg_.quiet) {
    print_epoch_table(out, rec);
    if (cfg_.profile) out << prof.table();
  }
  if (cfg_.rank() == 0) print_summary_line(out, rec);  // one process per GPU: rank 0 speaks
  if (!cfg_.trace.empty()) {
    prof.write_trace();
    if (!cfg_.quiet) out << "trace written to " << cfg_.trace << "\n";
  }
  return rec;
}

Session::Pipeline Session::set_up(RunRecord& rec, CuptiProfiler& prof) {
  const auto t0 = Clock::now();
  prof.begin_window("setup");
  Pipeline p;
  {
    NvtxRange range(Phase::Setup, "setup");
    if (cfg_.data_parallel()) {
      // No --device-budget here (data_parallel_refusal): its hold sits between one Mlp's
      // allocations and one strategy's, and the data-parallel trainer builds its replicas whole.
      auto dp = std::make_unique<DataParallelTrainer>(cfg_, data_);
      p.mlp = &dp->model();
      // The trainer's choice (choose_gradient_step), whose reasons say why the step is not the
      // one --fused would take on one GPU where it is not.
      const StepChoice& c = dp->step_choice();
      rec.step = step_record(*p.mlp, c.single_off_reason, c.fused_off_reason);
      p.trainer = std::move(dp);
    } else {
      p.compute = Stream::create();
      nvtx_name_stream(p.compute, "compute");
      p.owned_mlp =
          std::make_unique<Mlp>(mlp_config(cfg_, data_.features(), data_.classes), p.compute);
      p.mlp = p.owned_mlp.get();
      const Mlp& m = *p.mlp;
      rec.step = step_record(m, m.single_off_reason(), m.fused_off_reason());
      if (cfg_.device_budget_gib) {
        // After the model's allocations, before the strategy's: the strategy has the budget only.
        DeviceBudgetRecord b;
        b.gib = *cfg_.device_budget_gib;
        b.budget_bytes = gib_bytes(b.gib);
        b.margin_bytes = budget_margin_bytes(cfg_, data_);
        b.data_footprint_bytes = device_footprint(*cfg_.strategy, strategy_options(cfg_),
                                                  data_.n_train(), data_.features());
        p.budget_hold = DeviceBudgetHold::take(b);
        rec.device_budget = b;
      }
      p.strategy = cfg_.strategy->make();
      p.strategy->attach(data_, strategy_options(cfg_), p.compute);
      p.trainer = std::make_unique<Trainer>(*p.mlp, *p.strategy, data_, cfg_, p.compute);
      CUDA_CHECK(cudaStreamSynchronize(p.compute));
    }
    rec.epoch_launch =
        EpochLaunchChoice{p.trainer->epoch_launch(), std::nullopt, p.trainer->epoch_form()};
    if (!p.trainer->epoch_launch()) rec.epoch_launch->off_reason = p.trainer->epoch_launch_off_reason();
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  rec.setup = SetupRecord{ms, prof.end_window()};
  return p;
}

void Session::run_epochs(Pipeline& p, RunRecord& rec, CuptiProfiler& prof, std::ostream& out,
                         std::ostream& err, const SampleLossSink& sink) {
  std::optional<LossCurveWriter> curve;
  if (!cfg_.loss_curve.empty()) curve.emplace(cfg_.loss_curve);
  for (int e = 1; e <= cfg_.epochs; ++e) {
    prof.begin_window("epoch " + std::to_string(e));
    EpochRecord er;
    er.train = p.trainer->run_epoch(e);
    er.counters = prof.end_window();
    er.test = p.trainer->evaluate();
    warn_allocations(err, er.counters, e);
    rec.epochs.push_back(er);
    if (curve) curve->write_epoch(e, *p.trainer);
    if (sink) sink(e, p.trainer->last_sample_losses());
    if (!cfg_.quiet) print_epoch_line(out, rec, rec.epochs.back());
  }
}

}  // namespace memstrat
