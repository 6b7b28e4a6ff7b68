// --device-budget's pure half: each strategy's declared device footprint for the data
// (StrategyEntry::device_footprint, beside each strategy's attach), worked out by hand for
// MNIST's 60000 samples at batch 256, and the refusal (budget_refusal) it leads to before any
// device work. No GPU needed.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "experiments/core/device_budget.h"
#include "experiments/core/trainer.h"
#include "kernels/single_launch/step_launcher.h"  // StepBatch
#include "memory_strategies/registry.h"

using namespace memstrat;

namespace {
constexpr std::int64_t kN = 60000;
constexpr int kF = 784;
// One batch of 256: 256 x 784 pixel bytes + 256 x 4 label bytes (u8); 256 x 3136 + 1024 (f32).
constexpr std::uint64_t kBatchU8 = 256 * 788;     // 201728
constexpr std::uint64_t kBatchF32 = 256 * 3140;   // 803840
constexpr std::uint64_t kSetU8 = kN * 788;        // 47280000
constexpr std::uint64_t kSetF32 = kN * 3140;      // 188400000
constexpr std::uint64_t kGather = kN * 4 + kBatchU8;  // the epoch's order + one batch

std::uint64_t footprint(std::string_view name, const StrategyOptions& o) {
  return device_footprint(*find_strategy(name), o, kN, kF);
}

StrategyOptions with(Scenario s, Augment a = Augment::Light) {
  StrategyOptions o;
  o.scenario = s;
  o.augment = a;
  return o;
}

RunConfig budget_run(std::string_view strategy, double gib) {
  RunConfig c;
  c.strategy = find_strategy(strategy);
  c.device_budget_gib = gib;
  return c;
}
}  // namespace

TEST(DeviceFootprint, EveryStrategyDeclaresOne) {
  for (const StrategyEntry& e : strategy_registry())
    EXPECT_NE(e.device_footprint, nullptr) << e.name;
}

TEST(DeviceFootprint, StaticAndRefreshByHand) {
  StrategyOptions o;  // batch 256, u8, depth 2, --copy-chunk 8 MiB
  o.depth = 3;
  o.copy_chunk_mib = 1;  // 1 MiB holds 5 packed blocks of 201728 bytes (16-byte aligned already)
  const std::map<std::string, std::uint64_t> want = {
      {"resident", kSetU8},
      {"pageable", kBatchU8},
      {"pinned", kBatchU8},
      {"double-buffer", 3 * kBatchU8},
      {"zero-copy", 0},
      {"um", kSetU8},
      {"um-prefetch", kSetU8},
      {"um-advise", kSetU8},
      {"um-prefetch-coarse", kSetU8},
      {"zero-copy-staged", 3 * 5 * kBatchU8},
      {"pinned-graph", 5 * kBatchU8},
      {"double-buffer-graph", 3 * 5 * kBatchU8},
      {"peer-fanout", kSetU8},  // one GPU: the set, packed (every MNIST block is 16-byte whole)
      {"peer-fanout-ring", kSetU8},
      {"host-shared", kBatchU8},  // the set is in host memory: pinned's one batch
      {"host-shared-ring", 3 * 5 * kBatchU8},
      // one GPU (where --device-budget runs): um's and um-prefetch-coarse's own managed set
      {"um-shared", kSetU8},
      {"um-shared-host", kSetU8},
      {"um-shared-prefetch", kSetU8},
      {"um-shared-read-mostly", kSetU8},
  };
  ASSERT_EQ(want.size(), strategy_registry().size()) << "a strategy without a hand value";
  for (const Scenario s : {Scenario::Static, Scenario::Refresh}) {
    o.scenario = s;
    for (const auto& [name, bytes] : want) EXPECT_EQ(footprint(name, o), bytes) << name;
  }
}

TEST(DeviceFootprint, F32FourTimesThePixels) {
  StrategyOptions o;
  o.transfer = Transfer::F32;
  EXPECT_EQ(footprint("resident", o), kSetF32);
  EXPECT_EQ(footprint("um", o), kSetF32);
  EXPECT_EQ(footprint("pinned", o), kBatchF32);
  EXPECT_EQ(footprint("double-buffer", o), 2 * kBatchF32);
  // 8 MiB of 803840-byte blocks: 10 batches a chunk.
  EXPECT_EQ(footprint("pinned-graph", o), 10 * kBatchF32);
  EXPECT_EQ(footprint("double-buffer-graph", o), 2 * 10 * kBatchF32);
}

