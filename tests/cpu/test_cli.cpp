// CLI parsing and validation (no GPU needed), and the binary's behaviour on bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "cli_test_support.h"
#include "common/cuda_raii.h"
#include "common/run_record.h"
#include "experiments/core/run_config.h"
#include "memory_strategies/registry.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
// The MNIST directory the tests can use: $MEMSTRAT_DATA, else the checkout's data/mnist.
std::string mnist_dir() {
  const char* env = std::getenv("MEMSTRAT_DATA");
  const std::string d = env && *env ? env : std::string(MEMSTRAT_SOURCE_DIR) + "/data/mnist";
  if (FILE* f = std::fopen((d + "/train-labels-idx1-ubyte.gz").c_str(), "rb")) {
    std::fclose(f);
    return d;
  }
  return "";
}
MlpConfig mlp_of(const RunConfig& c) { return mlp_config(c, 784, 10); }
}  // namespace

TEST(Cli, DefaultsMatchTheDesign) {
  auto p = parse({"train"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.command, Command::Train);
  const RunConfig& c = p.req.run;
  EXPECT_EQ(c.strategy->name, "resident");
  EXPECT_EQ(strategy_options(c).batch, 256);
  EXPECT_EQ(c.transfer, Transfer::U8);
  EXPECT_EQ(c.scenario, Scenario::Static);
  const MlpConfig m = mlp_of(c);
  EXPECT_EQ(m.layers, (std::vector<int>{784, 256, 10}));
  EXPECT_EQ(m.max_batch, 256);
  EXPECT_EQ(c.graphs, Graphs::On);
  EXPECT_EQ(m.step, StepKind::Auto);  // fused, the single-launch step where it is faster
  EXPECT_TRUE(c.profile);
}

TEST(Cli, FusedChoosesTheStepImplementation) {
  for (auto [value, kind] :
       {std::pair{"on", StepKind::Auto}, std::pair{"single", StepKind::SingleLaunch},
        std::pair{"lt", StepKind::LtFused}, std::pair{"off", StepKind::Layerwise}}) {
    auto p = parse({"train", "--fused", value});
    ASSERT_FALSE(p.code) << p.err;
    EXPECT_EQ(mlp_of(p.req.run).step, kind) << value;
  }
}

TEST(Cli, LaunchFormIsAutoByDefaultAndNamesEveryForm) {
  auto p = parse({"train"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.launch_form, LaunchForm::Auto);
  for (auto [value, form] : {std::pair{"auto", LaunchForm::Auto},
                             std::pair{"per-batch", LaunchForm::PerBatch},
                             std::pair{"graph", LaunchForm::Graph},
                             std::pair{"kernel-per-chunk", LaunchForm::ChunkKernels},
                             std::pair{"kernel", LaunchForm::Kernel}}) {
    p = parse({"train", "--launch-form", value});  // resident runs every form
    ASSERT_FALSE(p.code) << value << ": " << p.err;
    EXPECT_EQ(p.req.run.launch_form, form) << value;
    EXPECT_EQ(to_string(form), std::string(value));
  }
  p = parse({"train", "--launch-form", "epoch"});
  EXPECT_EQ(p.code, 2);
}

// --epoch-launch on|off is the older spelling of --launch-form auto|per-batch; both may be given
// where they say the same.
TEST(Cli, EpochLaunchIsTheOlderSpellingOfLaunchForm) {
  auto p = parse({"train", "--epoch-launch", "off"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.launch_form, LaunchForm::PerBatch);
  p = parse({"train", "--epoch-launch", "on"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.launch_form, LaunchForm::Auto);
  p = parse({"train", "--epoch-launch", "maybe"});
  EXPECT_EQ(p.code, 2);
  for (const auto& [old, form] : {std::pair{"on", "auto"}, std::pair{"off", "per-batch"}}) {
    p = parse({"train", "--epoch-launch", old, "--launch-form", form});
    ASSERT_FALSE(p.code) << old << " " << form << ": " << p.err;
    p = parse({"train", "--launch-form", form, "--epoch-launch", old});
    ASSERT_FALSE(p.code) << form << " " << old << ": " << p.err;
  }
  for (const auto& [old, form] : {std::pair{"on", "per-batch"}, std::pair{"on", "graph"},
                                  std::pair{"off", "auto"}, std::pair{"off", "kernel"}}) {
    p = parse({"train", "--epoch-launch", old, "--launch-form", form});
    ASSERT_TRUE(p.code) << old << " " << form;
    EXPECT_EQ(*p.code, 2);
    EXPECT_NE(p.err.find("--epoch-launch " + std::string(old) + " means"), std::string::npos)
        << p.err;
  }
}

TEST(Cli, FullOptionSet) {
  auto p = parse({"train", "-s", "double-buffer", "-e", "3", "-b", "1024", "--hidden", "512,128",
                  "--transfer", "f32", "--scenario", "refresh", "--depth", "3", "--copy-streams", "2",
                  "--gemm", "tiled", "--graphs", "off", "--no-profile",
                  "--seed", "7", "--json", "x.jsonl", "--run-tag", "cell-1", "--fused", "off",
                  "--lr", "0.1", "--momentum", "0.5", "--tf32", "--train-samples", "1000",
                  "--test-samples", "100", "--device", "1", "-q"});
  ASSERT_FALSE(p.code) << p.err;
  const RunConfig& c = p.req.run;
  EXPECT_EQ(c.strategy->name, "double-buffer");
  EXPECT_EQ(c.epochs, 3);
  const StrategyOptions so = strategy_options(c);
  EXPECT_EQ(so.batch, 1024);
  EXPECT_EQ(so.transfer, Transfer::F32);
  EXPECT_EQ(so.scenario, Scenario::Refresh);
  EXPECT_EQ(so.depth, 3);
  EXPECT_EQ(so.copy_streams, 2);
  EXPECT_EQ(so.seed, 7u);
  const MlpConfig m = mlp_of(c);
  EXPECT_EQ(m.layers, (std::vector<int>{784, 512, 128, 10}));
  EXPECT_EQ(m.max_batch, 1024);
  EXPECT_EQ(m.gemm, kernels::GemmBackend::Tiled);
  EXPECT_EQ(m.step, StepKind::Layerwise);
  EXPECT_TRUE(m.tf32);
  EXPECT_FLOAT_EQ(m.lr, 0.1f);
  EXPECT_FLOAT_EQ(m.momentum, 0.5f);
  EXPECT_EQ(m.seed, 7u);
  EXPECT_EQ(c.graphs, Graphs::Off);
  EXPECT_FALSE(c.profile);
  EXPECT_EQ(c.run_tag, "cell-1");
  EXPECT_EQ(c.json, "x.jsonl");
  EXPECT_EQ(c.train_samples, 1000);
  EXPECT_EQ(c.test_samples, 100);
  EXPECT_EQ(c.device, 1);
  EXPECT_TRUE(c.quiet);
  ASSERT_FALSE(c.argv.empty());
  EXPECT_EQ(c.argv.front(), "memstrat");  // the command line as typed, for the record
  EXPECT_EQ(c.argv.back(), "-q");
}

TEST(Cli, HelpExitsZero) {
  auto p = parse({"train", "--help"});
  ASSERT_TRUE(p.code);
  EXPECT_EQ(*p.code, 0);
  EXPECT_NE(p.out.find("--strategy"), std::string::npos);
  EXPECT_NE(p.out.find("--scenario"), std::string::npos);
}

TEST(Cli, BadInputIsAUsageErrorWithAMessage) {
  const std::vector<std::vector<const char*>> bad = {
      {},                                          // no subcommand
      {"frobnicate"},                              // unknown subcommand
      {"train", "--strategy", "teleport"},         // unknown strategy
      {"train", "--batch", "0"},                   // batch 0
      {"train", "--batch", "-5"},
      {"train", "--epochs", "0"},
      {"train", "--hidden", "0"},                  // hidden size 0
      {"train", "--hidden", "256,abc"},
      {"train", "--hidden", ""},
      {"train", "--transfer", "f16"},
      {"train", "--fused", "maybe"},
      {"train", "--scenario", "sometimes"},
      {"train", "--depth", "1"},
      {"train", "--advise", "read-mostly,telepathy"},
      {"train", "--no-such-option"},
      {"train", "--lr", "-1"},
      {"train", "--trace", "t.json", "--no-profile"},  // the trace comes from CUPTI
  };
  for (const auto& args : bad) {
    auto p = parse(args);
    std::string joined;
    for (auto* a : args) joined += std::string(a) + " ";
    ASSERT_TRUE(p.code) << joined;
    EXPECT_EQ(*p.code, 2) << joined;
    EXPECT_FALSE(p.err.empty()) << joined;
  }
}

TEST(Cli, StreamScenarioOptions) {
  auto p = parse({"train", "--scenario", "stream", "--strategy", "double-buffer"});
  ASSERT_FALSE(p.code) << p.err;
  StrategyOptions so = strategy_options(p.req.run);
  EXPECT_EQ(so.scenario, Scenario::Stream);
  // The documented defaults: 4 workers, 8 slots (PyTorch's 2 per worker), the light shift.
  EXPECT_EQ(so.workers, 4);
  EXPECT_EQ(so.prefetch, 8);
  EXPECT_EQ(so.augment, Augment::Light);
  p = parse({"train", "--scenario", "stream", "--strategy", "zero-copy", "--workers", "16",
             "--prefetch", "32", "--augment", "heavy"});
  ASSERT_FALSE(p.code) << p.err;
  so = strategy_options(p.req.run);
  EXPECT_EQ(so.workers, 16);
  EXPECT_EQ(so.prefetch, 32);
  EXPECT_EQ(so.augment, Augment::Heavy);
  for (const char* a : {"none", "light", "heavy"}) {
    p = parse({"train", "--scenario", "stream", "--strategy", "pinned", "--augment", a});
    ASSERT_FALSE(p.code) << a << ": " << p.err;
    EXPECT_EQ(to_string(p.req.run.augment), a);
  }
  // The range ends are accepted.
  for (const char* w : {"1", "256"})
    EXPECT_FALSE(parse({"train", "--scenario", "stream", "--strategy", "pinned", "--workers", w}).code) << w;
  for (const char* k : {"1", "1024"})
    EXPECT_FALSE(parse({"train", "--scenario", "stream", "--strategy", "pinned", "--prefetch", k}).code) << k;
}

// Every refusal is a usage error (exit 2) with a message, before any device work.
TEST(Cli, StreamScenarioRefusals) {
  const std::vector<std::pair<std::vector<const char*>, const char*>> bad = {
      {{"train", "--scenario", "stream", "--strategy", "pinned", "--workers", "0"}, "--workers"},
      {{"train", "--scenario", "stream", "--strategy", "pinned", "--workers", "257"}, "--workers"},
      {{"train", "--scenario", "stream", "--strategy", "pinned", "--prefetch", "0"}, "--prefetch"},
      {{"train", "--scenario", "stream", "--strategy", "pinned", "--prefetch", "1025"}, "--prefetch"},
      {{"train", "--scenario", "stream", "--strategy", "pinned", "--augment", "medium"}, "--augment"},
      // Only the stream scenario reads them.
      {{"train", "--strategy", "pinned", "--workers", "2"}, "add --scenario stream"},
      {{"train", "--scenario", "refresh", "--prefetch", "4"}, "add --scenario stream"},
      {{"train", "--scenario", "static", "--augment", "none"}, "add --scenario stream"},
      // A strategy that no device runs with these options: its registry entry says why.
      {{"train", "--scenario", "stream"}, "resident runs --augment none, or light/heavy with --augment-device gpu"},
      {{"train", "--scenario", "stream", "--augment", "heavy"}, "resident runs --augment none, or light/heavy with --augment-device gpu"},
  };
  for (const auto& [args, says] : bad) {
    const auto p = parse(args);
    std::string joined;
    for (auto* a : args) joined += std::string(a) + " ";
    ASSERT_TRUE(p.code) << joined;
    EXPECT_EQ(*p.code, 2) << joined;
    EXPECT_NE(p.err.find(says), std::string::npos) << joined << ": " << p.err;
  }
  EXPECT_FALSE(parse({"train", "--scenario", "stream", "--augment", "none"}).code)
      << "resident gathers on the GPU";
  EXPECT_FALSE(parse({"train", "--scenario", "stream", "--augment", "heavy", "--augment-device",
                      "gpu"}).code)
      << "resident gathers and augments on the GPU";
}

TEST(Cli, HiddenSizeZeroMessageSaysWhatToDo) {
  auto p = parse({"train", "--hidden", "0"});
  ASSERT_TRUE(p.code);
  EXPECT_NE(p.err.find("--hidden"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("256"), std::string::npos) << p.err;  // an example of a valid value
}

TEST(Cli, AdviseSetsTheHintsOfUmAdvise) {
  const auto p = parse({"train", "--strategy", "um-advise", "--advise", "read-mostly"});
  ASSERT_FALSE(p.code) << p.err;
  const StrategyOptions so = strategy_options(p.req.run);
  EXPECT_TRUE(so.advise.read_mostly);
  EXPECT_FALSE(so.advise.preferred_device);
}

TEST(Cli, AdviseParsing) {
  EXPECT_EQ(parse_advise("none").to_string(), "none");
  EXPECT_EQ(parse_advise("accessed-by,read-mostly").to_string(), "read-mostly,accessed-by");
  EXPECT_THROW(parse_advise("read-mostly,bogus"), std::invalid_argument);
}

const OptionInfo& option(const std::vector<OptionInfo>& table, const std::string& name) {
  for (const OptionInfo& o : table)
    if (o.name == name) return o;
  throw std::runtime_error("no option " + name);
}

// `describe` reads the same declarations as the parser and --help: every option it lists is in
// --help, its default is what an empty command line gives, and typing the default back parses
// (the stream scenario's options together with --scenario stream and a strategy that runs it,
// --reduce with --emulate-gpus 2).
TEST(Cli, DescribeReadsTheDeclarations) {
  const std::vector<OptionInfo> table = train_option_table();
  const auto help = parse({"train", "--help"});
  ASSERT_GE(table.size(), 28u);
  for (const OptionInfo& o : table) {
    EXPECT_NE(help.out.find(o.name), std::string::npos) << o.name;
    if (o.kind == "flag" || o.default_value.is_null()) continue;
    const std::string typed = o.default_value.is_string()   ? o.default_value.get<std::string>()
                              : o.default_value.is_array() ? hidden_string(o.default_value.get<std::vector<int>>())
                                                           : o.default_value.dump();
    const bool stream_option = o.help.rfind("stream:", 0) == 0;
    // A strategy's own option goes with a strategy that reads it.
    std::string reader;
    for (const StrategyEntry& e : strategy_registry())
      for (const StrategyOption& so : e.options)
        if (reader.empty() && "--" + std::string(so.name) == o.name) reader = e.name;
    // --reduce is read only where several shards' gradients are combined.
    const auto p =
        o.name == "--reduce" ? parse({"train", "--emulate-gpus", "2", o.name.c_str(), typed.c_str()})
        : stream_option   ? parse({"train", "--scenario", "stream", "--strategy", "pinned",
                                   o.name.c_str(), typed.c_str()})
        : !reader.empty() ? parse({"train", "--strategy", reader.c_str(), o.name.c_str(), typed.c_str()})
                          : parse({"train", o.name.c_str(), typed.c_str()});
    EXPECT_FALSE(p.code) << o.name << " " << typed << ": " << p.err;
  }
  const RunConfig defaults;
  EXPECT_EQ(option(table, "--batch").default_value, defaults.batch);
  EXPECT_EQ(option(table, "--batch").aliases, std::vector<std::string>{"-b"});
  EXPECT_EQ(option(table, "--strategy").default_value, "resident");
  EXPECT_EQ(option(table, "--strategy").choices.size(), strategy_registry().size());
  EXPECT_EQ(option(table, "--transfer").choices, (std::vector<std::string>{"u8", "f32"}));
  EXPECT_EQ(option(table, "--hidden").default_value, nlohmann::json::array({256}));
  EXPECT_EQ(option(table, "--depth").min, 2);
  EXPECT_EQ(option(table, "--depth").max, 64);
  EXPECT_TRUE(option(table, "--lr").min_exclusive);
  EXPECT_EQ(option(table, "--profile").default_value, true);
  EXPECT_EQ(option(table, "--advise").default_value, defaults.advise.to_string());
  // --copy-streams is recorded as config.streams, the key the record had first.
  EXPECT_EQ(option(table, "--copy-streams").record_key, "streams");
  EXPECT_TRUE(option(table, "--data").default_value.is_null());
}

TEST(CliBinary, ListWorksWithoutAGpu) {
  const Ran r = run_binary("list");
  EXPECT_EQ(r.code, 0) << r.output;
  std::vector<std::string> lines;
  std::istringstream in(r.output);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), strategy_registry().size()) << r.output;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string name(strategy_registry()[i].name);
    // The name, then at least one space: `memstrat list | awk '{print $1}'` gives the names.
    EXPECT_EQ(lines[i].compare(0, name.size() + 1, name + " "), 0) << "line " << i << ": " << lines[i];
  }
}

// The matrix runner's tests answer `describe --json` from a committed copy of the binary's
// answer (tests/experiments/fixtures/describe.json); this keeps the copy from drifting.
TEST(CliBinary, DescribeJsonIsTheCommittedFixture) {
  const Ran r = run_binary("describe --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string path = std::string(MEMSTRAT_SOURCE_DIR) + "/tests/experiments/fixtures/describe.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const nlohmann::json fixture = nlohmann::json::parse(in);
  EXPECT_EQ(nlohmann::json::parse(r.output), fixture)
      << "the options changed: regenerate with\n  build/memstrat describe --json > " << path;
  EXPECT_EQ(fixture["record_schema_version"], kSchemaVersion);
}

TEST(CliBinary, MissingDataDirectoryIsReportedBeforeAnyDeviceWork) {
  const Ran r = run_binary("train --data /nonexistent/memstrat-data --epochs 1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/memstrat-data"), std::string::npos) << r.output;
}

TEST(CliBinary, UnknownStrategyListsTheValidOnes) {
  const Ran r = run_binary("train --strategy teleport");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("teleport"), std::string::npos) << r.output;
}

TEST(CliBinary, BatchLargerThanDataSet) {
  const std::string data = mnist_dir();
  if (data.empty()) GTEST_SKIP() << "MNIST not found: set MEMSTRAT_DATA (or run experiments/scripts/get_mnist.py)";
  const Ran r = run_binary("train --data " + data + " --train-samples 1000 --batch 4096");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("larger than the training set"), std::string::npos) << r.output;
}

