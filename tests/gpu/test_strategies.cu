// Every strategy changes where bytes live and when they move, never the math: for the same seed
// they must produce bitwise-identical per-sample loss curves to `resident` running the same step
// implementation (--fused on takes the layer-by-layer step for zero-copy, whose batches the step
// reads in place from host memory; the step implementations differ in fp32 summation order).
#include <algorithm>
#include <cstring>

#include "gpu_test_support.h"
#include "memory_strategies/batch_geometry.h"  // batch_count
#include "memory_strategies/um_hints.h"        // check_managed_fits

using namespace memstrat;
using namespace memstrat::testing;

namespace {
struct Combo {
  Transfer transfer;
  Scenario scenario;
};
std::string combo_name(const ::testing::TestParamInfo<Combo>& i) {
  return std::string(to_string(i.param.transfer)) + "_" + std::string(to_string(i.param.scenario));
}
class AllStrategies : public ::testing::TestWithParam<Combo> {};
}  // namespace

TEST_P(AllStrategies, BitwiseIdenticalLossCurvesToResident) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig base = short_run();
  base.transfer = GetParam().transfer;
  base.scenario = GetParam().scenario;
  ResidentReference resident(base);
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const auto& e : strategy_registry()) {
    if (e.name == "resident") continue;
    if (const std::string why = e.unsupported(caps); !why.empty()) {
      std::cout << "[ WAIVED ] " << e.name << ": " << why << "\n";
      continue;
    }
    RunConfig r = base;
    r.strategy = &e;
    if (const std::string why = refusal_reason(e, strategy_options(r)); !why.empty()) {
      std::cout << "[ REFUSED ] " << e.name << " " << to_string(base.scenario) << ": " << why
                << "\n";  // the peer-fanout forms: static only
      continue;
    }
    const RunOutput got = train_run(r);
    const RunOutput& ref = resident.for_step_of(got);
    ASSERT_EQ(ref.sample_loss.size(), 2u);
    EXPECT_EQ(first_difference(ref, got), "") << e.name << " differs from resident (" << got.step << ")";
    EXPECT_EQ(got.test.acc, ref.test.acc) << e.name;
    // --fused on: the layer-by-layer step exactly where the batch is read in host memory.
    EXPECT_EQ(got.step == "layer-by-layer", e.batch_in_host_memory) << e.name << ": " << got.step;
  }
}

INSTANTIATE_TEST_SUITE_P(TransferScenario, AllStrategies,
                         ::testing::Values(Combo{Transfer::U8, Scenario::Static},
                                           Combo{Transfer::F32, Scenario::Static},
                                           Combo{Transfer::U8, Scenario::Refresh},
                                           Combo{Transfer::F32, Scenario::Refresh}),
                         combo_name);

TEST(Strategies, U8AndF32TransfersGiveTheSameMath) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig a = short_run(), b = short_run();
  b.transfer = Transfer::F32;  // the GPU normalises exactly like the host
  EXPECT_EQ(first_difference(train_run(a), train_run(b)), "");
}

TEST(Strategies, GraphsOnAndOffAreBitwiseIdentical) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const char* s : {"resident", "double-buffer", "um-prefetch", "zero-copy-staged"}) {
    RunConfig on = short_run(s), off = short_run(s);
    off.graphs = Graphs::Off;
    EXPECT_EQ(first_difference(train_run(on), train_run(off)), "") << s;
  }
}

// The epoch launch (all steps of an epoch in one kernel launch) is the same training as one
// launch per batch, bit for bit: static and refresh (whose upload acquire(0) enqueues first),
// u8 and f32, a batch size with a ragged last batch (60000 = 234·256 + 96) and batch 8.
TEST(Strategies, EpochLaunchOnAndOffAreBitwiseIdentical) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
    for (const Transfer t : {Transfer::U8, Transfer::F32}) {
      RunConfig on = short_run(), off = short_run();
      on.scenario = off.scenario = sc;
      on.transfer = off.transfer = t;
      off.launch_form = LaunchForm::PerBatch;
      const RunOutput a = train_run(on), b = train_run(off);
      EXPECT_TRUE(a.epoch_launch);
      EXPECT_FALSE(b.epoch_launch);
      EXPECT_EQ(first_difference(a, b), "") << to_string(sc) << " " << to_string(t);
      EXPECT_EQ(a.test.acc, b.test.acc);
    }
  }
  RunConfig on = short_run(), off = short_run();
  on.batch = off.batch = 8;
  on.epochs = off.epochs = 1;
  off.launch_form = LaunchForm::PerBatch;
  const RunOutput a = train_run(on), b = train_run(off);
  EXPECT_TRUE(a.epoch_launch);
  EXPECT_EQ(first_difference(a, b), "") << "batch 8";
  // Only a strategy that lets every batch be acquired up front runs it.
  EXPECT_FALSE(train_run(short_run("pinned")).epoch_launch);
}

