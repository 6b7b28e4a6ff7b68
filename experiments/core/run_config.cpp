#include "experiments/core/run_config.h"

#include "memory_strategies/gather_input.h"  // gathers_on_gpu

namespace memstrat {

namespace {
/// --fused as MlpConfig's choice of step: the one place that maps it.
/// --fused on|single|lt|off -> the step implementation Mlp is asked for.
StepKind step_kind(FusedMode f) {
  switch (f) {
    case FusedMode::On: return StepKind::Auto;
    case FusedMode::Single: return StepKind::SingleLaunch;
    case FusedMode::Lt: return StepKind::LtFused;
    case FusedMode::Off: return StepKind::Layerwise;
  }
  return StepKind::Auto;
}
}  // namespace

std::string_view to_string(LaunchForm f) {
  const std::optional<EpochForm> form = asked_form(f);
  return form ? to_string(*form) : "auto";
}

std::optional<EpochForm> asked_form(LaunchForm f) {
  switch (f) {
    case LaunchForm::Auto: return std::nullopt;
    case LaunchForm::PerBatch: return EpochForm::PerBatch;
    case LaunchForm::Graph: return EpochForm::Graph;
    case LaunchForm::ChunkKernels: return EpochForm::ChunkKernels;
    case LaunchForm::Kernel: return EpochForm::Kernel;
  }
  return std::nullopt;
}

std::string thread_placement_refusal(const RunConfig& c) {
  if (c.thread_placement == ThreadPlacement::Os) return "";
  const std::string opt = "--thread-placement " + std::string(to_string(c.thread_placement));
  if (c.scenario != Scenario::Static)
    return opt + " places the threads of the static scenario only: in " +
           std::string(to_string(c.scenario)) + " the host's " +
           (c.scenario == Scenario::Stream ? "workers run" : "rewrite runs") +
           " on threads the training thread starts, which would inherit its one CPU; use "
           "--thread-placement os or --scenario static";
  if (c.gpus > 1)
    return opt + " places one training thread, and --gpus " + std::to_string(c.gpus) +
           " drives the GPUs from several; use --thread-placement os or one GPU";
  return "";
}

bool reads_copy_chunk(const RunConfig& c) {
  if (c.launch_form == LaunchForm::ChunkKernels) return true;
  for (const StrategyOption& o : c.strategy->options)
    if (o.name == "copy-chunk") return true;
  return false;
}

StrategyOptions strategy_options(const RunConfig& c) {
  StrategyOptions o;
  o.batch = c.batch;
  o.transfer = c.transfer;
  o.scenario = c.scenario;
  o.depth = c.depth;
  o.copy_streams = c.copy_streams;
  o.advise = c.advise;
  o.prefetch_chunk_mib = c.prefetch_chunk_mib;
  o.copy_chunk_mib = c.copy_chunk_mib;
  o.stage_blocks = c.stage_blocks;
  o.seed = c.seed;
  o.workers = c.workers;
  o.prefetch = c.prefetch;
  o.augment = c.augment;
  o.augment_device = c.augment_device;
  return o;
}

MlpConfig mlp_config(const RunConfig& c, int features, int classes) {
  MlpConfig m;
  m.layers = {features};
  m.layers.insert(m.layers.end(), c.hidden.begin(), c.hidden.end());
  m.layers.push_back(classes);
  m.max_batch = c.batch;
  m.gemm = c.gemm;
  m.tf32 = c.tf32;
  m.lr = c.lr;
  m.momentum = c.momentum;
  m.seed = c.seed;
  m.step = step_kind(c.fused);
  // Where the strategy's batches are when the step reads them: the one place it reaches the Mlp.
  // A strategy whose batches are in host memory (zero-copy) has them in device memory where the
  // GPU gathers them (the stream scenario without host augmentation: gather_input.h).
  m.batch_in_host_memory = c.strategy != nullptr && c.strategy->batch_in_host_memory &&
                           !gathers_on_gpu(strategy_options(c));
  // Blocks the strategy runs beside the step: the step's grid leaves as many slots free.
  m.step_free_blocks = c.strategy != nullptr && c.strategy->blocks_beside_step != nullptr
                           ? c.strategy->blocks_beside_step(strategy_options(c))
                           : 0;
  return m;
}

}  // namespace memstrat
