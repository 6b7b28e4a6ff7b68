// train_step.cpp: what a TrainStep without a multi-step launch answers (see train_step.h).
#include "experiments/core/train_step.h"

#include <stdexcept>

namespace memstrat {

void TrainStep::reserve_steps(int) {
  throw std::logic_error("Mlp::reserve_steps: only the single-launch step runs several steps per launch");
}

void TrainStep::train_steps(const std::vector<BatchView>&, float*, std::int32_t*, int) {
  throw std::logic_error("Mlp::train_steps: only the single-launch step runs several steps per launch");
}

void TrainStep::gradients(const BatchView&, float, float*, float*, std::int32_t*) {
  throw std::logic_error("Mlp::shard_gradients: only the layer-by-layer step computes gradients "
                         "apart from its update");
}

void TrainStep::update(const float*) {
  throw std::logic_error("Mlp::apply_gradients: only the layer-by-layer step computes gradients "
                         "apart from its update");
}

}  // namespace memstrat
