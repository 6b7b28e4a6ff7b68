#include "experiments/core/run_config.h"

namespace memstrat {

namespace {
/// --fused as MlpConfig's choice of step: the one place that maps it.
void set_step(MlpConfig& m, FusedMode f) {
  m.fused = f != FusedMode::Off;
  m.single_launch = f == FusedMode::On || f == FusedMode::Single;
  m.single_launch_any_size = f == FusedMode::Single;
}
}  // namespace

StrategyOptions strategy_options(const RunConfig& c) {
  StrategyOptions o;
  o.batch = c.batch;
  o.transfer = c.transfer;
  o.scenario = c.scenario;
  o.depth = c.depth;
  o.copy_streams = c.copy_streams;
  o.advise = c.advise;
  o.seed = c.seed;
  return o;
}

MlpConfig mlp_config(const RunConfig& c, int features, int classes) {
  MlpConfig m;
  m.layers = {features};
  m.layers.insert(m.layers.end(), c.hidden.begin(), c.hidden.end());
  m.layers.push_back(classes);
  m.max_batch = c.batch;
  m.gemm = c.gemm;
  m.tf32 = c.tf32;
  m.lr = c.lr;
  m.momentum = c.momentum;
  m.seed = c.seed;
  set_step(m, c.fused);
  return m;
}

}  // namespace memstrat
