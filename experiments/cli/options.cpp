#include "experiments/cli/options.h"

#include <CLI/CLI.hpp>

#include <ostream>
#include <sstream>
#include <stdexcept>

#include "memory_strategies/registry.h"

namespace memstrat {

namespace {
std::vector<std::string> registry_names() {
  std::vector<std::string> n;
  for (const auto& e : strategy_registry()) n.emplace_back(e.name);
  return n;
}
}  // namespace

std::optional<int> parse_cli(int argc, const char* const* argv, CliRequest& req, std::ostream& out,
                             std::ostream& err) {
  req.argv.assign(argv, argv + argc);
  CLI::App app{
      "memstrat: how should a training loop move its data to the GPU? Trains one MNIST MLP on "
      "interchangeable memory strategies and measures each (CUDA events, CUPTI, NVTX).\n"
      "Start with `memstrat list`, `memstrat info`, then e.g.\n"
      "  memstrat train --strategy double-buffer --epochs 10 --batch 256 --transfer u8 "
      "--scenario refresh --json results/run.jsonl"};
  app.require_subcommand(1);

  app.add_subcommand("list", "List the memory strategies, one per line")
      ->callback([&] { req.command = Command::List; });
  auto* info = app.add_subcommand("info", "Show the GPU and the properties that matter to the strategies");
  info->add_option("--device", req.train.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  info->callback([&] { req.command = Command::Info; });

  TrainArgs& a = req.train;
  auto* t = app.add_subcommand("train", "Train the MLP with one memory strategy and report per-epoch figures");
  t->callback([&] { req.command = Command::Train; });
  t->add_option("-s,--strategy", a.strategy, "Memory strategy (see `memstrat list`)")
      ->check(CLI::IsMember(registry_names()))
      ->capture_default_str();
  t->add_option("-e,--epochs", a.epochs, "Epochs; epoch 1 is reported separately as warm-up")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  t->add_option("-b,--batch", a.batch, "Batch size (rows); the last batch of an epoch may be partial")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  t->add_option("--hidden", a.hidden, "Hidden layer sizes, comma separated (e.g. 256 or 512,256)")
      ->capture_default_str();
  t->add_option("--transfer", a.transfer, "u8: move raw pixels, normalise on the GPU; f32: move normalised floats (4x bytes)")
      ->check(CLI::IsMember({"u8", "f32"}))->capture_default_str();
  t->add_option("--scenario", a.scenario, "static: data never changes; refresh: host rewrites it every epoch (shift augmentation)")
      ->check(CLI::IsMember({"static", "refresh"}))->capture_default_str();
  t->add_option("--lr", a.lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  t->add_option("--momentum", a.momentum, "SGD momentum (0 = plain SGD)")->check(CLI::Range(0.0, 0.999))->capture_default_str();
  t->add_option("--seed", a.seed, "Seed for weights, shuffling and augmentation")->capture_default_str();
  t->add_option("--gemm", a.gemm, "GEMM backend")->check(CLI::IsMember({"cublas", "tiled"}))->capture_default_str();
  t->add_flag("--tf32", a.tf32, "Allow TF32 tensor-core math in cuBLAS (changes results slightly)");
  t->add_option("--graphs", a.graphs, "Replay each batch's MLP step as a CUDA graph")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  t->add_option("--fused", a.fused,
                "One-hidden-layer MLP with cuBLAS. on: the whole step in one kernel launch where "
                "it applies and is faster (fp32, not with --tf32, batch x hidden <= 262144), else "
                "lt; single: the one-launch step at any size it takes; lt: cuBLASLt GEMMs + fused "
                "kernels (4-5 launches per step); off: the layer-by-layer path (13)")
      ->check(CLI::IsMember({"on", "single", "lt", "off"}))->capture_default_str();
  t->add_option("--epoch-launch", a.epoch_launch,
                "on: where the strategy lets every batch be acquired up front (resident) and the "
                "step is the single-launch one, run the whole epoch's steps in ONE kernel launch "
                "(bitwise the same training; no per-batch launch or event); off: one launch per batch")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  t->add_option("--depth", a.depth, "double-buffer: device batch buffers in flight (>= 2)")
      ->check(CLI::Range(2, 64))->capture_default_str();
  t->add_option("--copy-streams", a.copy_streams, "double-buffer: copy streams used round-robin")
      ->check(CLI::Range(1, 16))->capture_default_str();
  t->add_option("--advise", a.advise, "um-advise: comma-separated subset of read-mostly,preferred-device,accessed-by (or none)")
      ->capture_default_str();
  t->add_option("--data", a.data, "MNIST directory (default: $MEMSTRAT_DATA, data/mnist, ../shared/data/mnist)");
  t->add_option("--train-samples", a.train_samples, "Use only the first N training samples (0 = all)")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--test-samples", a.test_samples, "Use only the first N test samples (0 = all)")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--json", a.json, "Append one JSON Lines record for this run to FILE (docs/results_schema.md)");
  t->add_option("--run-tag", a.run_tag, "Free-form tag stored as config.run_tag (the matrix runner's cell id)");
  t->add_flag("--profile,!--no-profile", a.profile, "CUPTI API-call and unified-memory counters per epoch (default on)");
  t->add_option("--trace", a.trace, "Write a Chrome trace-event JSON (Perfetto / chrome://tracing) to FILE");
  t->add_option("--loss-curve", a.loss_curve, "Write per-batch mean losses (CSV: epoch,batch,loss) to FILE");
  t->add_option("--export-init", a.export_init, "Write initial weights and the epoch-1 sample order to DIR (for baselines)");
  t->add_flag("-q,--quiet", a.quiet, "Only the summary, no per-epoch lines");
  t->add_option("--device", a.device, "CUDA device index")->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    if (code != 0 && dynamic_cast<const CLI::CallForHelp*>(&e) == nullptr &&
        dynamic_cast<const CLI::CallForAllHelp*>(&e) == nullptr)
      err << "memstrat: run `memstrat --help` or `memstrat train --help` for the options\n";
    return code == 0 ? 0 : 2;
  }
  if (req.command == Command::Train) {
    if (!a.trace.empty() && !a.profile) {
      err << "memstrat: --trace needs the CUPTI profiler; drop --no-profile\n";
      return 2;
    }
    try {
      make_train_config(a);
    } catch (const std::invalid_argument& e) {
      err << "memstrat: " << e.what() << "\n";
      return 2;
    }
  }
  return std::nullopt;
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

TrainConfig make_train_config(const TrainArgs& a) {
  TrainConfig c;
  if (!find_strategy(a.strategy))
    throw std::invalid_argument("unknown strategy '" + a.strategy + "'; choose one of: " + strategy_names());
  if (a.batch <= 0) throw std::invalid_argument("--batch must be > 0");
  if (a.epochs <= 0) throw std::invalid_argument("--epochs must be > 0");
  c.strategy.batch = a.batch;
  c.strategy.transfer = a.transfer == "f32" ? Transfer::F32 : Transfer::U8;
  c.strategy.scenario = a.scenario == "refresh" ? Scenario::Refresh : Scenario::Static;
  c.strategy.depth = a.depth;
  c.strategy.copy_streams = a.copy_streams;
  c.strategy.advise = parse_advise(a.advise);
  c.strategy.seed = a.seed;
  const std::vector<int> hidden = parse_hidden(a.hidden);
  c.mlp.layers = {0};
  c.mlp.layers.insert(c.mlp.layers.end(), hidden.begin(), hidden.end());
  c.mlp.layers.push_back(0);
  c.mlp.max_batch = a.batch;
  c.mlp.gemm = a.gemm == "tiled" ? kernels::GemmBackend::Tiled : kernels::GemmBackend::Cublas;
  c.mlp.tf32 = a.tf32;
  c.mlp.lr = a.lr;
  c.mlp.momentum = a.momentum;
  c.mlp.seed = a.seed;
  c.graphs = a.graphs == "on";
  c.epoch_launch = a.epoch_launch == "on";
  c.mlp.fused = a.fused != "off";
  c.mlp.single_launch = a.fused == "on" || a.fused == "single";
  c.mlp.single_launch_any_size = a.fused == "single";
  return c;
}

}  // namespace memstrat
