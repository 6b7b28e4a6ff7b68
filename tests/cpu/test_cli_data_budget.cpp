// The command line of --replicate K and --device-budget GiB: bad values are usage errors (exit 2,
// one line naming the option), `memstrat describe --json` declares both ranges, the record's
// config keys are set, and refusals that need the data set (a strategy that cannot keep its data
// within the budget, K copies more than the host's memory) come before any device work, so they
// hold on a machine without a GPU. No GPU needed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/host_info.h"
#include "memory_strategies/replicated_set.h"
#include "tests/support/mnist_test_data.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
nlohmann::json describe_option(const std::string& name) {
  const Ran r = run_binary("describe --json");
  EXPECT_EQ(r.code, 0) << r.output;
  const nlohmann::json d = nlohmann::json::parse(r.output);
  for (const auto& o : d["train_options"])
    if (o["name"] == name) return o;
  ADD_FAILURE() << name << " not in describe --json";
  return {};
}
}  // namespace

TEST(CliDataBudget, ReplicateMustBeAWholeNumberInItsRange) {
  for (const char* bad : {"0", "-1", "4097", "99999999999", "1.5", "two", "", "0x2"})
    expect_refused({"train", "--replicate", bad}, "--replicate");
  auto p = parse({"train", "--replicate", "4096"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.replicate, kMaxReplicate);
  p = parse({"train"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.replicate, 1) << "default: the set as loaded";
}

TEST(CliDataBudget, DeviceBudgetMustBeAPositiveFiniteNumber) {
  for (const char* bad : {"0", "-1", "-0.5", "nan", "inf", "-inf", "1e10", "lots", "", "2GiB"})
    expect_refused({"train", "--device-budget", bad}, "--device-budget");
  auto p = parse({"train", "--device-budget", "0.25"});
  ASSERT_FALSE(p.code) << p.err;
  ASSERT_TRUE(p.req.run.device_budget_gib);
  EXPECT_EQ(*p.req.run.device_budget_gib, 0.25);
  p = parse({"train"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_FALSE(p.req.run.device_budget_gib) << "default: no budget";
}

TEST(CliDataBudget, BadValuesFromTheShellAreOneLineAndExit2) {
  for (const std::string args : {"train --replicate 0", "train --replicate abc",
                                 "train --device-budget nan", "train --device-budget -1"}) {
    const Ran r = run_binary(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  }
}

TEST(CliDataBudget, DescribeDeclaresBothRanges) {
  const nlohmann::json k = describe_option("--replicate");
  EXPECT_EQ(k["kind"], "integer");
  EXPECT_EQ(k["min"], 1);
  EXPECT_EQ(k["max"], kMaxReplicate);
  EXPECT_EQ(k["default"], 1);
  EXPECT_EQ(k["record_key"], "replicate");
  const nlohmann::json b = describe_option("--device-budget");
  EXPECT_EQ(b["kind"], "number");
  EXPECT_EQ(b["exclusive_min"], 0);
  EXPECT_FALSE(b.contains("min"));
  EXPECT_TRUE(b["default"].is_null());
  EXPECT_EQ(b["record_key"], "device_budget_gib");
}

// The footprint check needs only the data set's size: refused in milliseconds, GPU or not.
TEST(CliDataBudget, AStrategyWhoseDataExceedsTheBudgetIsRefusedBeforeAnyDeviceWork) {
  MEMSTRAT_REQUIRE_MNIST();
  const std::string data = " --data " + mnist_dir();
  // 2 x 60000 samples, 94560000 bytes in u8, against 0.05 GiB = 53687091 bytes.
  for (const char* s : {"resident", "um", "um-advise"}) {
    const Ran r = run_binary(std::string("train --strategy ") + s +
                             " --replicate 2 --device-budget 0.05" + data);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(std::string(s) + ": the data set (0.0881 GiB on the device, 120000 "
                                             "samples in u8) does not fit in --device-budget "
                                             "0.05 GiB; use a streaming strategy ("),
              std::string::npos)
        << r.output;
  }
  // Without --replicate the set is 47280000 bytes: it fits, and the run goes on to the device
  // (exit 3 without one, 0 with one).
  const Ran fits = run_binary("train --strategy resident --epochs 1 --device-budget 0.05 --quiet" + data);
  EXPECT_TRUE(fits.code == 0 || fits.code == 3) << fits.output;
}

TEST(CliDataBudget, MoreCopiesThanTheHostCanHoldAreRefused) {
  MEMSTRAT_REQUIRE_MNIST();
  // 4096 copies: 245760000 samples of 788 bytes, twice (the host copy in u8): 360.72 GiB.
  const std::uint64_t need = replicated_host_bytes(60000, 784, kMaxReplicate, 784);
  const std::optional<std::uint64_t> avail = available_memory_bytes();
  if (!avail || host_memory_refusal(need, avail).empty())
    GTEST_SKIP() << "this host could hold " << kMaxReplicate << " copies";
  const Ran r = run_binary("train --replicate 4096 --data " + mnist_dir());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--replicate 4096 (245760000 samples) needs 360.72 GiB of host memory"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("available (MemAvailable)"), std::string::npos) << r.output;
}
