#include "experiments/core/run_config.h"

#include <sstream>
#include <stdexcept>

namespace memstrat {

namespace {
/// --fused as MlpConfig's choice of step: the one place that maps it.
void set_step(MlpConfig& m, FusedMode f) {
  m.fused = f != FusedMode::Off;
  m.single_launch = f == FusedMode::On || f == FusedMode::Single;
  m.single_launch_any_size = f == FusedMode::Single;
}
}  // namespace

std::string_view to_string(FusedMode m) {
  switch (m) {
    case FusedMode::On: return "on";
    case FusedMode::Single: return "single";
    case FusedMode::Lt: return "lt";
    case FusedMode::Off: return "off";
  }
  return "?";
}
std::string_view to_string(Graphs g) { return g == Graphs::On ? "on" : "off"; }
std::string_view to_string(EpochLaunch e) { return e == EpochLaunch::On ? "on" : "off"; }

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

AdviseSet parse_advise(const std::string& s) {
  AdviseSet a{false, false, false};
  if (s == "none" || s.empty()) return a;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok == "read-mostly") a.read_mostly = true;
    else if (tok == "preferred-device") a.preferred_device = true;
    else if (tok == "accessed-by") a.accessed_by = true;
    else
      throw std::invalid_argument("--advise: unknown hint '" + tok +
                                  "'; use a comma-separated subset of "
                                  "read-mostly,preferred-device,accessed-by, or none");
  }
  return a;
}

void check_consistent(const RunConfig& c) {
  if (!c.trace.empty() && !c.profile)
    throw std::invalid_argument("--trace needs the CUPTI profiler; drop --no-profile");
}

std::string hidden_string(const std::vector<int>& hidden) {
  std::string s;
  for (const int h : hidden) s += (s.empty() ? "" : ",") + std::to_string(h);
  return s;
}

}  // namespace memstrat
