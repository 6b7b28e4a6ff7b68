// The stream scenario changes who produces the bytes and when, never the math: for every
// strategy in the registry that runs it (the others are reported as refused or waived, with the
// registry's reason), for 1, 3 and 8 host workers and any number of slots, the per-sample loss
// curves are bitwise identical:
//   light  = the refresh scenario's epoch (same order, same shift per (seed, epoch, row)), so
//            every stream run equals resident in refresh;
//   none   = the shuffled gather alone, on the host (copying strategies) or on the GPU
//            (resident, zero-copy, the um family): all equal resident's GPU gather;
//   heavy  = the affine warp: all equal pinned with one worker.
// One or two slots with eight workers is the hardest case for the hand-off: every batch reuses
// a slot the GPU has just read (a refill before the release event would change the curve).
#include <iostream>
#include <vector>

#include "gpu_test_support.h"
#include "memory_strategies/batch_geometry.h"  // batch_count

using namespace memstrat;
using namespace memstrat::testing;

namespace {

RunConfig stream_run(std::string_view strategy, Augment a, int workers, int prefetch = 8) {
  RunConfig c = short_run(strategy);
  c.scenario = Scenario::Stream;
  c.augment = a;
  c.workers = workers;
  c.prefetch = prefetch;
  return c;
}

/// The registry's strategies that run `a` in the stream scenario on this device; the others are
/// printed with the reason (refused: no device runs them so; waived: not this one).
std::vector<const StrategyEntry*> runnable(Augment a, Transfer t = Transfer::U8) {
  const DeviceCaps caps = DeviceCaps::query(0);
  std::vector<const StrategyEntry*> out;
  for (const StrategyEntry& e : strategy_registry()) {
    RunConfig c = stream_run(e.name, a, 1);
    c.transfer = t;
    const StrategyOptions o = strategy_options(c);
    if (const std::string why = refusal_reason(e, o); !why.empty()) {
      std::cout << "[ REFUSED ] " << e.name << " (" << to_string(a) << "): " << why << "\n";
      continue;
    }
    if (const std::string why = waiver_reason(e, o, caps); !why.empty()) {
      std::cout << "[ WAIVED ] " << e.name << " (" << to_string(a) << "): " << why << "\n";
      continue;
    }
    out.push_back(&e);
  }
  return out;
}

}  // namespace

TEST(Stream, LightIsTheRefreshEpochForEveryStrategyAndWorkerCount) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const Transfer t : {Transfer::U8, Transfer::F32}) {
    RunConfig refresh = short_run();
    refresh.scenario = Scenario::Refresh;
    refresh.transfer = t;
    ResidentReference resident(refresh);  // with the step each strategy runs
    const std::vector<const StrategyEntry*> strategies = runnable(Augment::Light, t);
    EXPECT_GE(strategies.size(), 5u) << "pageable, pinned, double-buffer, zero-copy(-staged) at least";
    for (const StrategyEntry* e : strategies) {
      // f32: one worker count (the bytes per worker were checked with u8).
      for (const int workers : t == Transfer::U8 ? std::vector<int>{1, 3, 8} : std::vector<int>{3}) {
        RunConfig r = stream_run(e->name, Augment::Light, workers);
        r.transfer = t;
        const RunOutput got = train_run(r);
        const RunOutput& ref = resident.for_step_of(got);
        EXPECT_EQ(first_difference(ref, got), "")
            << e->name << " " << to_string(t) << " workers " << workers;
        EXPECT_EQ(got.test.acc, ref.test.acc) << e->name;
      }
    }
  }
}

TEST(Stream, OneOrTwoSlotsNeverLetAWorkerOverwriteWhatTheGpuReads) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig refresh = short_run();
  refresh.scenario = Scenario::Refresh;
  ResidentReference resident(refresh);
  for (const StrategyEntry* e : runnable(Augment::Light))
    for (const int prefetch : {1, 2}) {
      const RunOutput got = train_run(stream_run(e->name, Augment::Light, 8, prefetch));
      EXPECT_EQ(first_difference(resident.for_step_of(got), got), "")
          << e->name << " prefetch " << prefetch;
    }
}

TEST(Stream, NoneIsTheSameGatherOnTheHostOrOnTheGpu) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const Transfer t : {Transfer::U8, Transfer::F32}) {
    RunConfig gather = stream_run("resident", Augment::None, 1);
    gather.transfer = t;
    EXPECT_FALSE(train_run(gather).epoch_launch)
        << "a gathered batch is not an offset: one launch per batch";
    ResidentReference resident(gather);
    for (const StrategyEntry* e : runnable(Augment::None, t)) {
      for (const int workers : t == Transfer::U8 ? std::vector<int>{1, 8} : std::vector<int>{2}) {
        RunConfig r = stream_run(e->name, Augment::None, workers);
        r.transfer = t;
        const RunOutput got = train_run(r);
        EXPECT_EQ(first_difference(resident.for_step_of(got), got), "")
            << e->name << " " << to_string(t) << " workers " << workers;
      }
    }
  }
}

