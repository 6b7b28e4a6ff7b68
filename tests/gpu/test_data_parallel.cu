// test_data_parallel.cu: data-parallel training (--emulate-gpus N on one GPU, --gpus N on N).
//  - each shard's gradients come from the step --fused takes where it computes gradients apart
//    from its update: the single-launch step's gradients-only launch by default, the
//    layer-by-layer step with --fused off, where the batch is read in host memory (zero-copy) or
//    where --fused on would take the cuBLASLt step; the record says which and why;
//  - the emulation is a data path like any other: every strategy gives the same curve bitwise
//    (against resident with the same step), its steps replayed as graphs or enqueued, with no
//    allocation inside an epoch;
//  - it computes the gradient of the global batch's mean loss: its curve stays close to one GPU
//    training at batch N × --batch with the same step (same math, another fp32 summation order);
//  - --gpus 2 --reduce exact equals --emulate-gpus 2 bitwise, on every strategy of the registry
//    (each GPU's instance serving its shard on its own device), the GPUs together moving what
//    the emulation moves; with either step (resident and pinned also with --fused off);
//  - the peer-fanout forms (the set once on GPU 0, GPU 1 pulling its shard over peer access)
//    equal the emulation bitwise, GPU 1 copying exactly its shard's bytes per epoch from GPU 0
//    (each GPU's own figures in the epoch say so; the epoch's GPU time is the slowest GPU's),
//    and never wait on GPU 0's collective (the whole set, run after run);
//  - the host-shared forms (the set once in one page-locked host allocation, each GPU copying its
//    region) are pinned's and double-buffer-graph's data paths on one GPU and equal the
//    emulation bitwise on two;
//  - --gpus 2 --reduce ring is close to it and repeats itself bitwise;
//  - no allocation inside an epoch on any GPU;
//  - --gpus 1 is today's run, bit for bit (the command line's loss curve);
//  - the emulation runs --augment-device gpu (the host's curve) and --replicate K.
// The --gpus tests skip with a reason without two GPUs or without NCCL; they set
// NCCL_NVLS_ENABLE=0 for this process (the run refuses to start without it).
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "common/nccl_settings.h"
#include "common/peer_access.h"
#include "experiments/core/data_parallel_request.h"
#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample
#include "memory_strategies/peer_set.h"
#include "memory_strategies/replicated_set.h"
#include "tests/gpu/gpu_test_support.h"

