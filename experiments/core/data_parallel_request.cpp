#include "experiments/core/data_parallel_request.h"

#include "common/nccl_settings.h"

namespace memstrat {

bool runs_on_several_gpus(std::string_view strategy) {
  return strategy == "resident" || strategy == "pinned";
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
  if (c.fused == FusedMode::Single || c.fused == FusedMode::Lt)
    return n + " with --fused " + std::string(to_string(c.fused)) + ": " +
           kDataParallelStepReason + "; use --fused on or off (the layer-by-layer step)";
  if (c.launch_form != LaunchForm::Auto && c.launch_form != LaunchForm::PerBatch)
    return n + " with --launch-form " + std::string(to_string(c.launch_form)) + ": " +
           kDataParallelFormReason + "; use --launch-form auto or per-batch";
  if (c.gpus == 1) return "";
  if (!kHaveNccl) return n + ": " + kNcclHowTo;
  if (!runs_on_several_gpus(c.strategy->name))
    return n + " with --strategy " + std::string(c.strategy->name) +
           ": several GPUs run resident and pinned so far (--emulate-gpus runs every strategy "
           "on one GPU)";
  if (c.scenario != Scenario::Static)
    return n + " with --scenario " + std::string(to_string(c.scenario)) +
           ": several GPUs run the static scenario so far";
  if (const std::string why = nvls_refusal(nccl_settings()); !why.empty()) return n + ": " + why;
  return "";
}

}  // namespace memstrat
