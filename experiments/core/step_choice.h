// step_choice.h: choose_step, the rule that maps a configuration (and what the GPU supports) to
// the one step implementation an Mlp runs, with the reasons the faster ones do not apply. Pure
// C++ apart from the device query it is given, so it is tested without a GPU.
#pragma once

#include <string>

#include "experiments/core/mlp_config.h"

namespace memstrat {

/// The implementation a configuration runs and why the others do not.
struct StepChoice {
  StepKind kind = StepKind::Layerwise;  // SingleLaunch, LtFused or Layerwise (never Auto)
  std::string single_off_reason;        // why not SingleLaunch ("" when it is)
  std::string fused_off_reason;         // why neither fused step ("" unless Layerwise)
};

/// What the device says about the single-launch step for (hidden, classes): "" when it can run
/// it, else why not (kernels::step_unsupported_here).
using SingleLaunchHere = std::string (*)(int hidden, int classes);

/// SingleLaunch when asked for (Auto: within kSingleLaunchMaxWork) and the configuration and
/// `here` allow it; else LtFused when asked for (not Layerwise) and the configuration allows
/// it; else Layerwise. Auto with c.batch_in_host_memory takes Layerwise. `here` is asked only
/// when the configuration would take the single-launch step.
StepChoice choose_step(const MlpConfig& c, SingleLaunchHere here);

/// Why data-parallel training does not run the cuBLASLt fused step (the record's
/// fused_off_reason where choose_gradient_step falls back from it, and --fused lt's refusal).
inline constexpr const char* kDataParallelStepReason =
    "data-parallel training combines the shards' gradients between the backward pass and the "
    "update; the cuBLASLt fused step computes its last gradients inside its update kernel, so it "
    "cannot stop before the update (the single-launch and layer-by-layer steps can)";

/// The step of a run that combines gradients between the backward pass and the update
/// (data-parallel training: TrainStep::gradients, then TrainStep::update): choose_step's choice
/// where that step computes gradients apart from its update (single-launch, layer-by-layer);
/// a cuBLASLt fused choice becomes the layer-by-layer step, its fused_off_reason
/// kDataParallelStepReason.
StepChoice choose_gradient_step(const MlpConfig& c, SingleLaunchHere here);

}  // namespace memstrat