TEST(Strategies, DoubleBufferDepthsAndCopyStreamsAreBitwiseIdentical) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig ref = short_run("double-buffer");
  ref.scenario = Scenario::Refresh;
  const RunOutput base = train_run(ref);
  for (auto [depth, streams] : {std::pair{3, 1}, {3, 2}, {4, 3}, {8, 2}}) {
    RunConfig r = ref;
    r.depth = depth;
    r.copy_streams = streams;
    r.batch = 256;
    EXPECT_EQ(first_difference(base, train_run(r)), "") << "depth " << depth << " streams " << streams;
  }
}

TEST(Strategies, SmallAndOddBatchesIdenticalAcrossExplicitStrategies) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const DeviceCaps caps = DeviceCaps::query(0);
  // 1007: last batch partial, and batch b's labels start at b·1007·4 bytes, 16-byte aligned
  // only for every fourth batch (the packed layout of zero-copy-staged realigns them). 13: the
  // same with 4616 small batches, the last one of 7 rows.
  for (const int batch : {1000 + 7, 13}) {
    RunConfig ref = short_run();
    ref.batch = batch;
    ref.epochs = 1;
    ResidentReference resident(ref);
    for (const char* s : {"pageable", "pinned", "double-buffer", "zero-copy", "um",
                          "zero-copy-staged", "um-prefetch-coarse", "pinned-graph",
                          "double-buffer-graph"}) {
      if (const std::string why = find_strategy(s)->unsupported(caps); !why.empty()) {
        std::cout << "[ WAIVED ] " << s << ": " << why << "\n";
        continue;
      }
      RunConfig r = ref;
      r.strategy = find_strategy(s);
      const RunOutput got = train_run(r);
      EXPECT_EQ(first_difference(resident.for_step_of(got), got), "") << s << " batch " << batch;
    }
  }
}

// The best forms' own options change when bytes move, never the math: zero-copy-staged at
// depths 2-8 with one batch, a few or all batches per staged chunk (refresh: every slot is
// reused with new data every epoch), double-buffer-graph at
// depths 2-8 with 1-3 copy streams (replayed epoch graphs), um-prefetch-coarse from single-batch
// chunks to one chunk for the whole epoch, static and refresh.
TEST(Strategies, BestFormOptionsAreBitwiseIdentical) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
    RunConfig ref = short_run();
    ref.scenario = sc;
    ref.epochs = 3;
    const RunOutput base = train_run(ref);
    if (find_strategy("zero-copy-staged")->unsupported(caps).empty()) {
      for (auto [depth, mib] : {std::pair{2, 1}, {3, 1}, {8, 1}, {2, 8}, {3, 1024}}) {
        RunConfig r = ref;
        r.strategy = find_strategy("zero-copy-staged");
        r.depth = depth;
        r.copy_chunk_mib = mib;
        EXPECT_EQ(first_difference(base, train_run(r)), "")
            << "zero-copy-staged depth " << depth << " --copy-chunk " << mib;
      }
    }
    for (auto [depth, streams] : {std::pair{2, 1}, {3, 2}, {4, 3}, {8, 2}}) {
      RunConfig r = ref;
      r.strategy = find_strategy("double-buffer-graph");
      r.depth = depth;
      r.copy_streams = streams;
      EXPECT_EQ(first_difference(base, train_run(r)), "")
          << "double-buffer-graph depth " << depth << " streams " << streams;
    }
    if (find_strategy("um-prefetch-coarse")->unsupported(caps).empty()) {
      for (const int mib : {1, 8, 1024}) {
        RunConfig r = ref;
        r.strategy = find_strategy("um-prefetch-coarse");
        r.prefetch_chunk_mib = mib;
        EXPECT_EQ(first_difference(base, train_run(r)), "") << "--prefetch-chunk " << mib;
      }
    }
  }
}

