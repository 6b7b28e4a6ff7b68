// --replicate and --device-budget on the GPU: every streaming strategy, on a replicated set and
// under a budget smaller than that set, trains bitwise as resident does on the same set without a
// budget (same step); resident and unified memory are refused under that budget before any device
// work; the budget is really held (what is left free after the hold is the budget and its margin);
// and a budget beyond the device's free memory is a usage error.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "experiments/core/device_budget.h"
#include "memory_strategies/replicated_set.h"
#include "tests/gpu/gpu_test_support.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
constexpr int kCopies = 2;
// 4096 MNIST samples twice: 8192 x 788 bytes = 6455296 in u8; the budget is two thirds of it.
constexpr double kBudgetGiB = 0.004;  // 4294967 bytes

const HostDataset& replicated_set() {
  static const HostDataset d = [] {
    HostDataset s = mnist();
    truncate_dataset(s, 4096, 1000);
    replicate_training_set(s, kCopies, 1);
    return s;
  }();
  return d;
}

RunConfig budget_config(std::string_view strategy, bool budget) {
  RunConfig c = short_run(strategy);
  c.replicate = kCopies;
  c.copy_chunk_mib = 1;  // chunk slots of 5 batches (1 MiB) for the chunked forms
  if (budget) c.device_budget_gib = kBudgetGiB;
  return c;
}

/// Resident without a budget on the replicated set, per step implementation.
const RunOutput& resident_for(const RunOutput& got) {
  static std::map<std::string, RunOutput> runs;
  auto it = runs.find(got.step);
  if (it != runs.end()) return it->second;
  RunConfig c = budget_config("resident", false);
  c.fused = fused_mode_for(got.step);
  return runs.emplace(got.step, train_run_on(replicated_set(), c)).first->second;
}
}  // namespace

class BudgetedStreaming : public ::testing::TestWithParam<const char*> {};

TEST_P(BudgetedStreaming, ReplicatedSetWithinABudgetSmallerThanItGivesResidentsCurve) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& data = replicated_set();
  const std::uint64_t set_bytes = static_cast<std::uint64_t>(data.n_train()) * 788;
  ASSERT_LT(gib_bytes(kBudgetGiB), set_bytes) << "the budget must be smaller than the data";
  const RunConfig c = budget_config(GetParam(), true);
  RunRecord rec;
  const RunOutput got = train_run_on(data, c, &rec);
  ASSERT_EQ(got.sample_loss.size(), 2u);
  ASSERT_EQ(got.sample_loss[0].size(), static_cast<std::size_t>(data.n_train()));
  const RunOutput& ref = resident_for(got);
  EXPECT_EQ(first_difference(got, ref), "") << GetParam() << " (step " << got.step << ")";

  // The hold: everything but the budget and its margin, as the record says.
  ASSERT_TRUE(rec.device_budget);
  const DeviceBudgetRecord& b = *rec.device_budget;
  EXPECT_EQ(b.budget_bytes, gib_bytes(kBudgetGiB));
  EXPECT_LE(b.data_footprint_bytes, b.budget_bytes);
  EXPECT_GT(b.held_bytes, 0u);
  EXPECT_LE(b.free_after_hold_bytes, b.budget_bytes + b.margin_bytes);
  EXPECT_GE(b.free_after_hold_bytes, b.budget_bytes) << "the hold took some of the budget";
  ASSERT_TRUE(b.free_after_run_bytes);
  EXPECT_EQ(rec.to_json()["config"]["replicate"], kCopies);
  EXPECT_EQ(rec.to_json()["config"]["dataset"]["train_samples"], data.n_train());
}

INSTANTIATE_TEST_SUITE_P(Streaming, BudgetedStreaming,
                         ::testing::Values("pinned", "double-buffer", "double-buffer-graph",
                                           "zero-copy", "zero-copy-staged", "pageable",
                                           "pinned-graph"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(DataBudget, WholeSetStrategiesAreRefusedUnderThatBudget) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const char* s : {"resident", "um", "um-prefetch", "um-advise", "um-prefetch-coarse"}) {
    std::ostringstream out, err;
    try {
      Session(budget_config(s, true), replicated_set()).run(out, err);
      ADD_FAILURE() << s << " ran under a budget smaller than its data";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(s) + ": the data set"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DataBudget, ABudgetBeyondTheDevicesFreeMemoryIsAUsageError) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig c = budget_config("pinned", true);
  c.device_budget_gib = 1e6;  // a million GiB
  std::ostringstream out, err;
  try {
    Session(c, replicated_set()).run(out, err);
    ADD_FAILURE() << "a budget of 1e6 GiB ran";
  } catch (const BudgetRefused& e) {
    EXPECT_NE(std::string(e.what()).find("free after the model's allocations"), std::string::npos)
        << e.what();
  }
}
