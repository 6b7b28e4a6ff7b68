// mlp_config.h: MlpConfig, what an Mlp is built from, and StepKind, which implementation of the
// training step (TrainStep, train_step.h) it asks for.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/common/gemm.h"

namespace memstrat {

/// Which implementation of the training step a configuration asks for (the CLI's
/// --fused on|single|lt|off). A kind that does not apply to the configuration or the GPU falls
/// back, SingleLaunch -> LtFused -> Layerwise, and says why (choose_step, step_choice.h); the
/// three implementations compute the same function and differ only in fp32 summation order.
enum class StepKind {
  /// --fused on: SingleLaunch where it applies and is the faster one, i.e. max_batch·hidden <=
  /// kSingleLaunchMaxWork (measured on an H200: faster than cuBLASLt up to batch 1024 × hidden
  /// 256 and batch 256 × hidden 1024, slower at batch 1024 × hidden 1024); else LtFused. When the
  /// batch is read in place from host memory (MlpConfig::batch_in_host_memory): Layerwise.
  Auto,
  /// --fused single: the whole step in ONE cooperative kernel launch, at any size it takes
  /// (one hidden layer, cuBLAS backend, fp32 only: not with tf32; kernels/single_launch/).
  SingleLaunch,
  /// --fused lt: cuBLASLt GEMMs + fused kernels, 4-5 launches per step (one hidden layer, cuBLAS
  /// backend, a shape kernels/lt_fused/ takes).
  LtFused,
  /// --fused off: the layer-by-layer path (any depth, either GEMM backend; 13 launches for one
  /// hidden layer on cuBLAS).
  Layerwise,
};

/// The name a run record gives the implementation: "single-launch", "cublaslt-fused",
/// "layer-by-layer" ("auto" for Auto, which names a request, not an implementation).
std::string_view to_string(StepKind k);

/// Largest max_batch·hidden for which StepKind::Auto picks the single-launch step.
inline constexpr long long kSingleLaunchMaxWork = 262144;

struct MlpConfig {
  std::vector<int> layers = {784, 256, 10};  // input, hidden..., classes
  int max_batch = 256;
  kernels::GemmBackend gemm = kernels::GemmBackend::Cublas;
  bool tf32 = false;
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;
  /// The step implementation asked for (see StepKind; chosen once, when the Mlp is built).
  StepKind step = StepKind::Auto;
  /// The step reads each batch in place from host memory over the bus (the strategy's
  /// StrategyEntry::batch_in_host_memory): Auto then takes the layer-by-layer step, whatever the
  /// transfer format (choose_step).
  bool batch_in_host_memory = false;
  /// Block slots of its cooperative grid the single-launch step leaves to a kernel the strategy
  /// runs beside every step (StrategyEntry::blocks_beside_step: zero-copy-staged's staging
  /// kernel), so that the two run at once instead of taking turns. Timing only: the step's
  /// results do not depend on its grid. The other steps ignore it.
  int step_free_blocks = 0;
};

}  // namespace memstrat
