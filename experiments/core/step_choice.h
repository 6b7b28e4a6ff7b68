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

}  // namespace memstrat
