// step_choice.cpp: choose_step, choose_gradient_step (see step_choice.h) and StepKind's names.
#include "experiments/core/step_choice.h"

#include <string>

#include "kernels/lt_fused/fused_head_update.h"
#include "kernels/single_launch/step_plan.h"

namespace memstrat {

namespace {

// Auto's rule for a batch the step reads in place from mapped host memory (zero-copy): the
// layer-by-layer step, whose u8 path reads the batch once (the normalise kernel writes it to
// device memory), never a fused step, which reads X where it lies each time it needs it. One
// rule for both transfer formats (see docs/strategies.md, "Which step reads a mapped batch").
constexpr const char* kInHostMemory = "the batch is read in place from mapped host memory";

// Why the cuBLASLt fused step does not apply ("" when it does).
std::string lt_fused_off(const MlpConfig& c) {
  if (c.step == StepKind::Layerwise) return "off in the configuration";
  if (c.layers.size() != 3) return "the fused step needs exactly one hidden layer";
  if (c.gemm != kernels::GemmBackend::Cublas) return "the fused step needs the cuBLAS backend";
  if (std::string why = kernels::fused_mlp_unsupported(c.layers[1], c.layers[2]); !why.empty())
    return why;
  if (c.step == StepKind::Auto && c.batch_in_host_memory)
    return std::string(kInHostMemory) +
           ", where --fused on takes the layer-by-layer step (--fused lt forces the cuBLASLt one)";
  return "";
}

// Why the configuration does not take the single-launch step ("" when it does; the device is
// asked separately).
std::string single_launch_off(const MlpConfig& c) {
  if (c.step == StepKind::Layerwise) return "off in the configuration";
  if (c.step == StepKind::LtFused) return "single-launch step off in the configuration";
  if (c.layers.size() != 3) return "the single-launch step needs exactly one hidden layer";
  if (c.gemm != kernels::GemmBackend::Cublas)
    return "the single-launch step stands in for the cuBLAS backend only";
  if (c.tf32) return "TF32 asks for tensor-core GEMMs; the single-launch step is fp32 only";
  if (std::string why = kernels::step_unsupported(c.layers[0], c.layers[1], c.layers[2]);
      !why.empty())
    return why;
  if (c.step == StepKind::Auto && c.batch_in_host_memory)
    return std::string(kInHostMemory) +
           "; the single-launch step would read it over PCIe several times (--fused single "
           "forces it)";
  const long long work = static_cast<long long>(c.max_batch) * c.layers[1];
  if (c.step != StepKind::SingleLaunch && work > kSingleLaunchMaxWork)
    return "batch × hidden = " + std::to_string(work) + " > " +
           std::to_string(kSingleLaunchMaxWork) +
           ": cuBLASLt is faster there (--fused single forces the single-launch step)";
  return "";
}

}  // namespace

std::string_view to_string(StepKind k) {
  switch (k) {
    case StepKind::Auto:
      return "auto";
    case StepKind::SingleLaunch:
      return "single-launch";
    case StepKind::LtFused:
      return "cublaslt-fused";
    case StepKind::Layerwise:
      return "layer-by-layer";
  }
  return "unknown";
}

StepChoice choose_step(const MlpConfig& c, SingleLaunchHere here) {
  StepChoice r;
  r.fused_off_reason = lt_fused_off(c);
  r.single_off_reason = single_launch_off(c);
  if (r.single_off_reason.empty()) r.single_off_reason = here(c.layers[1], c.layers[2]);
  if (r.single_off_reason.empty()) {
    r.kind = StepKind::SingleLaunch;
    r.fused_off_reason.clear();
  } else if (r.fused_off_reason.empty()) {
    r.kind = StepKind::LtFused;
  } else {
    r.kind = StepKind::Layerwise;
  }
  return r;
}

StepChoice choose_gradient_step(const MlpConfig& c, SingleLaunchHere here) {
  StepChoice r = choose_step(c, here);
  if (r.kind == StepKind::LtFused) {
    r.kind = StepKind::Layerwise;
    r.fused_off_reason = kDataParallelStepReason;
  }
  return r;
}

}  // namespace memstrat