namespace memstrat::testing {
namespace {

constexpr std::int64_t kSamples = 6000;  // 11 global batches of 512 and one of 368 (N = 2)

RunConfig dp_run(std::string_view strategy, int emulate, int gpus) {
  RunConfig c = short_run(strategy);
  c.train_samples = kSamples;
  c.emulate_gpus = emulate;
  c.gpus = gpus;
  return c;
}

const HostDataset& subset() { return mnist_first(kSamples); }

#define REQUIRE_GPUS(n)                                                                    \
  do {                                                                                     \
    MEMSTRAT_REQUIRE_GPU_AND_MNIST();                                                      \
    if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL";                              \
    int count_ = 0;                                                                        \
    if (cudaGetDeviceCount(&count_) != cudaSuccess || count_ < (n))                        \
      GTEST_SKIP() << "needs " << (n) << " GPUs, this machine shows " << count_;           \
    setenv("NCCL_NVLS_ENABLE", "0", 1);                                                    \
  } while (0)

// --fused on (the default) takes the single-launch step for every strategy but those whose
// batches are read in place from host memory (zero-copy), which take the layer-by-layer one, as
// on one GPU: each strategy is compared with resident on the step it ran.
TEST(DataParallel, EmulationIsBitwiseTheSameOnEveryStrategy) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  std::map<std::string, RunOutput> refs;  // resident's run per step
  refs.emplace("single-launch", train_run_on(subset(), dp_run("resident", 2, 1)));
  EXPECT_EQ(refs.at("single-launch").step, "single-launch");
  EXPECT_EQ(refs.at("single-launch").epoch_form, EpochForm::PerBatch);
  RunConfig off = dp_run("resident", 2, 1);
  off.fused = FusedMode::Off;
  refs.emplace("layer-by-layer", train_run_on(subset(), off));
  EXPECT_EQ(refs.at("layer-by-layer").step, "layer-by-layer");
  EXPECT_NE(first_difference(refs.at("single-launch"), refs.at("layer-by-layer")), "")
      << "the two steps sum in different orders: equal bits would mean one step ran twice";
  int single = 0;
  for (const StrategyEntry& e : strategy_registry()) {
    if (e.name == "resident") continue;
    SCOPED_TRACE(std::string(e.name));
    RunOutput got;
    try {
      got = train_run_on(subset(), dp_run(e.name, 2, 1));
    } catch (const DeviceUnavailable& w) {
      std::cout << "[  WAIVED  ] " << e.name << ": " << w.what() << "\n";
      continue;
    }
    EXPECT_EQ(got.step == "layer-by-layer", e.batch_in_host_memory) << got.step;
    single += got.step == "single-launch";
    const RunOutput& ref = refs.at(got.step);
    EXPECT_EQ(first_difference(got, ref), "");
    EXPECT_EQ(got.test.loss, ref.test.loss);
  }
  EXPECT_GE(single, 1) << "pinned runs the single-launch step on any GPU";
}

// Which step a data-parallel run took and why the faster ones did not, in its record: the
// single-launch step by default and with --fused single; the layer-by-layer step with --fused
// off ("off in the configuration"), for zero-copy (its batch is read in host memory, as on one
// GPU) and where --fused on would take the cuBLASLt step (batch × hidden past the single-launch
// rule), whose record says that step cannot stop before the update (kDataParallelStepReason).
TEST(DataParallel, TheRecordSaysWhichStepRanAndWhy) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const auto record = [](RunConfig c) {
    c.epochs = 1;
    RunRecord rec;
    train_run_on(subset(), c, &rec);
    return *rec.step;
  };
  for (const FusedMode f : {FusedMode::On, FusedMode::Single}) {
    RunConfig c = dp_run("resident", 2, 1);
    c.fused = f;
    const StepRecord s = record(c);
    EXPECT_EQ(s.step, "single-launch") << to_string(f);
    EXPECT_TRUE(s.fused);
    EXPECT_FALSE(s.single_launch_off_reason.has_value()) << *s.single_launch_off_reason;
    EXPECT_FALSE(s.fused_off_reason.has_value()) << *s.fused_off_reason;
  }
  RunConfig off = dp_run("resident", 2, 1);
  off.fused = FusedMode::Off;
  const StepRecord o = record(off);
  EXPECT_EQ(o.step, "layer-by-layer");
  EXPECT_FALSE(o.fused);
  EXPECT_EQ(o.single_launch_off_reason.value_or(""), "off in the configuration");
  EXPECT_EQ(o.fused_off_reason.value_or(""), "off in the configuration");
  const StepRecord z = record(dp_run("zero-copy", 2, 1));
  EXPECT_EQ(z.step, "layer-by-layer");
  EXPECT_NE(z.fused_off_reason.value_or("").find("mapped host memory"), std::string::npos)
      << z.fused_off_reason.value_or("(none)");
  RunConfig wide = dp_run("resident", 2, 1);
  wide.batch = 512;
  wide.hidden = {1024};  // 512 × 1024 > kSingleLaunchMaxWork: --fused on takes cuBLASLt
  const StepRecord w = record(wide);
  EXPECT_EQ(w.step, "layer-by-layer");
  EXPECT_FALSE(w.fused);
  EXPECT_NE(w.single_launch_off_reason.value_or("").find("cuBLASLt is faster"), std::string::npos)
      << w.single_launch_off_reason.value_or("(none)");
  EXPECT_EQ(w.fused_off_reason.value_or(""), kDataParallelStepReason);
}

// --graphs on (the default) replays each shard turn's gradients and each global batch's reduction
// and update as graphs captured in epoch 1; --graphs off enqueues them: the same kernels, so the
// same bits, on a strategy whose views stay put (resident) and on one whose slots rotate, with
// either step. Nothing is allocated inside an epoch (the gradient buffers exist from set-up).
TEST(DataParallel, EmulationReplaysGraphsBitForBit) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const FusedMode f : {FusedMode::On, FusedMode::Off})
    for (const char* s : {"resident", "double-buffer"}) {
      SCOPED_TRACE(std::string(s) + " --fused " + std::string(to_string(f)));
      RunConfig on = dp_run(s, 2, 1);
      on.epochs = 3;
      on.fused = f;
      on.profile = true;  // counts the allocations per epoch
      RunConfig off = on;
      off.graphs = Graphs::Off;
      RunRecord rec;
      const RunOutput replayed = train_run_on(subset(), on, &rec);
      EXPECT_EQ(replayed.step, f == FusedMode::On ? "single-launch" : "layer-by-layer");
      EXPECT_EQ(first_difference(replayed, train_run_on(subset(), off)), "");
      for (const EpochRecord& e : rec.epochs)
        if (e.counters.api_available)
          for (const char* fn :
               {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged"})
            EXPECT_EQ(e.counters.api.count(fn), 0u) << fn << " in epoch " << e.train.epoch;
    }
}

TEST(DataParallel, EmulationFollowsOneGpuAtTheGlobalBatch) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  // The gradient of the mean over 512 rows, computed as two halves each scaled by 1/512 and
  // summed, against the step on all 512 rows with the same step: equal up to fp32 summation
  // order (the single-launch step splits its sums by row count: 512 rows take its tall tiles).
  for (const FusedMode f : {FusedMode::On, FusedMode::Off}) {
    SCOPED_TRACE("--fused " + std::string(to_string(f)));
    RunConfig one = short_run("resident");
    one.train_samples = kSamples;
    one.batch = 512;
    one.fused = f;
    RunConfig two = dp_run("resident", 2, 1);
    two.fused = f;
    const RunOutput whole = train_run_on(subset(), one);
    const RunOutput halves = train_run_on(subset(), two);
    ASSERT_EQ(whole.step, halves.step);
    ASSERT_EQ(whole.sample_loss.size(), halves.sample_loss.size());
    for (std::size_t e = 0; e < whole.sample_loss.size(); ++e)
      for (std::size_t i = 0; i < whole.sample_loss[e].size(); ++i)
        ASSERT_NEAR(halves.sample_loss[e][i], whole.sample_loss[e][i],
                    1e-3 + 1e-3 * std::abs(whole.sample_loss[e][i]))
            << "epoch " << e + 1 << " sample " << i;
    EXPECT_NE(first_difference(whole, halves), "") << "the orders differ; bitwise equality would "
                                                      "mean the emulation did not split the batch";
  }
}