TEST(CliBinary, StreamSlotsAreBoundedBeforeAnyDeviceWork) {
  const std::string data = mnist_dir();
  if (data.empty()) GTEST_SKIP() << "MNIST not found: set MEMSTRAT_DATA (or run experiments/scripts/get_mnist.py)";
  const Ran r = run_binary("train --data " + data +
                           " --scenario stream --strategy pinned --batch 60000 --prefetch 1024");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("at most 2048 MiB"), std::string::npos) << r.output;
}

TEST(CliBinary, NoGpuIsAOneLineExplanationNotACrash) {
  std::string reason;
  if (cuda_device_available(&reason)) GTEST_SKIP() << "a GPU is present; this test is for GPU-less machines";
  const std::string data = mnist_dir();
  if (data.empty()) GTEST_SKIP() << "MNIST not found: set MEMSTRAT_DATA (or run experiments/scripts/get_mnist.py)";
  Ran r = run_binary("train --data " + data + " --epochs 1");
  if (r.code == 2) GTEST_SKIP() << "MNIST not available: " << r.output;
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("needs an NVIDIA GPU"), std::string::npos) << r.output;
  r = run_binary("info");
  EXPECT_EQ(r.code, 3) << r.output;
}

// Without a GPU `info` still shows what it can (the host: CPUs, affinity, memory), then says
// why there is no more, with the no-device exit code.
TEST(CliBinary, InfoWithoutAGpuShowsTheHost) {
  std::string reason;
  if (cuda_device_available(&reason)) GTEST_SKIP() << "a GPU is present; this test is for GPU-less machines";
  const Ran r = run_binary("info");
  EXPECT_EQ(r.code, 3) << r.output;
  for (const char* text : {"CPU affinity", " online", "memory", "needs an NVIDIA GPU"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << " in:\n" << r.output;
}
