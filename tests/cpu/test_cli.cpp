// CLI parsing and validation (no GPU needed), and the binary's behaviour on bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <string>
#include <tuple>
#include <sys/wait.h>

#include "common/cuda_raii.h"
#include "experiments/cli/options.h"

using namespace memstrat;

namespace {
struct Parsed {
  std::optional<int> code;
  CliRequest req;
  std::string out, err;
};
Parsed parse(std::vector<const char*> args) {
  args.insert(args.begin(), "memstrat");
  Parsed p;
  std::ostringstream o, e;
  p.code = parse_cli(static_cast<int>(args.size()), args.data(), p.req, o, e);
  p.out = o.str();
  p.err = e.str();
  return p;
}
struct Ran {
  int code;
  std::string output;
};
// The MNIST directory the tests can use: the checkout's data/mnist, else ../shared's copy.
std::string mnist_dir() {
  for (const std::string& d : {std::string(MEMSTRAT_SOURCE_DIR) + "/data/mnist",
                              std::string(MEMSTRAT_SOURCE_DIR) + "/../shared/data/mnist"})
    if (FILE* f = std::fopen((d + "/train-labels-idx1-ubyte.gz").c_str(), "rb")) {
      std::fclose(f);
      return d;
    }
  return "";
}
Ran run_binary(const std::string& args) {
  const std::string cmd = std::string(MEMSTRAT_BINARY) + " " + args + " 2>&1";
  Ran r{-1, ""};
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), f)) r.output += buf.data();
  const int st = pclose(f);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}
}  // namespace

TEST(Cli, DefaultsMatchTheDesign) {
  auto p = parse({"train"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.command, Command::Train);
  const TrainConfig c = make_train_config(p.req.train);
  EXPECT_EQ(p.req.train.strategy, "resident");
  EXPECT_EQ(c.strategy.batch, 256);
  EXPECT_EQ(c.strategy.transfer, Transfer::U8);
  EXPECT_EQ(c.strategy.scenario, Scenario::Static);
  EXPECT_EQ(c.mlp.layers.size(), 3u);
  EXPECT_EQ(c.mlp.layers[1], 256);
  EXPECT_TRUE(c.graphs);
  EXPECT_TRUE(c.mlp.fused);
  EXPECT_TRUE(c.mlp.single_launch);
  EXPECT_TRUE(p.req.train.profile);
}

TEST(Cli, FusedChoosesTheStepImplementation) {
  for (auto [value, fused, single] : {std::tuple{"on", true, true}, std::tuple{"single", true, true},
                                      std::tuple{"lt", true, false},
                                      std::tuple{"off", false, false}}) {
    auto p = parse({"train", "--fused", value});
    ASSERT_FALSE(p.code) << p.err;
    const TrainConfig c = make_train_config(p.req.train);
    EXPECT_EQ(c.mlp.fused, fused) << value;
    EXPECT_EQ(c.mlp.single_launch, single) << value;
    EXPECT_EQ(c.mlp.single_launch_any_size, std::string(value) == "single") << value;
  }
}

TEST(Cli, EpochLaunchIsOnByDefaultAndCanBeTurnedOff) {
  auto p = parse({"train"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_TRUE(make_train_config(p.req.train).epoch_launch);
  p = parse({"train", "--epoch-launch", "off"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_FALSE(make_train_config(p.req.train).epoch_launch);
  p = parse({"train", "--epoch-launch", "maybe"});
  EXPECT_EQ(p.code, 2);
}

TEST(Cli, FullOptionSet) {
  auto p = parse({"train", "-s", "double-buffer", "-e", "3", "-b", "1024", "--hidden", "512,128",
                  "--transfer", "f32", "--scenario", "refresh", "--depth", "3", "--copy-streams", "2",
                  "--gemm", "tiled", "--graphs", "off", "--no-profile", "--advise", "read-mostly",
                  "--seed", "7", "--json", "x.jsonl", "--run-tag", "cell-1", "--fused", "off"});
  ASSERT_FALSE(p.code) << p.err;
  const TrainConfig c = make_train_config(p.req.train);
  EXPECT_EQ(p.req.train.strategy, "double-buffer");
  EXPECT_EQ(p.req.train.epochs, 3);
  EXPECT_EQ(c.strategy.batch, 1024);
  EXPECT_EQ(c.mlp.layers, (std::vector<int>{0, 512, 128, 0}));
  EXPECT_EQ(c.strategy.transfer, Transfer::F32);
  EXPECT_EQ(c.strategy.scenario, Scenario::Refresh);
  EXPECT_EQ(c.strategy.depth, 3);
  EXPECT_EQ(c.strategy.copy_streams, 2);
  EXPECT_EQ(c.mlp.gemm, kernels::GemmBackend::Tiled);
  EXPECT_FALSE(c.graphs);
  EXPECT_FALSE(p.req.train.profile);
  EXPECT_TRUE(c.strategy.advise.read_mostly);
  EXPECT_FALSE(c.strategy.advise.preferred_device);
  EXPECT_EQ(c.strategy.seed, 7u);
  EXPECT_EQ(p.req.train.run_tag, "cell-1");
  EXPECT_FALSE(c.mlp.fused);
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

TEST(Cli, HiddenSizeZeroMessageSaysWhatToDo) {
  auto p = parse({"train", "--hidden", "0"});
  ASSERT_TRUE(p.code);
  EXPECT_NE(p.err.find("--hidden"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("256"), std::string::npos) << p.err;  // an example of a valid value
}

TEST(Cli, AdviseParsing) {
  EXPECT_EQ(parse_advise("none").to_string(), "none");
  EXPECT_EQ(parse_advise("accessed-by,read-mostly").to_string(), "read-mostly,accessed-by");
  EXPECT_THROW(parse_advise("read-mostly,bogus"), std::invalid_argument);
}

TEST(CliBinary, ListWorksWithoutAGpu) {
  const Ran r = run_binary("list");
  EXPECT_EQ(r.code, 0) << r.output;
  int lines = 0;
  for (char c : r.output) lines += c == '\n';
  EXPECT_EQ(lines, 8) << r.output;
  EXPECT_NE(r.output.find("double-buffer"), std::string::npos);
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
  if (data.empty()) GTEST_SKIP() << "MNIST not found in data/mnist or ../shared/data/mnist";
  const Ran r = run_binary("train --data " + data + " --train-samples 1000 --batch 4096");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("larger than the training set"), std::string::npos) << r.output;
}

TEST(CliBinary, NoGpuIsAOneLineExplanationNotACrash) {
  std::string reason;
  if (cuda_device_available(&reason)) GTEST_SKIP() << "a GPU is present; this test is for GPU-less machines";
  const std::string data = mnist_dir();
  if (data.empty()) GTEST_SKIP() << "MNIST not found in data/mnist or ../shared/data/mnist";
  Ran r = run_binary("train --data " + data + " --epochs 1");
  if (r.code == 2) GTEST_SKIP() << "MNIST not available: " << r.output;
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("needs an NVIDIA GPU"), std::string::npos) << r.output;
  r = run_binary("info");
  EXPECT_EQ(r.code, 3) << r.output;
}