// The emulation drives one strategy on one GPU as a single-GPU run does, so --augment-device gpu
// and --replicate run under it: the GPU's augmentation gives the host's curve bitwise (resident
// in refresh; resident in stream against pinned's host workers), and on a replicated set every
// strategy serves the shards alike (resident and pinned bitwise, every copy trained).
TEST(DataParallel, EmulationRunsGpuAugmentationAndReplicatedSets) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig host = dp_run("resident", 2, 1);
  host.scenario = Scenario::Refresh;
  RunConfig gpu = host;
  gpu.augment_device = AugmentDevice::Gpu;
  const RunOutput refresh_host = train_run_on(subset(), host);
  EXPECT_EQ(first_difference(train_run_on(subset(), gpu), refresh_host), "");
  gpu.seed = 2;  // the curve depends on the augmentation: the comparison can fail
  EXPECT_NE(first_difference(train_run_on(subset(), gpu), refresh_host), "");

  RunConfig stream_host = dp_run("pinned", 2, 1);
  stream_host.scenario = Scenario::Stream;
  stream_host.augment = Augment::Light;
  stream_host.workers = 2;
  RunConfig stream_gpu = stream_host;
  stream_gpu.strategy = find_strategy("resident");
  stream_gpu.augment_device = AugmentDevice::Gpu;
  EXPECT_EQ(first_difference(train_run_on(subset(), stream_gpu), train_run_on(subset(), stream_host)),
            "");

  HostDataset twice = subset();
  replicate_training_set(twice, 2, dp_run("resident", 2, 1).seed);
  const RunOutput resident = train_run_on(twice, dp_run("resident", 2, 1));
  ASSERT_FALSE(resident.sample_loss.empty());
  EXPECT_EQ(resident.sample_loss.front().size(), 2u * kSamples);
  EXPECT_EQ(first_difference(train_run_on(twice, dp_run("pinned", 2, 1)), resident), "");
}