TEST(Stream, HeavyIsTheSameForEveryStrategyAndWorkerCount) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  ResidentReference pinned(stream_run("pinned", Augment::Heavy, 1), "pinned");
  for (const StrategyEntry* e : runnable(Augment::Heavy))
    for (const int workers : {3, 8}) {
      const RunOutput got = train_run(stream_run(e->name, Augment::Heavy, workers));
      EXPECT_EQ(first_difference(pinned.for_step_of(got), got), "")
          << e->name << " workers " << workers;
    }
  // A different augmentation is a different curve (the test above could not pass by accident).
  const RunOutput light = train_run(stream_run("pinned", Augment::Light, 1));
  EXPECT_NE(first_difference(pinned.for_step_of(light), light), "");
}

// Per-batch CUDA graphs are captured once per batch index: batch b's slot is the same in every
// epoch (slot b mod K), so a strategy that reads slots in place replays them unchanged.
TEST(Stream, GraphsOnAndOffAreBitwiseIdentical) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const StrategyEntry* e : runnable(Augment::Light)) {
    RunConfig on = stream_run(e->name, Augment::Light, 4, 3);  // 235 batches, 3 slots
    on.epochs = 3;
    RunConfig off = on;
    off.graphs = Graphs::Off;
    EXPECT_EQ(first_difference(train_run(on), train_run(off)), "") << e->name;
  }
}

// Attached in the stream scenario, no strategy offers the whole-epoch forms (an epoch graph, or
// acquiring every batch up front), whether it takes them by itself or is asked for one by name
// (launch_forms: per batch only, as the registry declares): its batches depend on the producers.
TEST(Stream, NoStrategyIsCapturableOrAcquiresAhead) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  Stream compute = Stream::create();
  for (const Augment a : {Augment::None, Augment::Light}) {
    for (const StrategyEntry* e : runnable(a)) {
      auto s = e->make();
      s->attach(mnist(), strategy_options(stream_run(e->name, a, 2)), compute);
      EXPECT_FALSE(s->epoch_capturable()) << e->name << " " << to_string(a);
      EXPECT_FALSE(s->acquire_ahead()) << e->name << " " << to_string(a);
      EXPECT_EQ(forms_of(s->launch_forms()), EpochFormSet{EpochForm::PerBatch})
          << e->name << " " << to_string(a) << ": " << forms_of(s->launch_forms()).to_string();
      EXPECT_EQ(e->launch_forms.in(Scenario::Stream), EpochFormSet{EpochForm::PerBatch}) << e->name;
    }
  }
}

// What the record gets: the producers' figures for host-produced batches (every sample of the
// epoch, one batch per slot fill, waits that add up), none for a GPU gather; the bytes each
// strategy moves.
TEST(Stream, ProducerFiguresAndBytes) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& d = mnist();
  const std::uint64_t n = static_cast<std::uint64_t>(d.n_train());
  const int batches = batch_count(d.n_train(), 256);
  for (const StrategyEntry* e : runnable(Augment::Light)) {
    const RunOutput o = train_run(stream_run(e->name, Augment::Light, 2, 4));
    for (const EpochResult& r : o.epochs) {
      ASSERT_TRUE(r.strategy.producer.has_value()) << e->name;
      const ProducerStats& p = *r.strategy.producer;
      EXPECT_EQ(p.workers, 2);
      EXPECT_EQ(p.slots, 4);
      EXPECT_EQ(p.samples, d.n_train()) << e->name;
      EXPECT_EQ(p.batches, batches) << e->name;
      EXPECT_GE(p.consumer_wait_ms, p.first_wait_ms) << e->name;
      EXPECT_GE(p.first_wait_ms, 0.0);
      EXPECT_GT(p.busy_ms, 0.0);
      EXPECT_GT(p.samples_per_s(), 0.0);
      EXPECT_LE(p.consumer_wait_ms, r.wall_ms) << e->name;
    }
    const std::uint64_t moved = o.epochs[1].strategy.h2d_bytes;
    if (e->name == "pageable" || e->name == "pinned" || e->name == "double-buffer")
      EXPECT_EQ(moved, n * (784 + 4)) << e->name;
    if (e->name == "zero-copy" || e->name == "um") EXPECT_EQ(moved, 0u) << e->name;
    if (e->name == "um-prefetch" || e->name == "um-advise") EXPECT_EQ(moved, n * (784 + 4)) << e->name;
    // One range per slot: a full batch's images region (the last batch is partial) and the
    // labels of its rows.
    if (e->name == "zero-copy-staged" || e->name == "um-prefetch-coarse")
      EXPECT_EQ(moved, static_cast<std::uint64_t>(batches) * 256 * 784 + n * 4) << e->name;
  }
  // The GPU gather has no host producer; it uploads the epoch's order (4 bytes a sample).
  for (const char* s : {"resident", "zero-copy"}) {
    const RunOutput g = train_run(stream_run(s, Augment::None, 2));
    for (const EpochResult& r : g.epochs) {
      EXPECT_FALSE(r.strategy.producer.has_value()) << s;
      EXPECT_EQ(r.strategy.h2d_bytes, n * 4) << s;
    }
  }
}
