// What the command line refuses before any work, because it would otherwise reach the run
// changed or be lost with it: bytes that are not UTF-8, numbers that change on the way to the
// GPU, a strategy option the strategy never reads, output files that cannot hold the output;
// and `--version`. No GPU needed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/build_info.h"
#include "common/nccl_settings.h"
#include "memory_strategies/registry.h"

using namespace memstrat;
using namespace memstrat::testing;

// The record holds argv and the data path as JSON text; nlohmann::json cannot dump bytes that
// are not UTF-8, so such an argument used to lose the record of a finished run.
TEST(CliRefusals, ArgumentsThatAreNotUtf8) {
  expect_refused({"train", "--run-tag", "\xff"}, "not valid UTF-8");
  expect_refused({"train", "--json", "runs/\xfe.jsonl"}, "argument 3");
  expect_refused({"train", "--data", "mnist\xc3"}, "not valid UTF-8");
  expect_refused({"primitives", "--json", "p\xff.jsonl"}, "not valid UTF-8");
  EXPECT_FALSE(parse({"train", "--run-tag", "caf\xc3\xa9"}).code) << "UTF-8 beyond ASCII is fine";
}

TEST(CliRefusals, ArgumentsThatAreNotUtf8FromTheShell) {
  const Ran r = run_binary("train --run-tag $(printf '\\377')");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not valid UTF-8"), std::string::npos) << r.output;
}

// --lr and --momentum are floats on the GPU: a value the range check accepts as typed must
// still be finite (and --lr above 0) once it is that float.
TEST(CliRefusals, NumbersThatChangeOnTheWayToTheGpu) {
  expect_refused({"train", "--lr", "nan"}, "--lr");
  expect_refused({"train", "--lr", "inf"}, "beyond the range of a 32-bit float");
  expect_refused({"train", "--lr", "1e39"}, "beyond the range of a 32-bit float");
  expect_refused({"train", "--lr", "1e-50"}, "as a 32-bit float");
  expect_refused({"train", "--momentum", "nan"}, "--momentum");
  expect_refused({"train", "--momentum", "-nan"}, "--momentum");
  auto p = parse({"train", "--lr", "1e-30", "--momentum", "1e-50"});
  ASSERT_FALSE(p.code) << p.err;  // small but not 0; momentum 0 is plain SGD
  EXPECT_GT(p.req.run.lr, 0.0f);
}

// strtoull wraps "-1" and saturates 2^64 to the same 18446744073709551615.
TEST(CliRefusals, WholeNumbersThatWouldWrapOrSaturate) {
  expect_refused({"train", "--seed", "-1"}, "not a whole number in 0..18446744073709551615");
  expect_refused({"train", "--seed", "99999999999999999999"}, "--seed");
  expect_refused({"train", "--seed", "18446744073709551616"}, "--seed");
  expect_refused({"train", "--epochs", "4294967297"}, "--epochs");
  expect_refused({"train", "--train-samples", "-1"}, "--train-samples");
  expect_refused({"train", "--batch", "0x100"}, "--batch");
  auto p = parse({"train", "--seed", "18446744073709551615"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.seed, UINT64_MAX);
  p = parse({"train", "--batch", "010"});  // decimal, not octal
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.batch, 10);
}

// Each strategy option is accepted exactly with the strategies whose registry entry declares
// it, whatever its value: given to another strategy it would be ignored without a word.
TEST(CliRefusals, StrategyOptionsOnlyWithTheStrategiesThatReadThem) {
  expect_refused({"train", "--strategy", "resident", "--depth", "5"},
                 "--depth is an option of double-buffer");
  expect_refused({"train", "--depth", "2"}, "--strategy resident does not read it");
  for (const StrategyEntry& chosen : strategy_registry())
    for (const StrategyEntry& e : strategy_registry())
      for (const StrategyOption& o : e.options) {
        const std::string flag = "--" + std::string(o.name), name(chosen.name);
        const std::string value(o.default_value);
        bool reads = false;
        for (const StrategyOption& c : chosen.options) reads = reads || c.name == o.name;
        const auto p = parse({"train", "--strategy", name.c_str(), flag.c_str(), value.c_str()});
        if (reads) {
          EXPECT_FALSE(p.code) << name << " " << flag << ": " << p.err;
        } else {
          ASSERT_TRUE(p.code) << name << " " << flag;
          EXPECT_EQ(*p.code, 2);
          EXPECT_NE(p.err.find(flag + " is an option of"), std::string::npos) << p.err;
        }
      }
}

