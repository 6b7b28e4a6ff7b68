// The data-parallel options (--gpus, --reduce, --emulate-gpus): what the command line accepts,
// what it refuses with exit 2 before any device work (combinations, strategies and scenarios
// several GPUs do not run yet, a build without NCCL, NVLink multicast not off), what
// `describe` declares and what the record's config holds. No GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/nccl_settings.h"
#include "experiments/core/data_parallel_request.h"
#include "experiments/core/record.h"
#include "memory_strategies/registry.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

void expect_accepted(const std::vector<const char*>& args) {
  const auto p = parse(args);
  EXPECT_FALSE(p.code) << joined(args) << ": " << p.err;
}

/// NCCL_NVLS_ENABLE as given for one test (nullptr: unset), restored after.
class NvlsSetting {
 public:
  explicit NvlsSetting(const char* value) {
    if (const char* v = std::getenv("NCCL_NVLS_ENABLE")) old_ = v;
    if (value) setenv("NCCL_NVLS_ENABLE", value, 1);
    else unsetenv("NCCL_NVLS_ENABLE");
  }
  ~NvlsSetting() {
    if (old_) setenv("NCCL_NVLS_ENABLE", old_->c_str(), 1);
    else unsetenv("NCCL_NVLS_ENABLE");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST(CliDataParallel, DefaultsAreOneGpu) {
  const auto p = parse({"train"});
  ASSERT_FALSE(p.code);
  EXPECT_EQ(p.req.run.gpus, 1);
  EXPECT_EQ(p.req.run.emulate_gpus, 1);
  EXPECT_EQ(p.req.run.reduce, Reduce::Exact);
  EXPECT_FALSE(p.req.run.data_parallel());
  expect_accepted({"train", "--gpus", "1"});
  expect_accepted({"train", "--emulate-gpus", "1"});
}

TEST(CliDataParallel, Ranges) {
  expect_refused({"train", "--gpus", "0"}, "--gpus");
  expect_refused({"train", "--gpus", "9"}, "--gpus");
  expect_refused({"train", "--emulate-gpus", "0"}, "--emulate-gpus");
  expect_refused({"train", "--emulate-gpus", "2", "--reduce", "tree"}, "--reduce");
}

TEST(CliDataParallel, TheEmulationRunsEveryStrategyButNotEveryCombination) {
  const auto p = parse({"train", "--emulate-gpus", "4", "--strategy", "double-buffer"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.shards(), 4);
  expect_accepted({"train", "--emulate-gpus", "2", "--reduce", "exact"});
  expect_accepted({"train", "--emulate-gpus", "2", "--fused", "off", "--launch-form", "per-batch"});
  expect_refused({"train", "--emulate-gpus", "2", "--reduce", "ring"}, "rank order");
  // The steps that compute gradients apart from their update run (the single-launch step's
  // gradients-only launch, the layer-by-layer step); the cuBLASLt step, which cannot stop before
  // its update, is refused with the steps that run.
  expect_accepted({"train", "--emulate-gpus", "2", "--fused", "single"});
  expect_accepted({"train", "--emulate-gpus", "2", "--fused", "on"});
  expect_accepted({"train", "--emulate-gpus", "2", "--fused", "off"});
  expect_refused({"train", "--emulate-gpus", "2", "--fused", "lt"},
                 "cannot stop before the update");
  expect_refused({"train", "--emulate-gpus", "2", "--fused", "lt"}, "use --fused on or single");
  expect_refused({"train", "--emulate-gpus", "2", "--launch-form", "graph"}, "--launch-form graph");
  expect_accepted({"train", "--emulate-gpus", "2", "--graphs", "on"});
  expect_accepted({"train", "--emulate-gpus", "2", "--graphs", "off"});
  expect_refused({"train", "--reduce", "ring"}, "add --gpus");
  expect_refused({"train", "--gpus", "2", "--emulate-gpus", "2"}, "give one of the two");
}

TEST(CliDataParallel, SeveralGpusNeedNcclAndNvlinkMulticastOff) {
  if (!kHaveNccl) {
    NvlsSetting off("0");
    expect_refused({"train", "--gpus", "2"}, "nvidia-nccl-cu13");
    expect_refused({"train", "--gpus", "2"}, "NCCL_ROOT");
    return;
  }
  {
    NvlsSetting unset(nullptr);
    expect_refused({"train", "--gpus", "2"}, "NCCL_NVLS_ENABLE=0 (it is not set)");
  }
  {
    NvlsSetting on("1");
    expect_refused({"train", "--gpus", "2"}, "set to '1'");
  }
  NvlsSetting off("0");
  const auto p = parse({"train", "--gpus", "2", "--reduce", "ring", "--strategy", "pinned"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.reduce, Reduce::Ring);
  expect_accepted({"train", "--gpus", "8"});  // the count is checked against the machine later
  expect_accepted({"train", "--gpus", "2", "--fused", "single"});
  expect_refused({"train", "--gpus", "2", "--fused", "lt"}, "cannot stop before the update");
  // Every strategy of the registry, each GPU serving its shard (test_data_parallel.cu runs them).
  for (const StrategyEntry& e : strategy_registry()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_TRUE(runs_on_several_gpus(e.name));
    const std::string name(e.name);
    // Static and refresh (each shard's rows keyed as the whole epoch's) and, where the registry
    // runs it with host workers, stream (each GPU's strategy its own producers over its shard);
    // the peer-fanout forms, whose set is written once on rank 0's GPU, static only.
    const bool once = name.rfind("peer-fanout", 0) == 0;
    StrategyOptions st;
    st.scenario = Scenario::Stream;
    const bool stream = !once && refusal_reason(e, st).empty();
    std::vector<Scenario> want{Scenario::Static};
    if (!once) want.push_back(Scenario::Refresh);
    if (stream) want.push_back(Scenario::Stream);
    EXPECT_EQ(several_gpu_scenarios(e.name), want);
    expect_accepted({"train", "--gpus", "2", "--strategy", name.c_str()});
    if (!once)
      expect_accepted({"train", "--gpus", "2", "--strategy", name.c_str(), "--scenario", "refresh"});
    if (stream)
      expect_accepted({"train", "--gpus", "2", "--strategy", name.c_str(), "--scenario", "stream",
                       "--augment", "heavy", "--workers", "2"});
  }
  EXPECT_FALSE(runs_on_several_gpus("teleport"));
  EXPECT_EQ(several_gpu_scenarios("pinned"),
            (std::vector<Scenario>{Scenario::Static, Scenario::Refresh, Scenario::Stream}));
  EXPECT_EQ(several_gpu_scenarios("resident"),  // its stream scenario gathers on the GPU
            (std::vector<Scenario>{Scenario::Static, Scenario::Refresh}));
  expect_refused({"train", "--gpus", "2", "--scenario", "stream", "--augment", "none",
                  "--strategy", "pinned"},
                 "several GPUs run the stream scenario with host workers");

}

TEST(CliDataParallel, OtherBranchesOptionsEitherRunOnTheShardsOrAreRefused) {
  // --device-budget holds memory between one Mlp's and one strategy's allocations: not per shard.
  expect_refused({"train", "--emulate-gpus", "2", "--device-budget", "1"}, "drop --device-budget");
  // The emulation is one strategy on one GPU: a replicated set and GPU augmentation run as ever.
  expect_accepted({"train", "--emulate-gpus", "2", "--replicate", "2"});
  expect_accepted({"train", "--emulate-gpus", "2", "--strategy", "resident", "--scenario",
                   "refresh", "--augment-device", "gpu"});
  expect_accepted({"train", "--emulate-gpus", "2", "--strategy", "resident", "--scenario",
                   "stream", "--augment", "light", "--augment-device", "gpu"});
  NvlsSetting off("0");
  expect_refused({"train", "--gpus", "2", "--device-budget", "1"}, "drop --device-budget");
  expect_refused({"train", "--gpus", "2", "--replicate", "2"}, "--replicate 1 so far");
  if (!kHaveNccl) return;  // the build's missing NCCL is said first otherwise
  expect_refused({"train", "--gpus", "2", "--strategy", "resident", "--scenario", "refresh",
                  "--augment-device", "gpu"},
                 "several GPUs augment on the host so far");
  expect_refused({"train", "--gpus", "2", "--strategy", "resident", "--augment-device", "gpu"},
                 "augments nothing");
}

TEST(CliDataParallel, TheBinaryExitsTwo) {
  const Ran r = run_binary("train --gpus 2 --emulate-gpus 2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("give one of the two"), std::string::npos) << r.output;
}

TEST(CliDataParallel, DescribeDeclaresTheOptions) {
  std::map<std::string, OptionInfo> by_name;
  for (const OptionInfo& o : train_option_table()) by_name[o.name] = o;
  ASSERT_TRUE(by_name.count("--gpus"));
  EXPECT_EQ(by_name["--gpus"].record_key, "gpus");
  EXPECT_EQ(by_name["--gpus"].default_value, 1);
  EXPECT_EQ(*by_name["--gpus"].max, 8);
  EXPECT_EQ(by_name["--emulate-gpus"].record_key, "emulate_gpus");
  EXPECT_EQ(by_name["--reduce"].record_key, "reduce");
  EXPECT_EQ(by_name["--reduce"].choices, (std::vector<std::string>{"exact", "ring"}));
}

TEST(CliDataParallel, TheRecordSaysHowGradientsWereCombined) {
  RunRecord r;
  r.config.emulate_gpus = 2;
  auto c = r.to_json()["config"];
  EXPECT_EQ(c["emulate_gpus"], 2);
  EXPECT_EQ(c["gpus"], 1);
  EXPECT_EQ(c["reduce"], "exact");
  EXPECT_EQ(c["graphs"], true);  // the emulation replays its steps as graphs (data_parallel_graphs)
  r.config.graphs = Graphs::Off;
  EXPECT_EQ(r.to_json()["config"]["graphs"], false);
  r.config.graphs = Graphs::On;
  r.config.emulate_gpus = 1;
  r.config.gpus = 2;  // several GPUs in one process enqueue their steps
  EXPECT_EQ(r.to_json()["config"]["graphs"], false);
  r.config.processes = Processes::PerGpu;  // one process per GPU replays them
  EXPECT_EQ(r.to_json()["config"]["graphs"], true);
  r.config.gpus = 1;
  r.config.processes = Processes::One;
  r.config.emulate_gpus = 2;
  r.config.emulate_gpus = 1;
  c = r.to_json()["config"];
  EXPECT_TRUE(c["reduce"].is_null());
  EXPECT_EQ(c["graphs"], true);
  EXPECT_FALSE(r.to_json()["env"].contains("nccl"));
  r.env.nccl = NcclEnvironment{"2.32.3", {{"NCCL_NVLS_ENABLE", "0"}}};
  const auto env = r.to_json()["env"];
  EXPECT_EQ(env["nccl"]["version"], "2.32.3");
  EXPECT_EQ(env["nccl"]["settings"]["NCCL_NVLS_ENABLE"], "0");
}
