// launch_request.cpp: choose_epoch_form, cut_launch_group and launch_form_refusal (see
// launch_request.h).
#include "experiments/core/launch_request.h"

#include <algorithm>
#include <stdexcept>

#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample

namespace memstrat {

namespace {

// --launch-form auto, exactly as the epoch launch chose before forms could be asked for by name
// (the off reasons included: records compare them).
EpochFormChoice auto_form(const EpochFormInputs& in) {
  EpochFormChoice c;
  c.group = in.own.acquire_ahead ? in.batches : std::min(in.own.launch_group, in.batches);
  std::string no_kernel;  // why not a kernel form
  if (c.group < 1)
    no_kernel = "strategy " + in.strategy + " moves each batch while the previous ones compute";
  else if (!in.multi_step)
    no_kernel = "the " + in.step_kind + " step runs one launch per batch";
  if (no_kernel.empty()) {
    // A strategy's launch groups keep their form when one group is the whole epoch.
    c.form = in.own.acquire_ahead ? EpochForm::Kernel : EpochForm::ChunkKernels;
  } else if (in.own.epoch_capturable) {
    c.form = EpochForm::Graph;
  } else {
    c.form = EpochForm::PerBatch;
    c.off_reason =
        no_kernel + ", and strategy " + in.strategy + " cannot be captured as one epoch graph";
  }
  return c;
}

[[noreturn]] void refuse(EpochForm f, const std::string& why) {
  throw std::invalid_argument("--launch-form " + std::string(to_string(f)) + ": " + why);
}

}  // namespace

EpochFormChoice choose_epoch_form(LaunchForm asked, const EpochFormInputs& in) {
  const std::optional<EpochForm> form = asked_form(asked);
  if (!form) return auto_form(in);
  EpochFormChoice c;
  c.form = *form;
  if (!in.allowed.allows(c.form))
    refuse(c.form, "strategy " + in.strategy + " does not allow it here (it allows " +
                       forms_of(in.allowed).to_string() + ")");
  switch (c.form) {
    case EpochForm::PerBatch:
      c.off_reason = "per-batch asked for (--launch-form per-batch, or --epoch-launch off)";
      break;
    case EpochForm::Graph:
      break;
    case EpochForm::Kernel:
    case EpochForm::ChunkKernels:
      if (!in.multi_step)
        refuse(c.form, "the " + in.step_kind +
                           " step runs one launch per batch; only the single-launch step runs "
                           "several steps in one launch");
      c.group = c.form == EpochForm::Kernel   ? in.batches
                : in.allowed.launch_group > 0 ? in.allowed.launch_group
                                              : in.cut_group;
      c.group = std::max(1, std::min(c.group, in.batches));
      break;
  }
  return c;
}

int cut_launch_group(const RunConfig& c, int features, std::int64_t samples) {
  const BatchGeometry g{samples, c.batch, transfer_bytes_per_sample(features, c.transfer)};
  return ChunkPlan::packed(g, static_cast<std::size_t>(c.copy_chunk_mib) << 20).batches_per_chunk();
}

std::string any_device_runs_it(int, int) { return ""; }

std::string launch_form_refusal(const RunConfig& c, int features, int classes,
                                SingleLaunchHere here) {
  const std::optional<EpochForm> form = asked_form(c.launch_form);
  if (!form) return "";
  if (std::string why = launch_form_refusal(*c.strategy, strategy_options(c), *form); !why.empty())
    return why;
  if (!is_kernel_form(*form)) return "";
  const StepChoice step = choose_step(mlp_config(c, features, classes), here);
  if (step.kind == StepKind::SingleLaunch) return "";
  return "it runs several steps in one launch, which only the single-launch step does; this run "
         "takes the " +
         std::string(to_string(step.kind)) + " step (" + step.single_off_reason +
         "; --fused single asks for the single-launch step)";
}

}  // namespace memstrat