// The chunked best forms' copy chunks change how many batches one copy (or staging kernel)
// moves, never the math: from one batch per copy (1 MiB is less than a block of f32 at batch
// 1007) to the whole epoch in one (1024 MiB), 1-2 copy streams and 2-3 chunk slots, static and
// refresh, u8 and f32, batch 256 and the odd batch 1007 (a ragged last batch, and packing
// padding between blocks inside a chunk). Two epochs: pinned-graph's first captured, its second
// a replay of the epoch graph.
TEST(Strategies, GraphFormChunkOptionsAreBitwiseIdentical) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const Scenario sc : {Scenario::Static, Scenario::Refresh})
    for (const Transfer t : {Transfer::U8, Transfer::F32})
      for (const int batch : {256, 1007}) {
        RunConfig ref = short_run();
        ref.scenario = sc;
        ref.transfer = t;
        ref.batch = batch;
        ResidentReference resident(ref);
        for (const int mib : {1, 8, 1024}) {
          const std::string what = std::string(to_string(sc)) + " " + std::string(to_string(t)) +
                                   " batch " + std::to_string(batch) + " --copy-chunk " +
                                   std::to_string(mib);
          RunConfig p = ref;
          p.strategy = find_strategy("pinned-graph");
          p.copy_chunk_mib = mib;
          const RunOutput pg = train_run(p);
          EXPECT_EQ(pg.epoch_form, EpochForm::Graph) << what;
          EXPECT_EQ(first_difference(resident.for_step_of(pg), pg), "") << "pinned-graph " << what;
          for (const int depth : {2, 3})
            for (const int streams : {1, 2}) {
              RunConfig d = ref;
              d.strategy = find_strategy("double-buffer-graph");
              d.copy_chunk_mib = mib;
              d.depth = depth;
              d.copy_streams = streams;
              const RunOutput db = train_run(d);
              EXPECT_EQ(db.epoch_form, EpochForm::ChunkKernels) << what;
              EXPECT_EQ(first_difference(resident.for_step_of(db), db), "")
                  << "double-buffer-graph " << what << " depth " << depth << " streams "
                  << streams;
            }
          if (find_strategy("zero-copy-staged")->unsupported(caps).empty())
            for (const int depth : {2, 3}) {
              RunConfig z = ref;
              z.strategy = find_strategy("zero-copy-staged");
              z.copy_chunk_mib = mib;
              z.depth = depth;
              const RunOutput zs = train_run(z);
              EXPECT_EQ(zs.epoch_form, EpochForm::ChunkKernels) << what;
              EXPECT_EQ(first_difference(resident.for_step_of(zs), zs), "")
                  << "zero-copy-staged " << what << " depth " << depth;
            }
        }
      }
}

TEST(Strategies, TiledGemmBackendIsAlsoStrategyIndependent) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig ref = short_run();
  ref.gemm = kernels::GemmBackend::Tiled;
  ref.transfer = Transfer::F32;
  const RunOutput base = train_run(ref);
  for (const char* s : {"pinned", "zero-copy", "um-advise"}) {
    RunConfig r = ref;
    r.strategy = find_strategy(s);
    EXPECT_EQ(first_difference(base, train_run(r)), "") << s;
  }
}

TEST(Determinism, SameCommandTwiceGivesABitwiseIdenticalCurve) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const char* s : {"resident", "double-buffer", "um"}) {
    RunConfig r = short_run(s);
    r.scenario = Scenario::Refresh;
    EXPECT_EQ(first_difference(train_run(r), train_run(r)), "") << s;
  }
}

TEST(Training, ResidentLearnsMnistInTwoEpochs) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const RunOutput r = train_run(short_run());
  EXPECT_LT(r.epochs[1].train_loss, r.epochs[0].train_loss);
  EXPECT_GT(r.test.acc, 0.95) << "test accuracy after 2 epochs";
  std::cout << "resident 2 epochs: test acc " << r.test.acc << ", epoch 2 gpu " << r.epochs[1].gpu_ms
            << " ms\n";
}