// --copy-chunk also sizes the launches of --launch-form kernel-per-chunk, for any strategy; at
// another form it stays an option of the chunked strategies only.
TEST(CliRefusals, CopyChunkWithKernelPerChunkForAnyStrategy) {
  for (const StrategyEntry& e : strategy_registry()) {
    const std::string name(e.name);
    if (!e.launch_forms.static_forms.contains(EpochForm::ChunkKernels)) continue;
    const auto p = parse({"train", "--strategy", name.c_str(), "--launch-form", "kernel-per-chunk",
                          "--copy-chunk", "2"});
    ASSERT_FALSE(p.code) << name << ": " << p.err;
    EXPECT_EQ(p.req.run.copy_chunk_mib, 2) << name;
  }
  expect_refused({"train", "--copy-chunk", "2"}, "(and of --launch-form kernel-per-chunk)");
  expect_refused({"train", "--launch-form", "kernel", "--copy-chunk", "2"},
                 "--strategy resident does not read it");
}

// The peer-fanout forms write their set once, on the first GPU, at set-up: the static scenario
// only, refused before any device work in the others (on one GPU too: the set is the same);
// peer-fanout-ring reads the ring options, peer-fanout none.
TEST(CliRefusals, PeerFanoutRunsTheStaticScenarioOnly) {
  for (const char* s : {"peer-fanout", "peer-fanout-ring"}) {
    for (const char* sc : {"refresh", "stream"})
      expect_refused({"train", "--strategy", s, "--scenario", sc}, "static scenario only");
    const auto p = parse({"train", "--strategy", s});
    EXPECT_FALSE(p.code) << s << ": " << p.err;
  }
  const auto p = parse({"train", "--strategy", "peer-fanout-ring", "--depth", "3", "--copy-streams",
                        "2", "--copy-chunk", "4"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.depth, 3);
  EXPECT_EQ(p.req.run.copy_streams, 2);
  EXPECT_EQ(p.req.run.copy_chunk_mib, 4);
  expect_refused({"train", "--strategy", "peer-fanout", "--depth", "3"}, "peer-fanout-ring");
}

// The host-shared forms are pinned's and double-buffer-graph's data paths on one GPU, so they
// run the scenarios those run there (host-shared-ring, as double-buffer-graph, no stream: it
// stages from a fixed layout); with several GPUs, the static and refresh scenarios.
// host-shared-ring reads the ring options, host-shared none.
TEST(CliRefusals, HostSharedRunsWhatItsOneGpuStrategyRuns) {
  for (const char* s : {"host-shared", "host-shared-ring"})
    for (const char* sc : {"static", "refresh", "stream"}) {
      if (std::string(s) == "host-shared-ring" && std::string(sc) == "stream") continue;
      const auto p = parse({"train", "--strategy", s, "--scenario", sc});
      EXPECT_FALSE(p.code) << s << " " << sc << ": " << p.err;
    }
  expect_refused({"train", "--strategy", "host-shared-ring", "--scenario", "stream"},
                 "fixed layout");
  const auto p = parse({"train", "--strategy", "host-shared-ring", "--depth", "3",
                        "--copy-streams", "2", "--copy-chunk", "4"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.depth, 3);
  EXPECT_EQ(p.req.run.copy_streams, 2);
  EXPECT_EQ(p.req.run.copy_chunk_mib, 4);
  expect_refused({"train", "--strategy", "host-shared", "--depth", "3"}, "host-shared-ring");
  if (kHaveNccl) {
    const char* had = std::getenv("NCCL_NVLS_ENABLE");  // several GPUs need multicast off
    const std::string before = had ? had : "";
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    const auto r = parse({"train", "--gpus", "2", "--strategy", "host-shared", "--scenario",
                          "refresh"});
    if (had) setenv("NCCL_NVLS_ENABLE", before.c_str(), 1); else unsetenv("NCCL_NVLS_ENABLE");
    EXPECT_FALSE(r.code) << r.err;
    expect_refused({"train", "--gpus", "2", "--strategy", "host-shared", "--scenario", "stream",
                    "--augment", "none"},
                   "several GPUs run the stream scenario with host workers");
  }
}

// A launch form the strategy's data path does not allow in the scenario is refused with the
// reason, before any work; every declared one is accepted (the step a kernel form needs is judged
// once the data set is known: tests/cpu/test_launch_request.cpp).
TEST(CliRefusals, LaunchFormsTheStrategyDoesNotRunInTheScenario) {
  expect_refused({"train", "--strategy", "pageable", "--launch-form", "graph"},
                 "--launch-form graph: strategy pageable runs per-batch in the static scenario");
  expect_refused({"train", "--strategy", "pinned", "--launch-form", "kernel-per-chunk"},
                 "one device batch buffer");
  expect_refused({"train", "--strategy", "um-prefetch", "--scenario", "refresh", "--launch-form",
                  "graph"},
                 "no graph node");
  expect_refused({"train", "--strategy", "double-buffer-graph", "--launch-form", "kernel"},
                 "chunk");
  expect_refused({"train", "--strategy", "um", "--scenario", "stream", "--launch-form", "kernel"},
                 "stream scenario");
  const Ran r = run_binary("train --strategy pageable --launch-form graph");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("pageable memory"), std::string::npos) << r.output;
  const char* const scenarios[] = {"static", "refresh", "stream"};
  for (const StrategyEntry& e : strategy_registry())
    for (const char* sc : scenarios)
      for (const EpochForm f : kEpochForms) {
        const std::string name(e.name), form(to_string(f));
        StrategyOptions o;
        o.scenario = std::string(sc) == "static"    ? Scenario::Static
                     : std::string(sc) == "refresh" ? Scenario::Refresh
                                                    : Scenario::Stream;
        o.augment = Augment::None;  // --augment none: resident runs the stream scenario
        if (!refusal_reason(e, o).empty()) continue;  // the scenario itself is refused
        std::vector<const char*> args = {"train", "--strategy", name.c_str(), "--scenario", sc,
                                         "--launch-form", form.c_str()};
        if (o.scenario == Scenario::Stream) {
          args.push_back("--augment");
          args.push_back("none");
        }
        const auto p = parse(args);
        const bool runs = e.launch_forms.in(o.scenario).contains(f);
        EXPECT_EQ(!p.code, runs) << joined(args) << ": " << p.err;
        if (!runs && p.code) {
          EXPECT_EQ(*p.code, 2) << joined(args);
        }
      }
}

// --augment-device gpu where the registry declares it (the strategies whose set the GPU reads
// where it lies: resident, zero-copy and the um family, in refresh and in stream with light or
// heavy); everywhere else a one-line refusal and exit 2 before any device work, from the binary
// as from the parser.
TEST(CliRefusals, AugmentDeviceGpuOnlyWhereTheRegistryTakesIt) {
  EXPECT_FALSE(parse({"train", "--augment-device", "gpu", "--scenario", "refresh"}).code);
  for (const char* a : {"light", "heavy"})
    EXPECT_FALSE(parse({"train", "--augment-device", "gpu", "--scenario", "stream", "--augment", a}).code) << a;
  EXPECT_FALSE(parse({"train", "--augment-device", "host", "--strategy", "pinned"}).code)
      << "host is every strategy's, in every scenario";
  expect_refused({"train", "--augment-device", "gpu"}, "the static scenario augments nothing");
  expect_refused({"train", "--augment-device", "gpu", "--scenario", "stream", "--augment", "none"},
                 "--augment none augments nothing");
  std::vector<std::string> takers;
  for (const StrategyEntry& e : strategy_registry()) {
    const std::string name(e.name);
    for (const Scenario sc : {Scenario::Refresh, Scenario::Stream}) {
      const std::string scenario(to_string(sc));
      std::vector<const char*> args = {"train",      "--strategy",     name.c_str(),
                                       "--scenario", scenario.c_str(), "--augment-device",
                                       "gpu"};
      if (sc == Scenario::Stream) {
        args.push_back("--augment");
        args.push_back("heavy");
      }
      const bool takes =
          std::find(e.gpu_augment.begin(), e.gpu_augment.end(), sc) != e.gpu_augment.end();
      if (takes) {
        StrategyOptions o;
        o.scenario = sc;
        o.augment = Augment::Heavy;
        o.augment_device = AugmentDevice::Gpu;
        EXPECT_EQ(refusal_reason(e, o), "") << name << " " << scenario;
        EXPECT_FALSE(parse(args).code) << name << " " << scenario << ": " << parse(args).err;
      } else {
        expect_refused(args, "augments on the host in the " + scenario + " scenario");
      }
    }
    if (!e.gpu_augment.empty()) takers.push_back(name);
  }
  // No host worker writes managed memory while kernels run: um takes the stream scenario on the
  // GPU without concurrentManagedAccess, as with --augment none (and not with host workers).
  DeviceCaps no_concurrent = DeviceCaps::every();
  no_concurrent.concurrent_managed_access = false;
  StrategyOptions stream;
  stream.scenario = Scenario::Stream;
  stream.augment = Augment::Light;
  stream.augment_device = AugmentDevice::Gpu;
  EXPECT_EQ(waiver_reason(*find_strategy("um"), stream, no_concurrent), "");
  stream.augment_device = AugmentDevice::Host;
  EXPECT_NE(waiver_reason(*find_strategy("um"), stream, no_concurrent), "");
  // The single-GPU forms: those whose training set the GPU addresses where it lies, and the
  // copying strategies, which augment after the copy.
  EXPECT_EQ(takers, (std::vector<std::string>{"resident", "pageable", "pinned", "double-buffer",
                                              "zero-copy", "um", "um-prefetch", "um-advise",
                                              "zero-copy-staged", "um-prefetch-coarse",
                                              "pinned-graph", "double-buffer-graph"}));
  for (const std::string& name : takers)
    EXPECT_EQ(find_strategy(name)->gpu_augment_after_copy,
              name != "resident" && name != "zero-copy" && name.rfind("um", 0) != 0)
        << name;
  expect_refused({"train", "--augment-device", "cpu"}, "--augment-device");
  const Ran r = run_binary("train --strategy host-shared --scenario refresh --augment-device gpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("taken by: resident, pageable, pinned, double-buffer, zero-copy, um, "
                          "um-prefetch, um-advise, um-prefetch-coarse in refresh and stream; "
                          "zero-copy-staged, pinned-graph, double-buffer-graph in refresh)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line: " << r.output;
}

TEST(CliRefusals, OutputFilesAreCheckedBeforeTheDataAndTheGpu) {
  if (access("/dev/full", W_OK) == 0) {
    const Ran r = run_binary("train --json /dev/full --data /nonexistent/memstrat-data");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("--json: '/dev/full' is not a regular file"), std::string::npos)
        << r.output;
  }
  const std::string dir = std::filesystem::temp_directory_path() / "memstrat_cli_refusals";
  std::filesystem::create_directories(dir);
  const std::string rec = dir + "/run.jsonl";
  std::filesystem::remove(rec);
  Ran r = run_binary("train --json " + rec + " --trace " + dir + "/./run.jsonl");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("name the same file"), std::string::npos) << r.output;
  // A run that stops before its record leaves no empty record file behind.
  r = run_binary("train --json " + rec + " --data /nonexistent/memstrat-data");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(std::filesystem::exists(rec)) << "the --json check left " << rec;
  r = run_binary("train --export-init /dev/full/init");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--export-init"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(CliRefusals, VersionSaysWhatWasBuilt) {
  const BuildInfo b = build_info();
  for (const char* flag : {"--version", "-V"}) {
    const Ran r = run_binary(flag);
    EXPECT_EQ(r.code, 0) << flag << ": " << r.output;
    for (const std::string& part :
         {"memstrat " + b.version, "commit " + b.git_sha,
          "built with CUDA runtime " + cuda_version_string(b.cuda_runtime), std::string("CUDA driver: ")})
      EXPECT_NE(r.output.find(part), std::string::npos) << flag << ": no '" << part << "' in\n"
                                                        << r.output;
  }
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
}
