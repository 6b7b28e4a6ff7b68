// cli.h: the `memstrat` command line: parse (CLI11) into typed requests and validate them
// before any device work, so a bad flag is reported in milliseconds on any machine.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "experiments/core/mlp.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

struct TrainArgs {
  std::string strategy = "resident";
  int epochs = 10;
  int batch = 256;
  std::string hidden = "256";
  std::string transfer = "u8";
  std::string scenario = "static";
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;
  std::string gemm = "cublas";
  bool tf32 = false;
  std::string graphs = "on";
  std::string fused = "on";
  std::string epoch_launch = "on";
  int depth = 2;
  int copy_streams = 1;
  std::string advise = "read-mostly,preferred-device,accessed-by";
  std::string data;
  std::int64_t train_samples = 0;  // 0 = all
  std::int64_t test_samples = 0;
  std::string json;
  std::string run_tag;
  std::string trace;
  std::string loss_curve;
  std::string export_init;
  bool profile = true;
  bool quiet = false;
  int device = 0;
};

enum class Command { List, Info, Train };

struct CliRequest {
  Command command = Command::List;
  TrainArgs train;
  std::vector<std::string> argv;
};

/// Parses argv. Returns an exit code when parsing already decided the outcome (--help: 0,
/// usage error: 2, messages written to `out`/`err`); std::nullopt when `req` should be run.
std::optional<int> parse_cli(int argc, const char* const* argv, CliRequest& req, std::ostream& out,
                             std::ostream& err);

/// Typed, validated configuration. Throws std::invalid_argument naming the option and the fix.
struct TrainConfig {
  StrategyOptions strategy;
  MlpConfig mlp;  // layers[0] and layers.back() are filled in once the data set is known
  bool graphs = true;
  bool epoch_launch = true;
};
TrainConfig make_train_config(const TrainArgs& a);
AdviseSet parse_advise(const std::string& s);

}  // namespace memstrat