TEST(DeviceFootprint, BatchSizeAndTheLastPartialBatch) {
  StrategyOptions o;
  o.batch = 100000;  // more than the set: one batch of all 60000 rows
  EXPECT_EQ(footprint("pinned", o), kSetU8);
  o.batch = 1000;
  EXPECT_EQ(footprint("double-buffer", o), 2 * 1000 * 788u);
}

TEST(DeviceFootprint, StreamScenario) {
  // Host augmentation: the copying strategies keep their device batches; the slots are host
  // memory, except managed slots (8 of one 256-row batch, each rounded to 64 KiB: 262144 bytes).
  const StrategyOptions light = with(Scenario::Stream);
  EXPECT_EQ(footprint("pinned", light), kBatchU8);
  EXPECT_EQ(footprint("double-buffer", light), 2 * kBatchU8);
  EXPECT_EQ(footprint("zero-copy", light), 0u);
  EXPECT_EQ(footprint("um", light), 8u * 262144);
  // No host augmentation: the GPU gathers from the whole set where it can address it.
  const StrategyOptions none = with(Scenario::Stream, Augment::None);
  EXPECT_EQ(footprint("resident", none), kSetU8 + kGather);
  EXPECT_EQ(footprint("um", none), kSetU8 + kGather);
  EXPECT_EQ(footprint("zero-copy", none), kGather);
  EXPECT_EQ(footprint("pinned", none), kBatchU8);
}

TEST(DeviceFootprint, AugmentationOnTheGpu) {
  // Refresh: the GPU writes each epoch from the uint8 set; the order (and the epoch number) is
  // its device copy. Stream: the GPU gathers and augments from the uint8 set into one batch.
  constexpr std::uint64_t kOrder = (kN + 1) * 4;
  for (const Transfer t : {Transfer::U8, Transfer::F32}) {
    const std::uint64_t epoch = t == Transfer::U8 ? kSetU8 : kSetF32;
    const std::uint64_t batch = t == Transfer::U8 ? kBatchU8 : kBatchF32;
    StrategyOptions refresh = with(Scenario::Refresh);
    refresh.augment_device = AugmentDevice::Gpu;
    refresh.transfer = t;
    // resident: the set, the order and the epoch, in device memory.
    EXPECT_EQ(footprint("resident", refresh), kSetU8 + kOrder + epoch) << to_string(t);
    // zero-copy: the set and the epoch stay in mapped host memory.
    EXPECT_EQ(footprint("zero-copy", refresh), kOrder) << to_string(t);
    // The um family: the managed set and epoch count in full.
    for (const char* um : {"um", "um-prefetch", "um-advise", "um-prefetch-coarse"})
      EXPECT_EQ(footprint(um, refresh), kSetU8 + epoch + kOrder) << um << " " << to_string(t);
    // The copying strategies: their device batches, as with host augmentation, and the epoch
    // number the GPU augments with (augment_after_copy.h).
    StrategyOptions host_refresh = refresh;
    host_refresh.augment_device = AugmentDevice::Host;
    for (const char* c : {"pageable", "pinned", "double-buffer", "zero-copy-staged",
                          "pinned-graph", "double-buffer-graph"})
      EXPECT_EQ(footprint(c, refresh), footprint(c, host_refresh) + 4) << c << " " << to_string(t);
    EXPECT_EQ(footprint("pinned", refresh), batch + 4) << to_string(t);
    for (const Augment a : {Augment::Light, Augment::Heavy}) {
      StrategyOptions stream = with(Scenario::Stream, a);
      stream.augment_device = AugmentDevice::Gpu;
      stream.transfer = t;
      const std::uint64_t gather = kN * 4 + batch;  // the order, one batch in the transfer format
      EXPECT_EQ(footprint("resident", stream), kSetU8 + gather) << to_string(t);
      EXPECT_EQ(footprint("zero-copy", stream), gather) << to_string(t);
      for (const char* um : {"um", "um-prefetch", "um-advise", "um-prefetch-coarse"})
        EXPECT_EQ(footprint(um, stream), kSetU8 + gather) << um << " " << to_string(t);
      // The copying strategies: their device batches and the epoch number.
      EXPECT_EQ(footprint("pinned", stream), batch + 4) << to_string(t);
      EXPECT_EQ(footprint("double-buffer", stream), 2 * batch + 4) << to_string(t);
    }
  }
  // --augment none gathers the set in the transfer format.
  StrategyOptions none = with(Scenario::Stream, Augment::None);
  none.transfer = Transfer::F32;
  EXPECT_EQ(footprint("resident", none), kSetF32 + kN * 4 + kBatchF32);
}

