// What the command line refuses before any work, because it would otherwise reach the run
// changed or be lost with it: bytes that are not UTF-8, numbers that change on the way to the
// GPU, a strategy option the strategy never reads, output files that cannot hold the output;
// and `--version`. No GPU needed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/build_info.h"
#include "memory_strategies/registry.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

std::string joined(const std::vector<const char*>& args) {
  std::string s;
  for (const char* a : args) s += std::string(a) + " ";
  return s;
}

/// parse(args) ended in exit 2 with a message that contains `says`.
void expect_refused(const std::vector<const char*>& args, const std::string& says) {
  const auto p = parse(args);
  ASSERT_TRUE(p.code) << joined(args);
  EXPECT_EQ(*p.code, 2) << joined(args);
  EXPECT_NE(p.err.find(says), std::string::npos) << joined(args) << ": " << p.err;
}

}  // namespace

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
