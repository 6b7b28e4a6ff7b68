// train_step.cpp: what a TrainStep without a multi-step launch or separate gradients answers,
// and update_parameters (see train_step.h).
#include "experiments/core/train_step.h"

#include <stdexcept>

#include "common/nvtx.h"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat {

void TrainStep::reserve_steps(int) {
  throw std::logic_error("Mlp::reserve_steps: only the single-launch step runs several steps per launch");
}

void TrainStep::train_steps(const std::vector<BatchView>&, float*, std::int32_t*, int) {
  throw std::logic_error("Mlp::train_steps: only the single-launch step runs several steps per launch");
}

void TrainStep::gradients(const BatchView&, float, float*, float*, std::int32_t*) {
  throw std::logic_error(
      "Mlp::shard_gradients: only the single-launch and layer-by-layer steps "
      "compute gradients apart from their update");
}

void TrainStep::update(const float*) {
  throw std::logic_error(
      "Mlp::apply_gradients: only the single-launch and layer-by-layer steps "
      "compute gradients apart from their update");
}

void update_parameters(const MlpConfig& cfg, const MlpBuffers& buf, const float* grads,
                       cudaStream_t stream) {
  NvtxRange r(Phase::Update, "update");
  kernels::sgd_update(buf.params, grads, buf.velocity, buf.count, cfg.lr, cfg.momentum, stream);
}

}  // namespace memstrat