// Both steps: the single-launch step's gradients-only launch (--fused on) and the layer-by-layer
// step (--fused off).
TEST(DataParallel, TwoGpusExactEqualTheEmulationBitwise) {
  REQUIRE_GPUS(2);
  for (const FusedMode f : {FusedMode::On, FusedMode::Off}) {
    for (const char* s : {"resident", "pinned"}) {
      SCOPED_TRACE(std::string(s) + " --fused " + std::string(to_string(f)));
      RunRecord rec;
      RunConfig two = dp_run(s, 1, 2);
      two.reduce = Reduce::Exact;
      two.profile = true;  // counts every GPU's allocations per epoch
      two.fused = f;
      RunConfig emu = dp_run(s, 2, 1);
      emu.fused = f;
      const RunOutput got = train_run_on(subset(), two, &rec);
      const RunOutput ref = train_run_on(subset(), emu);
      EXPECT_EQ(got.step, f == FusedMode::On ? "single-launch" : "layer-by-layer");
      EXPECT_EQ(ref.step, got.step);
      EXPECT_EQ(first_difference(got, ref), "");
      EXPECT_EQ(got.test.loss, ref.test.loss);
      ASSERT_TRUE(rec.env.nccl.has_value());
      EXPECT_EQ(rec.env.nccl->settings.at("NCCL_NVLS_ENABLE"), "0");
      EXPECT_EQ(rec.env.nccl->version, nccl_version());
      for (const EpochRecord& e : rec.epochs)
        if (e.counters.api_available)
          for (const char* fn :
               {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged"})
            EXPECT_EQ(e.counters.api.count(fn), 0u) << fn << " in epoch " << e.train.epoch;
    }
  }
}

// Each GPU's strategy serves its shard as its own epoch, created and driven with its own GPU
// current: the copy rings, prefetches, chunks, mapped and managed memory of every strategy give
// the emulation's curve bitwise. Explicit copies and prefetches are counted per GPU and summed:
// the GPUs together move the epoch's bytes once, as the one-GPU emulation does (no GPU moves
// another's shard). No allocation inside an epoch on either GPU.
TEST(DataParallel, TwoGpusExactEqualTheEmulationBitwiseOnEveryStrategy) {
  REQUIRE_GPUS(2);
  int ran = 0;
  for (const StrategyEntry& e : strategy_registry()) {
    SCOPED_TRACE(std::string(e.name));
    ASSERT_TRUE(runs_on_several_gpus(e.name));
    RunRecord rec, ref_rec;
    RunConfig two = dp_run(e.name, 1, 2);
    two.reduce = Reduce::Exact;
    two.profile = true;  // counts every GPU's allocations per epoch
    RunOutput got, ref;
    try {
      got = train_run_on(subset(), two, &rec);
    } catch (const DeviceUnavailable& w) {
      std::cout << "[  WAIVED  ] " << e.name << ": " << w.what() << "\n";
      continue;
    }
    ref = train_run_on(subset(), dp_run(e.name, 2, 1), &ref_rec);
    ++ran;
    EXPECT_EQ(first_difference(got, ref), "");
    EXPECT_EQ(got.test.loss, ref.test.loss);
    ASSERT_EQ(got.epochs.size(), ref.epochs.size());
    // Copies between GPUs are no host->device bytes (peer_bytes: the peer-fanout forms only, and
    // only where there is another GPU to pull from).
    const bool peer = e.name.rfind("peer-fanout", 0) == 0;
    for (std::size_t i = 0; i < got.epochs.size(); ++i) {
      EXPECT_EQ(got.epochs[i].strategy.h2d_bytes, ref.epochs[i].strategy.h2d_bytes)
          << "epoch " << i + 1;
      EXPECT_EQ(ref.epochs[i].strategy.peer_bytes, 0u) << "epoch " << i + 1;
      if (!peer) EXPECT_EQ(got.epochs[i].strategy.peer_bytes, 0u) << "epoch " << i + 1;
    }
    for (const EpochRecord& er : rec.epochs)
      if (er.counters.api_available)
        for (const char* fn : {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged"})
          EXPECT_EQ(er.counters.api.count(fn), 0u) << fn << " in epoch " << er.train.epoch;
  }
  EXPECT_GE(ran, 2) << "resident and pinned run on any GPU";
}

// The refresh and stream scenarios on two GPUs: every epoch each GPU's strategy rewrites its
// shard of the epoch (refresh), or its own host workers produce its shard's batches (stream,
// heavy augmentation), reshuffled and augmented as the whole epoch is (EpochRows::whole_row), so
// the curve is the emulation's bitwise for every strategy that runs the scenario there (the
// peer-fanout forms write their set once: static only; resident's stream gathers on the GPU),
// and the GPUs together move the emulation's bytes and produce its batches.
TEST(DataParallel, TwoGpusRefreshAndStreamEqualTheEmulationBitwiseOnEveryStrategy) {
  REQUIRE_GPUS(2);
  int ran = 0;
  for (const Scenario scenario : {Scenario::Refresh, Scenario::Stream})
  for (const StrategyEntry& e : strategy_registry()) {
    SCOPED_TRACE(std::string(e.name) + " " + std::string(to_string(scenario)));
    const std::vector<Scenario> sc = several_gpu_scenarios(e.name);
    if (std::find(sc.begin(), sc.end(), scenario) == sc.end()) continue;
    RunConfig two = dp_run(e.name, 1, 2), one = dp_run(e.name, 2, 1);
    two.scenario = one.scenario = scenario;
    if (scenario == Scenario::Stream) {  // the workers' affine warp, two of them per GPU
      two.augment = one.augment = Augment::Heavy;
      two.workers = one.workers = 2;
    }
    two.epochs = one.epochs = 3;  // three reshuffles and augmentations
    two.reduce = Reduce::Exact;
    RunOutput got, ref;
    try {
      got = train_run_on(subset(), two);
    } catch (const DeviceUnavailable& w) {
      std::cout << "[  WAIVED  ] " << e.name << ": " << w.what() << "\n";
      continue;
    }
    ref = train_run_on(subset(), one);
    ++ran;
    EXPECT_EQ(first_difference(got, ref), "");
    EXPECT_EQ(got.test.loss, ref.test.loss);
    ASSERT_EQ(got.epochs.size(), ref.epochs.size());
    for (std::size_t i = 0; i < got.epochs.size(); ++i) {
      EXPECT_EQ(got.epochs[i].strategy.h2d_bytes, ref.epochs[i].strategy.h2d_bytes)
          << "epoch " << i + 1;
      const auto& gp = got.epochs[i].strategy.producer;
      const auto& rp = ref.epochs[i].strategy.producer;
      ASSERT_EQ(gp.has_value(), scenario == Scenario::Stream) << "epoch " << i + 1;
      ASSERT_EQ(rp.has_value(), gp.has_value());
      if (gp) {  // every GPU's producers together made the epoch's batches, once each
        EXPECT_EQ(gp->samples, rp->samples) << "epoch " << i + 1;
        EXPECT_EQ(gp->batches, rp->batches) << "epoch " << i + 1;
        EXPECT_EQ(gp->workers, 2 * rp->workers) << "two GPUs, each its own workers";
      }
    }
  }
  EXPECT_GE(ran, 4) << "pinned in both scenarios and resident in refresh run on any GPU";
}

// The peer-fanout forms hold the set once, on GPU 0; GPU 1 pulls the batches of its shard from
// there (one SM read per batch on its compute stream, or one peer copy per chunk on copy streams, K
// slots). Both give the emulation's curve bitwise (the emulation: resident's data path, the set
// read in place); GPU 1 copies exactly its shard's packed blocks every epoch (GPU 0 copies
// nothing: it reads in place), with its copies timed; nothing moves host->device in an epoch (the
// set went up once, at set-up); no allocation in any epoch. Several chunk sizes and depths, so
// that the ring's slot reuse and a last partial chunk are exercised.
TEST(DataParallel, TwoGpusPeerFanoutEqualTheEmulationAndPullOnlyTheOtherShard) {
  REQUIRE_GPUS(2);
  if (!PeerAccess::possible(1, 0))
    GTEST_SKIP() << "GPU 1 cannot access GPU 0's memory (cudaDeviceCanAccessPeer = 0): the "
                    "peer-fanout forms are waived on this machine";
  struct Case {
    const char* strategy;
    int depth, copy_chunk_mib, copy_streams;
  };
  const RunConfig base = dp_run("peer-fanout", 1, 2);
  // Rank 1's shard of the epoch, packed: what GPU 1 pulls each epoch.
  const BatchGeometry g{kSamples, base.batch, transfer_bytes_per_sample(784, base.transfer)};
  const std::uint64_t shard1 = PackedLayout{PeerSet::shard_geometry(g, 1, 2)}.epoch_bytes();
  ASSERT_GT(shard1, 0u);
  for (const Case& k : {Case{"peer-fanout", 2, 8, 1}, Case{"peer-fanout-ring", 2, 8, 1},
                        Case{"peer-fanout-ring", 3, 1, 2}}) {
    SCOPED_TRACE(std::string(k.strategy) + " depth " + std::to_string(k.depth) + ", chunk " +
                 std::to_string(k.copy_chunk_mib) + " MiB, " + std::to_string(k.copy_streams) +
                 " copy streams");
    RunConfig two = dp_run(k.strategy, 1, 2);
    two.reduce = Reduce::Exact;
    two.profile = true;
    two.depth = k.depth;
    two.copy_chunk_mib = k.copy_chunk_mib;
    two.copy_streams = k.copy_streams;
    RunConfig emu = dp_run(k.strategy, 2, 1);
    emu.profile = true;  // profiled: the reduction is timed
    emu.depth = k.depth;
    emu.copy_chunk_mib = k.copy_chunk_mib;
    emu.copy_streams = k.copy_streams;
    RunRecord rec;
    const RunOutput got = train_run_on(subset(), two, &rec);
    const RunOutput ref = train_run_on(subset(), emu);
    const RunOutput resident = train_run_on(subset(), dp_run("resident", 2, 1));
    EXPECT_EQ(first_difference(got, ref), "");
    EXPECT_EQ(first_difference(ref, resident), "") << "one GPU: resident's data path";
    EXPECT_EQ(got.test.loss, ref.test.loss);
    ASSERT_EQ(got.epochs.size(), ref.epochs.size());
    for (std::size_t i = 0; i < got.epochs.size(); ++i) {
      SCOPED_TRACE("epoch " + std::to_string(i + 1));
      EXPECT_EQ(got.epochs[i].strategy.peer_bytes, shard1);
      EXPECT_EQ(got.epochs[i].strategy.h2d_bytes, 0u);
      EXPECT_TRUE(got.epochs[i].strategy.copy_ms.has_value()) << "GPU 1's copies are timed";
      EXPECT_EQ(ref.epochs[i].strategy.peer_bytes, 0u);
      EXPECT_FALSE(ref.epochs[i].strategy.copy_ms.has_value()) << "read in place: no copy";
      // Each GPU's own figures: GPU 0 reads its set in place, GPU 1 pulls the other shard; the
      // epoch's GPU time is the slowest GPU's. The emulation (one GPU) has none.
      const std::vector<RankTimes>& ranks = got.epochs[i].ranks;
      ASSERT_EQ(ranks.size(), 2u);
      EXPECT_EQ(ranks[0].rank, 0);
      EXPECT_EQ(ranks[1].rank, 1);
      EXPECT_EQ(ranks[0].peer_bytes, 0u);
      EXPECT_FALSE(ranks[0].copy_ms.has_value());
      EXPECT_EQ(ranks[1].peer_bytes, shard1);
      EXPECT_TRUE(ranks[1].copy_ms.has_value());
      EXPECT_EQ(std::max(ranks[0].gpu_ms, ranks[1].gpu_ms), got.epochs[i].gpu_ms);
      for (const RankTimes& rt : ranks) {
        EXPECT_GT(rt.gpu_ms, 0.0);
        EXPECT_GE(rt.stall_ms, 0.0);
        EXPECT_GE(rt.idle_ms, 0.0);
        // the gradients' combination (an all-gather here) takes time, within the steps' time
        ASSERT_TRUE(rt.reduce_ms.has_value()) << "profiled: the reduction timed";
        EXPECT_GT(*rt.reduce_ms, 0.0);
        EXPECT_LT(*rt.reduce_ms, rt.compute_ms);
      }
      const RankTimes& slowest = ranks[0].gpu_ms >= ranks[1].gpu_ms ? ranks[0] : ranks[1];
      ASSERT_TRUE(got.epochs[i].reduce_ms.has_value());
      EXPECT_EQ(*got.epochs[i].reduce_ms, slowest.reduce_ms);
      EXPECT_TRUE(ref.epochs[i].ranks.empty());
      // the emulation sums the shards in rank order on its one GPU: timed too
      ASSERT_TRUE(ref.epochs[i].reduce_ms.has_value());
      EXPECT_GT(*ref.epochs[i].reduce_ms, 0.0);
      EXPECT_LT(*ref.epochs[i].reduce_ms, ref.epochs[i].compute_ms);
    }
    for (const EpochRecord& er : rec.epochs)
      if (er.counters.api_available)
        for (const char* fn : {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged"})
          EXPECT_EQ(er.counters.api.count(fn), 0u) << fn << " in epoch " << er.train.epoch;
  }
}

// The whole training set, run after run: GPU 1's first pulls of an epoch go out while GPU 0 may
// already spin in the step's collective, waiting for GPU 1. A pull that depended on GPU 0's work
// would never finish (a copy-engine copy of rank 0's memory on GPU 1's compute stream, ahead of
// the collective, did so in most runs of the first epoch on two H100s), and this test would then
// not end: ctest's time limit fails it. Each form runs from set-up to its second epoch 6 times.
TEST(DataParallel, TwoGpusPeerFanoutNeverWaitOnTheOtherGpusCollective) {
  REQUIRE_GPUS(2);
  if (!PeerAccess::possible(1, 0))
    GTEST_SKIP() << "GPU 1 cannot access GPU 0's memory (cudaDeviceCanAccessPeer = 0): the "
                    "peer-fanout forms are waived on this machine";
  for (const char* strategy : {"peer-fanout", "peer-fanout-ring"})
    for (int run = 0; run < 6; ++run) {
      SCOPED_TRACE(std::string(strategy) + " run " + std::to_string(run + 1));
      RunConfig two = dp_run(strategy, 1, 2);
      two.train_samples = 0;  // the whole set
      const RunOutput got = train_run(two);
      ASSERT_EQ(got.epochs.size(), 2u);
      EXPECT_GT(got.epochs[1].strategy.peer_bytes, 0u);
    }
}

// The host-shared forms: one page-locked host allocation for the whole set, each GPU's shard a
// region of it. On one GPU (and in the emulation) they are the data path they name as one_gpu_as
// (pinned's, double-buffer-graph's): the same curve bitwise and the same bytes. Several chunk
// sizes and depths, so that the ring's slot reuse and a last partial chunk are exercised.
struct SharedCase {
  const char* strategy;
  const char* one_gpu_as;
  int depth, copy_chunk_mib, copy_streams;
};
constexpr SharedCase kSharedCases[] = {{"host-shared", "pinned", 2, 8, 1},
                                       {"host-shared-ring", "double-buffer-graph", 2, 8, 1},
                                       {"host-shared-ring", "double-buffer-graph", 3, 1, 2}};

RunConfig with_ring(RunConfig c, const SharedCase& k) {
  c.depth = k.depth;
  c.copy_chunk_mib = k.copy_chunk_mib;
  c.copy_streams = k.copy_streams;
  return c;
}

TEST(DataParallel, HostSharedFormsAreTheirOneGpuDataPathOnOneGpu) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const SharedCase& k : kSharedCases) {
    SCOPED_TRACE(std::string(k.strategy) + " depth " + std::to_string(k.depth) + ", chunk " +
                 std::to_string(k.copy_chunk_mib) + " MiB, " + std::to_string(k.copy_streams) +
                 " copy streams");
    ASSERT_EQ(find_strategy(k.strategy)->one_gpu_as, k.one_gpu_as);
    for (const int emulate : {1, 2}) {
      const RunOutput got = train_run_on(subset(), with_ring(dp_run(k.strategy, emulate, 1), k));
      const RunOutput ref = train_run_on(subset(), with_ring(dp_run(k.one_gpu_as, emulate, 1), k));
      EXPECT_EQ(first_difference(got, ref), "") << "emulate " << emulate;
      ASSERT_EQ(got.epochs.size(), ref.epochs.size());
      for (std::size_t i = 0; i < got.epochs.size(); ++i) {
        EXPECT_EQ(got.epochs[i].strategy.h2d_bytes, ref.epochs[i].strategy.h2d_bytes);
        EXPECT_GT(got.epochs[i].strategy.h2d_bytes, 0u);
        EXPECT_TRUE(got.epochs[i].strategy.copy_ms.has_value()) << "its copies are timed";
      }
    }
  }
}

// On two GPUs both ranks copy from their regions of the one set: the emulation's curve bitwise,
// the emulation's host->device bytes between them, nothing between the GPUs, and no allocation in
// any epoch (the set and the slots are made at set-up).
TEST(DataParallel, TwoGpusHostSharedEqualTheEmulation) {
  REQUIRE_GPUS(2);
  for (const SharedCase& k : kSharedCases) {
    SCOPED_TRACE(std::string(k.strategy) + " depth " + std::to_string(k.depth) + ", chunk " +
                 std::to_string(k.copy_chunk_mib) + " MiB, " + std::to_string(k.copy_streams) +
                 " copy streams");
    RunConfig two = with_ring(dp_run(k.strategy, 1, 2), k);
    two.reduce = Reduce::Exact;
    two.profile = true;
    RunRecord rec;
    const RunOutput got = train_run_on(subset(), two, &rec);
    const RunOutput ref = train_run_on(subset(), with_ring(dp_run(k.strategy, 2, 1), k));
    EXPECT_EQ(first_difference(got, ref), "");
    EXPECT_EQ(got.test.loss, ref.test.loss);
    ASSERT_EQ(got.epochs.size(), ref.epochs.size());
    for (std::size_t i = 0; i < got.epochs.size(); ++i) {
      SCOPED_TRACE("epoch " + std::to_string(i + 1));
      EXPECT_EQ(got.epochs[i].strategy.h2d_bytes, ref.epochs[i].strategy.h2d_bytes);
      EXPECT_EQ(got.epochs[i].strategy.peer_bytes, 0u);
    }
    for (const EpochRecord& er : rec.epochs)
      if (er.counters.api_available)
        for (const char* fn : {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged"})
          EXPECT_EQ(er.counters.api.count(fn), 0u) << fn << " in epoch " << er.train.epoch;
  }
}

TEST(DataParallel, TwoGpusRingIsCloseAndRepeatsItself) {
  REQUIRE_GPUS(2);
  RunConfig ring = dp_run("resident", 1, 2);
  ring.reduce = Reduce::Ring;
  ring.profile = true;  // profiled: the reduction is timed
  const RunOutput a = train_run_on(subset(), ring);
  // unprofiled: the same numbers, and the reduction not timed on its own (its events would slow
  // the step), on no GPU
  RunConfig unprofiled = ring;
  unprofiled.profile = false;
  const RunOutput b = train_run_on(subset(), unprofiled);
  EXPECT_EQ(first_difference(a, b), "");
  for (std::size_t e = 0; e < a.epochs.size(); ++e) {
    EXPECT_TRUE(a.epochs[e].reduce_ms.has_value());
    EXPECT_FALSE(b.epochs[e].reduce_ms.has_value());
    for (const RankTimes& rt : b.epochs[e].ranks) EXPECT_FALSE(rt.reduce_ms.has_value());
  }
  const RunOutput exact = train_run_on(subset(), dp_run("resident", 2, 1));
  for (std::size_t e = 0; e < a.sample_loss.size(); ++e)
    for (std::size_t i = 0; i < a.sample_loss[e].size(); ++i)
      ASSERT_NEAR(a.sample_loss[e][i], exact.sample_loss[e][i],
                  1e-3 + 1e-3 * std::abs(exact.sample_loss[e][i]))
          << "epoch " << e + 1 << " sample " << i;
}

TEST(DataParallel, MoreGpusThanTheMachineShowsIsAUsageError) {
  REQUIRE_GPUS(1);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count >= kMaxShards) GTEST_SKIP() << "this machine shows " << count << " GPUs";
  RunConfig c = dp_run("resident", 1, count + 1);
  std::ostringstream out, err;
  EXPECT_THROW(Session(c, subset()).run(out, err), std::invalid_argument);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DataParallel, OneGpuIsTodaysRunBitForBit) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const std::string dir = ::testing::TempDir();
  const std::string base = std::string(MEMSTRAT_BINARY) + " train --epochs 2 --no-profile -q " +
                           "--train-samples 6000 --data " + mnist_dir() + " --loss-curve ";
  ASSERT_EQ(std::system((base + dir + "/default.csv").c_str()), 0);
  ASSERT_EQ(std::system((base + dir + "/gpus1.csv --gpus 1").c_str()), 0);
  const std::string a = read_file(dir + "/default.csv"), b = read_file(dir + "/gpus1.csv");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace memstrat::testing