TEST(DeviceBudget, GiBAreBinary) {
  EXPECT_EQ(gib_bytes(1), 1ull << 30);
  EXPECT_EQ(gib_bytes(0.5), 1ull << 29);
  EXPECT_EQ(gib_bytes(0.01), 10737418u);  // 10737418.24, rounded down
}

TEST(DeviceBudget, NoBudgetNoRefusal) {
  RunConfig c;
  c.strategy = find_strategy("resident");
  EXPECT_EQ(budget_refusal(c, kN * 4096, kF), "");
}

TEST(DeviceBudget, ResidentAndUnifiedMemoryRefuseASetLargerThanTheBudget) {
  // 0.04 GiB = 42949672 bytes < the set's 47280000.
  for (const char* s : {"resident", "um", "um-prefetch", "um-advise", "um-prefetch-coarse"}) {
    const std::string why = budget_refusal(budget_run(s, 0.04), kN, kF);
    EXPECT_NE(why.find(std::string(s) + ": the data set (0.044 GiB on the device, 60000 samples "
                                        "in u8) does not fit in --device-budget 0.04 GiB; use "
                                        "a streaming strategy ("),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("pinned"), std::string::npos) << why;
    EXPECT_EQ(why.find("resident,"), std::string::npos) << why;
  }
  EXPECT_EQ(budget_refusal(budget_run("resident", 0.05), kN, kF), "");  // 53687091 >= 47280000
}

TEST(DeviceBudget, StreamingStrategiesFitASmallBudgetUntilTheirBuffersDoNot) {
  for (const StrategyEntry& e : strategy_registry()) {
    // The peer-fanout forms hold the set too (on rank 0's GPU, and on one GPU).
    const bool whole_set = e.name == "resident" || e.name.rfind("um", 0) == 0 ||
                           e.name.rfind("peer-fanout", 0) == 0;
    EXPECT_EQ(budget_refusal(budget_run(e.name, 0.04), kN, kF).empty(), !whole_set) << e.name;
  }
  // 2 chunk slots of 8 MiB (41 blocks: 8270848 bytes each) do not fit 0.01 GiB = 10737418 bytes.
  const std::string why = budget_refusal(budget_run("double-buffer-graph", 0.01), kN, kF);
  EXPECT_NE(why.find("double-buffer-graph: its device buffers (0.0154 GiB at --batch 256) do not "
                     "fit in --device-budget 0.01 GiB; use a smaller --batch, --depth or "
                     "--copy-chunk, or a strategy that fits ("),
            std::string::npos)
      << why;
  RunConfig smaller = budget_run("double-buffer-graph", 0.01);
  smaller.copy_chunk_mib = 4;
  EXPECT_EQ(budget_refusal(smaller, kN, kF), "");
}

TEST(DeviceBudget, MarginHoldsTheTrainersBuffers) {
  // Per training sample a float loss and an int32 hit; per test sample its floats and three
  // 4-byte results; a step-table row per batch.
  EXPECT_EQ(Trainer::setup_device_bytes(kN, 10000, kF, 235),
            static_cast<std::uint64_t>(kN) * 8 + 10000u * (784 * 4 + 12) +
                235 * sizeof(kernels::StepBatch));
  RunConfig c;
  HostDataset d;
  d.train_labels.resize(kN);
  d.test_labels.resize(10000);
  EXPECT_EQ(budget_margin_bytes(c, d),
            kBudgetRuntimeMargin + Trainer::setup_device_bytes(kN, 10000, kF, 235));
}
