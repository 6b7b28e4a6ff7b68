#include "experiments/core/data_parallel_request.h"

#include <algorithm>

#include "common/nccl_settings.h"
#include "memory_strategies/registry.h"

namespace memstrat {

bool runs_on_several_gpus(std::string_view strategy) {
  // Every strategy of the registry: each GPU's instance serves its shard as its own epoch
  // (StrategyOptions::shard), with its GPU current on its own thread.
  return find_strategy(strategy) != nullptr;
}

std::vector<Scenario> several_gpu_scenarios(std::string_view strategy) {
  const StrategyEntry* e = find_strategy(strategy);
  if (e == nullptr || !runs_on_several_gpus(strategy)) return {};
  std::vector<Scenario> r;
  for (const Scenario s : {Scenario::Static, Scenario::Refresh, Scenario::Stream}) {
    StrategyOptions o;  // stream: host workers augment (the default, --augment light)
    o.scenario = s;
    if (refusal_reason(*e, o).empty()) r.push_back(s);  // the peer-fanout forms: static only
  }
  return r;
}

bool data_parallel_graphs(const RunConfig& c) {
  return c.data_parallel() && c.graphs == Graphs::On &&
         (c.gpus == 1 || c.processes == Processes::PerGpu);
}

std::string data_parallel_refusal(const RunConfig& c) {
  if (c.gpus > 1 && c.emulate_gpus > 1)
    return "--gpus " + std::to_string(c.gpus) + " with --emulate-gpus " +
           std::to_string(c.emulate_gpus) +
           ": the emulation runs N shards on ONE GPU (it is the reference of --gpus N --reduce "
           "exact); give one of the two";
  if (!c.data_parallel()) return "";
  const std::string n = c.gpus > 1 ? "--gpus " + std::to_string(c.gpus)
                                   : "--emulate-gpus " + std::to_string(c.emulate_gpus);
  if (c.emulate_gpus > 1 && c.reduce == Reduce::Ring)
    return n + " with --reduce ring: the emulation sums the shards in rank order, the reference "
               "of --reduce exact; ring's order is NCCL's (drop --reduce ring)";
  if (c.fused == FusedMode::Lt)
    return n + " with --fused lt: " + kDataParallelStepReason +
           "; use --fused on or single (the single-launch step) or off (the layer-by-layer step)";
  if (c.launch_form != LaunchForm::Auto && c.launch_form != LaunchForm::PerBatch)
    return n + " with --launch-form " + std::string(to_string(c.launch_form)) + ": " +
           kDataParallelFormReason + "; use --launch-form auto or per-batch";
  if (c.device_budget_gib)
    return n + " with --device-budget: the budget's hold is taken on one GPU between one "
               "model's allocations and one strategy's, and data-parallel set-up builds its "
               "replicas whole; drop --device-budget";
  if (c.gpus == 1) return "";
  if (c.processes == Processes::PerGpu) {
    if (!c.process && !c.spawn_ranks)
      return n + " --processes per-gpu: this process's rank was not read from the launcher's "
                 "environment";
    if (c.process && c.process->world != c.gpus)
      return n + " --processes per-gpu: " + c.process->launcher + " started " +
             std::to_string(c.process->world) + " process(es); give --gpus " +
             std::to_string(c.process->world) + " or start " + std::to_string(c.gpus);
    if (!c.strategy->one_gpu_as.empty())
      return n + " --processes per-gpu with --strategy " + std::string(c.strategy->name) +
             ": its data set lives once, in one process's memory (" +
             (c.strategy->name.rfind("peer-fanout", 0) == 0
                  ? "GPU memory, which the other GPUs read over peer access"
              : c.strategy->name.rfind("um-shared", 0) == 0
                  ? "one managed allocation, whose regions every GPU's hints place"
                  : "one page-locked host allocation, which every GPU copies from") +
             "); that needs every GPU in that process (--processes one)";
  }
  if (c.replicate > 1)
    return n + " with --replicate " + std::to_string(c.replicate) +
           ": every GPU's strategy keeps its own host copy of the replicated set, which the "
           "host-memory check counts once; several GPUs run --replicate 1 so far (--emulate-gpus "
           "runs it on one GPU)";
  if (!kHaveNccl) return n + ": " + kNcclHowTo;
  if (!runs_on_several_gpus(c.strategy->name))
    return n + " with --strategy " + std::string(c.strategy->name) +
           ": not a strategy of the registry (memstrat list)";
  if (c.scenario == Scenario::Stream && c.augment == Augment::None)
    return n + " with --scenario stream --augment none: the GPU would gather each batch from a "
               "whole set of its own on every GPU; several GPUs run the stream scenario with "
               "host workers (--augment light or heavy) so far (--emulate-gpus runs it on one "
               "GPU)";
  if (c.augment_device == AugmentDevice::Gpu && c.scenario != Scenario::Static)
    return n + " with --augment-device gpu: each GPU's strategy would augment its shard from a "
               "set of its own on that GPU; several GPUs augment on the host so far "
               "(--emulate-gpus runs it on one GPU)";
  const std::vector<Scenario> scenarios = several_gpu_scenarios(c.strategy->name);
  if (std::find(scenarios.begin(), scenarios.end(), c.scenario) == scenarios.end())
    return n + " with --scenario " + std::string(to_string(c.scenario)) + " and --strategy " +
           std::string(c.strategy->name) + ": several GPUs run it in the " +
           (scenarios.size() == 1 ? "static scenario only" : "static and refresh scenarios" +
            std::string(scenarios.size() == 3 ? " and, with host workers, stream" : ""));
  if (const std::string why = nvls_refusal(nccl_settings()); !why.empty()) return n + ": " + why;
  return "";
}

}  // namespace memstrat
