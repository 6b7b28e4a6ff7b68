// --processes one|per-gpu: how the GPUs of --gpus N are driven. What the command line accepts
// and refuses with exit 2 before any device work (per-gpu without --gpus N, without a launcher's
// rank or NCCL_COMM_ID in the environment, with another process count than N, with the
// peer-fanout and host-shared forms), what a process of another rank than 0 keeps quiet about,
// what `describe` declares and what the record's config holds. No GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/nccl_settings.h"
#include "experiments/core/record.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

/// The environment of one test: every launcher's variable and NCCL_COMM_ID unset but those
/// given, NCCL_NVLS_ENABLE=0; all restored after.
class LauncherEnv {
 public:
  explicit LauncherEnv(const std::map<std::string, std::string>& set) {
    for (const char* n : {"MEMSTRAT_RANK", "MEMSTRAT_WORLD_SIZE", "MEMSTRAT_LOCAL_RANK",
                          "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
                          "SLURM_NTASKS", "SLURM_LOCALID", "PMI_RANK", "PMI_SIZE",
                          "MPI_LOCALRANKID", "NCCL_COMM_ID", "NCCL_NVLS_ENABLE"}) {
      const char* v = std::getenv(n);
      old_[n] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(n);
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    for (const auto& [k, v] : set) setenv(k.c_str(), v.c_str(), 1);
  }
  ~LauncherEnv() {
    for (const auto& [k, v] : old_)
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> old_;
};

const std::map<std::string, std::string> kTorchrun0 = {
    {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"NCCL_COMM_ID", "127.0.0.1:29600"}};

}  // namespace

TEST(CliProcesses, PerGpuNeedsSeveralGpus) {
  LauncherEnv env({});
  expect_refused({"train", "--processes", "per-gpu"}, "drives the GPUs of --gpus N (N > 1)");
  const auto one = parse({"train", "--processes", "one"});  // the default, said aloud
  EXPECT_FALSE(one.code) << one.err;
  EXPECT_FALSE(one.req.run.spawn_ranks);
  expect_refused({"train", "--gpus", "2", "--processes", "every"}, "--processes");
}

// Started by no launcher, memstrat starts the ranks itself (rank_spawn.h): the options are
// judged here, once, before any process starts; the ranks then read their own variables.
TEST(CliProcesses, WithNoLauncherMemstratStartsTheRanks) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: --gpus N > 1 is refused first";
  LauncherEnv env({});
  const auto p = parse({"train", "--gpus", "2", "--processes", "per-gpu", "--json", "r.jsonl"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_TRUE(p.req.run.spawn_ranks);
  EXPECT_FALSE(p.req.run.process.has_value());
  EXPECT_EQ(p.req.run.json, "r.jsonl") << "the ranks decide who writes";
  expect_refused({"train", "--gpus", "2", "--processes", "per-gpu", "--strategy", "peer-fanout"},
                 "(--processes one)");
  expect_refused({"train", "--gpus", "2", "--processes", "per-gpu", "--scenario", "stream",
                  "--augment", "none"},
                 "with host workers");
  const auto refresh = parse({"train", "--gpus", "2", "--processes", "per-gpu", "--scenario",
                              "refresh"});
  EXPECT_FALSE(refresh.code) << refresh.err;
  unsetenv("NCCL_NVLS_ENABLE");
  expect_refused({"train", "--gpus", "2", "--processes", "per-gpu"}, "NCCL_NVLS_ENABLE");
}

TEST(CliProcesses, ALauncherSRankIsReadNotStarted) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: --gpus N > 1 is refused first";
  LauncherEnv env(kTorchrun0);
  const auto p = parse({"train", "--gpus", "2", "--processes", "per-gpu"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_FALSE(p.req.run.spawn_ranks);
  ASSERT_TRUE(p.req.run.process.has_value());
  std::map<std::string, std::string> no_id = kTorchrun0;
  no_id.erase("NCCL_COMM_ID");
  LauncherEnv env2(no_id);
  expect_refused({"train", "--gpus", "2", "--processes", "per-gpu"}, "NCCL_COMM_ID=HOST:PORT");
}

TEST(CliProcesses, NcclCommIdIsAskedFor) {
  LauncherEnv env({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  expect_refused({"train", "--gpus", "2", "--processes", "per-gpu"}, "NCCL_COMM_ID=HOST:PORT");
}

TEST(CliProcesses, TheLaunchersProcessCountMustBeTheGpus) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: --gpus N > 1 is refused first";
  std::map<std::string, std::string> four = kTorchrun0;
  four["WORLD_SIZE"] = "4";
  LauncherEnv env(four);
  expect_refused({"train", "--gpus", "2", "--processes", "per-gpu"}, "started 4 process(es)");
}

TEST(CliProcesses, TheSharedSetFormsNeedOneProcess) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: --gpus N > 1 is refused first";
  LauncherEnv env(kTorchrun0);
  for (const char* s : {"peer-fanout", "peer-fanout-ring"})
    expect_refused({"train", "--gpus", "2", "--processes", "per-gpu", "--strategy", s},
                   "GPU memory, which the other GPUs read over peer access); that needs every "
                   "GPU in that process (--processes one)");
  for (const char* s : {"host-shared", "host-shared-ring"})
    expect_refused({"train", "--gpus", "2", "--processes", "per-gpu", "--strategy", s},
                   "one page-locked host allocation, which every GPU copies from); that needs "
                   "every GPU in that process (--processes one)");
  for (const char* s : {"um-shared", "um-shared-host", "um-shared-prefetch",
                        "um-shared-read-mostly"})
    expect_refused({"train", "--gpus", "2", "--processes", "per-gpu", "--strategy", s},
                   "one managed allocation, whose regions every GPU's hints place); that needs "
                   "every GPU in that process (--processes one)");
  for (const char* s : {"peer-fanout", "host-shared", "host-shared-ring", "um-shared",
                        "um-shared-prefetch"}) {
    const auto p = parse({"train", "--gpus", "2", "--strategy", s});
    EXPECT_FALSE(p.code) << s << ": " << p.err;  // one process: every GPU's in it
  }
}

TEST(CliProcesses, GraphsWithSeveralGpusNeedAProcessEach) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: --gpus N > 1 is refused first";
  {
    LauncherEnv env({});
    expect_refused({"train", "--gpus", "2", "--graphs", "on"}, "add --processes per-gpu");
    const auto off = parse({"train", "--gpus", "2", "--graphs", "off"});
    EXPECT_FALSE(off.code) << off.err;
    const auto dflt = parse({"train", "--gpus", "2"});  // the default: enqueued, not refused
    EXPECT_FALSE(dflt.code) << dflt.err;
  }
  LauncherEnv env(kTorchrun0);
  const auto p = parse({"train", "--gpus", "2", "--processes", "per-gpu", "--graphs", "on"});
  EXPECT_FALSE(p.code) << p.err;
}

TEST(CliProcesses, RankZeroSpeaksTheOthersKeepQuiet) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: --gpus N > 1 is refused first";
  {
    LauncherEnv env(kTorchrun0);
    const auto p = parse({"train", "--gpus", "2", "--processes", "per-gpu", "--json", "r.jsonl",
                          "--loss-curve", "c.csv"});
    ASSERT_FALSE(p.code) << p.err;
    ASSERT_TRUE(p.req.run.process.has_value());
    EXPECT_EQ(p.req.run.rank(), 0);
    EXPECT_EQ(p.req.run.process->world, 2);
    EXPECT_EQ(p.req.run.json, "r.jsonl");
    EXPECT_EQ(p.req.run.loss_curve, "c.csv");
    EXPECT_FALSE(p.req.run.quiet);
  }
  std::map<std::string, std::string> one = kTorchrun0;
  one["RANK"] = "1";
  one["LOCAL_RANK"] = "1";
  LauncherEnv env(one);
  const auto p = parse({"train", "--gpus", "2", "--processes", "per-gpu", "--json", "r.jsonl",
                        "--loss-curve", "c.csv", "--trace", "t.json"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.rank(), 1);
  EXPECT_EQ(p.req.run.process->local_rank, 1);
  EXPECT_TRUE(p.req.run.quiet);
  EXPECT_TRUE(p.req.run.json.empty());
  EXPECT_TRUE(p.req.run.loss_curve.empty());
  EXPECT_TRUE(p.req.run.trace.empty());
}

TEST(CliProcesses, OneProcessReadsNoLauncher) {
  // A stray variable: --processes one never reads it.
  LauncherEnv env(std::map<std::string, std::string>{{"RANK", "x"}});
  const auto p = parse({"train", "--emulate-gpus", "2"});
  EXPECT_FALSE(p.code) << p.err;
  EXPECT_FALSE(p.req.run.process.has_value());
  EXPECT_EQ(p.req.run.processes, Processes::One);
}

TEST(CliProcesses, DescribeAndTheRecord) {
  std::map<std::string, OptionInfo> by_name;
  for (const OptionInfo& o : train_option_table()) by_name[o.name] = o;
  ASSERT_TRUE(by_name.count("--processes"));
  EXPECT_EQ(by_name["--processes"].record_key, "processes");
  EXPECT_EQ(by_name["--processes"].choices, (std::vector<std::string>{"one", "per-gpu"}));
  RunRecord r;
  EXPECT_TRUE(r.to_json()["config"]["processes"].is_null());
  r.config.gpus = 2;
  EXPECT_EQ(r.to_json()["config"]["processes"], "one");
  r.config.processes = Processes::PerGpu;
  EXPECT_EQ(r.to_json()["config"]["processes"], "per-gpu");
}