TEST(Strategies, ReportTheBytesTheyMove) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& d = mnist();
  const std::uint64_t u8_epoch = static_cast<std::uint64_t>(d.n_train()) * (784 + 4);
  RunConfig r = short_run("pinned");
  EXPECT_EQ(train_run(r).epochs[1].strategy.h2d_bytes, u8_epoch);
  r.strategy = find_strategy("double-buffer");
  r.transfer = Transfer::F32;
  const RunOutput db = train_run(r);
  EXPECT_EQ(db.epochs[1].strategy.h2d_bytes, static_cast<std::uint64_t>(d.n_train()) * (4 * 784 + 4));
  ASSERT_TRUE(db.epochs[1].strategy.copy_ms.has_value());
  EXPECT_GT(*db.epochs[1].strategy.copy_ms, 0.0);
  r = short_run();
  const RunOutput res = train_run(r);
  EXPECT_EQ(res.epochs[1].strategy.h2d_bytes, 0u) << "static resident uploads once, at set-up";
  r.scenario = Scenario::Refresh;
  EXPECT_EQ(train_run(r).epochs[1].strategy.h2d_bytes, u8_epoch);
  r = short_run("zero-copy");
  EXPECT_EQ(train_run(r).epochs[1].strategy.h2d_bytes, 0u);

  const DeviceCaps caps = DeviceCaps::query(0);
  // The packed best forms move every batch's block every epoch, static or not: for MNIST a block
  // has no gap before its labels. They move chunks of whole blocks (--copy-chunk, 8 MiB), one
  // range per chunk, which also holds the tail of every block but the chunk's last, up to the
  // 16-byte block stride: none at batch 256 (201728 B blocks), 4 B at batch 1007 (793516 B u8,
  // 3161980 B f32 blocks). pinned-graph's epochs run as one replayed graph, so every epoch after
  // the first is a replay: its figures may not depend on acquire() having been called.
  for (const char* s : {"zero-copy-staged", "pinned-graph", "double-buffer-graph"}) {
    if (const std::string why = find_strategy(s)->unsupported(caps); !why.empty()) {
      std::cout << "[ WAIVED ] " << s << ": " << why << "\n";
      continue;
    }
    for (const Transfer t : {Transfer::U8, Transfer::F32})
      for (const Scenario sc : {Scenario::Static, Scenario::Refresh})
        for (const int batch : {256, 1007}) {
          RunConfig z = short_run(s);
          z.transfer = t;
          z.scenario = sc;
          z.batch = batch;
          z.epochs = 3;
          const RunOutput o = train_run(z);
          EXPECT_EQ(o.epoch_form, captured_form(s)) << s;
          const std::uint64_t per = t == Transfer::U8 ? 784 + 4 : 4 * 784 + 4;
          const std::uint64_t block = per * batch, stride = (block + 15) / 16 * 16;
          const std::uint64_t k = std::max<std::uint64_t>(1, (std::uint64_t{8} << 20) / stride);
          const std::uint64_t batches = batch_count(d.n_train(), batch);
          const std::uint64_t padding = (stride - block) * (batches - (batches + k - 1) / k);
          for (const EpochResult& e : o.epochs) {
            EXPECT_EQ(e.strategy.h2d_bytes, static_cast<std::uint64_t>(d.n_train()) * per + padding)
                << s << " " << to_string(t) << " " << to_string(sc) << " batch " << batch
                << " epoch " << e.epoch;
            ASSERT_TRUE(e.strategy.copy_ms.has_value());
            EXPECT_GT(*e.strategy.copy_ms, 0.0);
          }
        }
  }
  if (find_strategy("um-prefetch-coarse")->unsupported(caps).empty()) {
    // Static: everything is prefetched in the first epoch, nothing after. Refresh: everything,
    // every epoch (the host rewrite moved the pages back).
    RunConfig c = short_run("um-prefetch-coarse");
    c.epochs = 3;
    const RunOutput st = train_run(c);
    EXPECT_EQ(st.epochs[0].strategy.h2d_bytes, u8_epoch);
    ASSERT_TRUE(st.epochs[0].strategy.copy_ms.has_value());
    for (int e = 1; e < 3; ++e) {
      EXPECT_EQ(st.epochs[e].strategy.h2d_bytes, 0u) << "static epoch " << e + 1;
      EXPECT_FALSE(st.epochs[e].strategy.copy_ms.has_value()) << "static epoch " << e + 1;
    }
    c.scenario = Scenario::Refresh;
    for (const EpochResult& e : train_run(c).epochs)
      EXPECT_EQ(e.strategy.h2d_bytes, u8_epoch) << "refresh epoch " << e.epoch;
  }
}

TEST(Strategies, StallIsWhereTheDataWaitIs) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig r = short_run();
  r.transfer = Transfer::F32;
  r.batch = 1024;
  const RunOutput res = train_run(r);
  r.strategy = find_strategy("pinned");
  const RunOutput pin = train_run(r);
  // pinned copies on the compute stream: ~all of its copy time is stall; resident has none.
  EXPECT_LT(res.epochs[1].stall_ms, 0.5);
  ASSERT_TRUE(pin.epochs[1].strategy.copy_ms.has_value());
  EXPECT_GT(pin.epochs[1].stall_ms, 0.8 * *pin.epochs[1].strategy.copy_ms);
  // The same in a replayed epoch graph, timed by its external event nodes: pinned-graph's copies
  // are on the compute stream too, and its steps are where the compute time is.
  r.strategy = find_strategy("pinned-graph");
  const RunOutput graph = train_run(r);
  ASSERT_EQ(graph.epoch_form, EpochForm::Graph);
  const EpochResult& e = graph.epochs[1];
  ASSERT_TRUE(e.strategy.copy_ms.has_value());
  EXPECT_GT(e.stall_ms, 0.8 * *e.strategy.copy_ms);
  EXPECT_GT(e.compute_ms, 0.5 * res.epochs[1].compute_ms);
  // The three per-batch intervals tile ready[0]..done[last] (up to the events' resolution).
  EXPECT_NEAR(e.stall_ms + e.compute_ms + e.idle_ms, e.gpu_ms, 0.05 * e.gpu_ms);
}

TEST(ManagedGuard, RefusesMoreManagedMemoryThanIsFree) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  std::size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  try {
    check_managed_fits(free_b + (1ull << 30), "um");
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("refusing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MiB free"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_managed_fits(64ull << 20, "um"));
}
