// launch_request.h: from --launch-form to the epoch form a Trainer runs. choose_epoch_form is the
// rule (auto: the form the strategy was built for, as before --launch-form existed; a form by
// name: exactly that form, or a refusal, never another); launch_form_refusal says before any
// device work why a run's asked form cannot run (the strategy's declared forms in the scenario,
// the step a kernel form needs). Pure C++ apart from the device query it is given, so both are
// tested without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "experiments/core/run_config.h"
#include "experiments/core/step_choice.h"
#include "memory_strategies/launch_forms.h"

namespace memstrat {

/// What the choice reads of the strategy and the step.
struct EpochFormInputs {
  std::string strategy;  // its name, for the reasons
  /// acquire_ahead(), launch_group(), epoch_capturable(): the forms the strategy takes by itself
  /// (auto).
  LaunchForms own;
  /// launch_forms(): every form its data path allows (a form asked for by name).
  LaunchForms allowed;
  bool multi_step = false;  // the Mlp runs several steps in one launch (the single-launch step)
  std::string step_kind;    // "single-launch", ...
  int batches = 0;          // of an epoch
  /// Kernel-per-chunk asked of a strategy with no groups of its own (allowed.launch_group == 0):
  /// batches per launch (cut_launch_group).
  int cut_group = 1;
};

/// The form an epoch runs in.
struct EpochFormChoice {
  EpochForm form = EpochForm::PerBatch;
  int group = 0;  // kernel forms: batches per launch (the last launch may hold fewer)
  /// Per-batch: why not one launch per epoch (config.epoch_launch_off_reason).
  std::string off_reason;
};

/// Auto: kernel where own.acquire_ahead, else kernel-per-chunk where own.launch_group (both only
/// with a multi-step Mlp), else graph where own.epoch_capturable, else per-batch with the reason.
/// A form by name: that form where `allowed` allows it (a kernel form also needs multi_step; its
/// groups are allowed.launch_group, or cut_group where the strategy has none); otherwise throws
/// std::invalid_argument saying why.
EpochFormChoice choose_epoch_form(LaunchForm asked, const EpochFormInputs& in);

/// Batches per launch where the trainer cuts an epoch for kernel-per-chunk: as many whole
/// batches as one --copy-chunk chunk holds in the packed layout (ChunkPlan::packed), i.e. the
/// chunks pinned-graph, double-buffer-graph and zero-copy-staged copy at the same --copy-chunk.
int cut_launch_group(const RunConfig& c, int features, std::int64_t samples);

/// What a device says about the single-launch step (step_choice.h) when only the options are
/// judged: it runs anywhere.
std::string any_device_runs_it(int hidden, int classes);

/// Why `c`'s --launch-form cannot run; "" when it can (always for auto). First the strategy's
/// declared forms in the scenario (launch_form_refusal in registry.h), then, for a kernel form,
/// the step: only the single-launch step runs several steps in one launch, and the step
/// `c` takes (choose_step with `here`) must be it. With any_device_runs_it the answer depends on
/// the options alone (a refusal before any device work: exit 2); with
/// kernels::step_unsupported_here on the device too (a waiver: exit 3).
std::string launch_form_refusal(const RunConfig& c, int features, int classes,
                                SingleLaunchHere here);

}  // namespace memstrat
