// test_launch_forms.cu: the launch form as an axis of its own (--launch-form). For every strategy
// and every form the registry declares for it (StrategyEntry::launch_forms):
//  - attached, the strategy allows exactly the declared forms (launch_forms()), in static and
//    refresh, u8 and f32, and the form it takes by itself (auto) is one of them;
//  - asked for by name, that form runs (config.epoch_form == config.launch_form), and it is the
//    same training as resident enqueued batch by batch, bit for bit (same seed, the single-launch
//    step everywhere), static and refresh, u8 and f32, with a ragged last batch; no epoch calls an
//    allocator; an epoch makes the launches of its form (one step launch per epoch, one per
//    --copy-chunk chunk, one graph launch, one step graph per batch); and the strategy's figures
//    (h2d_bytes, whether copy_ms is known) are those of its per-batch run, also after a graph
//    replay;
//  - the graph form holds the cuBLASLt and layer-by-layer steps too;
//  - a form the strategy, scenario or step cannot run is refused before any device work
//    (Session: std::invalid_argument, the CLI's exit 2), and the Trainer itself refuses a form the
//    attached strategy does not allow, never running another.
#include <optional>

#include "experiments/core/mlp.h"
#include "experiments/core/trainer.h"
#include "gpu_test_support.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

const char* const kAllocators[] = {
    "cudaMalloc",        "cudaMallocAsync", "cudaMallocHost",          "cudaHostAlloc",
    "cudaMallocManaged", "cudaMallocPitch", "cudaMallocFromPoolAsync", "cudaMalloc3D",
    "cudaMallocArray"};

// 12000 = 46·256 + 224: a ragged last batch. 2 MiB chunks: u8 10 batches of 256 (201728 B), f32
// 2 (803840 B a block), so kernel-per-chunk makes several launches of several batches each.
constexpr std::int64_t kTrainSamples = 12000;
constexpr int kChunkMib = 2;

/// The first 12000 MNIST training samples and 1000 test samples.
const HostDataset& small_mnist() {
  static const HostDataset d = [] {
    HostDataset x = mnist();
    truncate_dataset(x, kTrainSamples, 1000);
    return x;
  }();
  return d;
}

/// The --launch-form value that names form `f`.
LaunchForm asking_for(EpochForm f) {
  for (const LaunchForm l :
       {LaunchForm::PerBatch, LaunchForm::Graph, LaunchForm::ChunkKernels, LaunchForm::Kernel})
    if (asked_form(l) == f) return l;
  throw std::logic_error("no --launch-form names " + std::string(to_string(f)));
}

/// The registry's strategies this device runs (a waived one is said so).
std::vector<const StrategyEntry*> runnable_here() {
  const DeviceCaps caps = DeviceCaps::query(0);
  std::vector<const StrategyEntry*> r;
  for (const StrategyEntry& e : strategy_registry()) {
    if (const std::string why = e.unsupported(caps); !why.empty()) {
      std::cout << "[ WAIVED ] " << e.name << ": " << why << "\n";
      continue;
    }
    r.push_back(&e);
  }
  return r;
}

/// Batches per epoch and launches of the kernel-per-chunk form: the chunks of kChunkMib MiB
/// ChunkPlan::packed cuts (a strategy's own chunks and the trainer's cut follow the same rule).
int chunk_launches(const HostDataset& d, int batch, Transfer t) {
  const BatchGeometry g{d.n_train(), batch, transfer_bytes_per_sample(d.features(), t)};
  return ChunkPlan::packed(g, static_cast<std::size_t>(kChunkMib) << 20).chunks();
}

struct Combo {
  Transfer transfer;
  Scenario scenario;
};
std::string combo_name(const ::testing::TestParamInfo<Combo>& i) {
  return std::string(to_string(i.param.transfer)) + "_" + std::string(to_string(i.param.scenario));
}
class EveryDeclaredForm : public ::testing::TestWithParam<Combo> {};

}  // namespace

TEST(LaunchForms, AttachedStrategiesAllowWhatTheRegistryDeclares) {
  MEMSTRAT_REQUIRE_GPU();
  const HostDataset data = synthetic_dataset(3001);
  for (const StrategyEntry* e : runnable_here())
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh})
      for (const Transfer t : {Transfer::U8, Transfer::F32}) {
        const std::string what = std::string(e->name) + " " + std::string(to_string(sc)) + " " +
                                 std::string(to_string(t));
        StrategyOptions so;
        so.scenario = sc;
        so.transfer = t;
        // A scenario the strategy never runs declares no form (the peer-fanout forms: static only).
        if (!refusal_reason(*e, so).empty()) {
          EXPECT_TRUE(e->launch_forms.in(sc).empty()) << what;
          continue;
        }
        Stream compute = Stream::create();
        auto st = e->make();
        st->attach(data, so, compute);
        const LaunchForms allowed = st->launch_forms();
        EXPECT_EQ(forms_of(allowed), e->launch_forms.in(sc))
            << what << ": allows " << forms_of(allowed).to_string() << ", declares "
            << e->launch_forms.in(sc).to_string();
        // What it takes by itself (auto) is among what it allows, under the same contracts.
        const LaunchForms own{st->acquire_ahead(), st->launch_group(), st->epoch_capturable()};
        for (const EpochForm f : kEpochForms)
          if (own.allows(f)) {
            EXPECT_TRUE(allowed.allows(f)) << what << ": " << to_string(f);
          }
        if (own.launch_group > 0) {
          EXPECT_EQ(allowed.launch_group, own.launch_group) << what;
        }
      }
}

TEST_P(EveryDeclaredForm, IsBitwiseTheTrainingOfResidentPerBatch) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& data = small_mnist();
  const auto [t, sc] = GetParam();
  RunConfig base = short_run();
  base.transfer = t;
  base.scenario = sc;
  base.epochs = 3;                 // the graph form: captured in epoch 1, replayed twice
  base.fused = FusedMode::Single;  // the one step every form runs
  base.copy_chunk_mib = kChunkMib;
  RunConfig rc = base;
  rc.launch_form = LaunchForm::PerBatch;
  const RunOutput ref = train_run_on(data, rc);
  ASSERT_EQ(ref.step, "single-launch");
  ASSERT_EQ(ref.epoch_form, EpochForm::PerBatch);
  const int batches = batch_count(data.n_train(), base.batch);
  const int chunks = chunk_launches(data, base.batch, t);
  ASSERT_GT(chunks, 1);
  ASSERT_LT(chunks, batches);
  base.profile = true;  // the API-call counts of every epoch
  int tested = 0;
  for (const StrategyEntry* e : runnable_here()) {
    std::optional<RunOutput> per_batch;  // this strategy's own; kEpochForms lists per-batch first
    for (const EpochForm f : e->launch_forms.in(sc).forms()) {
      const std::string what = std::string(e->name) + " --launch-form " +
                               std::string(to_string(f)) + " " + std::string(to_string(sc)) + " " +
                               std::string(to_string(t));
      SCOPED_TRACE(what);
      RunConfig c = base;
      c.strategy = e;
      c.launch_form = asking_for(f);
      RunRecord rec;
      const RunOutput got = train_run_on(data, c, &rec);
      ++tested;
      const nlohmann::json cfg = rec.to_json()["config"];
      EXPECT_EQ(cfg["launch_form"], std::string(to_string(f)));
      EXPECT_EQ(cfg["epoch_form"], std::string(to_string(f)));
      EXPECT_EQ(got.epoch_form, f);
      EXPECT_EQ(got.epoch_launch, f != EpochForm::PerBatch);
      EXPECT_EQ(cfg["epoch_launch_off_reason"].is_null(), f != EpochForm::PerBatch);
      EXPECT_EQ(cfg["copy_chunk_mib"].is_null(), !reads_copy_chunk(c));
      ASSERT_EQ(got.step, "single-launch");
      ASSERT_EQ(got.sample_loss.size(), 3u);
      EXPECT_EQ(first_difference(ref, got), "");
      EXPECT_EQ(got.test.acc, ref.test.acc);
      EXPECT_EQ(got.test.loss, ref.test.loss);
      for (std::size_t i = 0; i < rec.epochs.size(); ++i) {
        const WindowCounters& w = rec.epochs[i].counters;
        const std::string ep = "epoch " + std::to_string(i + 1);
        EXPECT_GT(got.epochs[i].gpu_ms, 0.0) << ep;
        EXPECT_GT(got.epochs[i].compute_ms, 0.0) << ep;
        if (!w.api_available) continue;  // CUPTI callbacks unavailable: no counts
        for (const char* fn : kAllocators) EXPECT_EQ(w.api.count(fn), 0u) << ep << ": " << fn;
        EXPECT_EQ(w.api.count("cudaFree"), 0u) << ep;
        // The launches of the form (the single-launch step is a cudaLaunchKernelExC launch).
        const std::uint64_t step_launches = w.api.count("cudaLaunchKernelExC");
        switch (f) {
          case EpochForm::Kernel:
            EXPECT_EQ(step_launches, 1u) << ep;
            EXPECT_EQ(w.api.count("cudaGraphLaunch"), 0u) << ep;
            break;
          case EpochForm::ChunkKernels:
            EXPECT_EQ(step_launches, static_cast<std::uint64_t>(chunks)) << ep;
            EXPECT_EQ(w.api.count("cudaGraphLaunch"), 0u) << ep;
            break;
          case EpochForm::Graph:
            EXPECT_EQ(w.api.count("cudaGraphLaunch"), 1u) << ep;
            EXPECT_EQ(w.api.count("cudaStreamBeginCapture"), i == 0 ? 1u : 0u) << ep;
            if (i > 0) {
              EXPECT_EQ(step_launches, 0u) << ep;
            }
            break;
          case EpochForm::PerBatch:  // --graphs on: one step graph per batch
            EXPECT_EQ(w.api.count("cudaGraphLaunch"), static_cast<std::uint64_t>(batches)) << ep;
            if (i > 0) {
              EXPECT_EQ(w.api.count("cudaStreamBeginCapture"), 0u) << ep;
            }
            break;
        }
      }
      if (f == EpochForm::PerBatch) {
        per_batch = got;
        continue;
      }
      ASSERT_TRUE(per_batch.has_value()) << "per-batch is declared wherever another form is";
      for (std::size_t i = 0; i < got.epochs.size(); ++i) {
        const StrategyStats &a = got.epochs[i].strategy, &b = per_batch->epochs[i].strategy;
        EXPECT_EQ(a.h2d_bytes, b.h2d_bytes) << "epoch " << i + 1;
        EXPECT_EQ(a.copy_ms.has_value(), b.copy_ms.has_value()) << "epoch " << i + 1;
        if (a.copy_ms) {
          EXPECT_GT(*a.copy_ms, 0.0) << "epoch " << i + 1;
        }
      }
    }
  }
  EXPECT_GT(tested, 12);
}

INSTANTIATE_TEST_SUITE_P(TransferScenario, EveryDeclaredForm,
                         ::testing::Values(Combo{Transfer::U8, Scenario::Static},
                                           Combo{Transfer::F32, Scenario::Static},
                                           Combo{Transfer::U8, Scenario::Refresh},
                                           Combo{Transfer::F32, Scenario::Refresh}),
                         combo_name);

// The graph form captures whatever the step enqueues: the cuBLASLt step's 4-5 launches and the
// layer-by-layer step's 13 go into the epoch graph as they are, for the strategies that gained the
// graph form as much as for the graph best forms.
TEST(LaunchForms, GraphFormHoldsEveryStepImplementation) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& data = small_mnist();
  for (const Combo k :
       {Combo{Transfer::U8, Scenario::Static}, Combo{Transfer::F32, Scenario::Refresh}})
    for (const FusedMode fused : {FusedMode::Lt, FusedMode::Off}) {
      RunConfig base = short_run();
      base.transfer = k.transfer;
      base.scenario = k.scenario;
      base.epochs = 3;
      base.fused = fused;
      base.copy_chunk_mib = kChunkMib;
      RunConfig rc = base;
      rc.launch_form = LaunchForm::PerBatch;
      const RunOutput ref = train_run_on(data, rc);
      for (const StrategyEntry* e : runnable_here()) {
        if (!e->launch_forms.in(k.scenario).contains(EpochForm::Graph)) continue;
        RunConfig c = base;
        c.strategy = e;
        c.launch_form = LaunchForm::Graph;
        const RunOutput got = train_run_on(data, c);
        const std::string what = std::string(e->name) + " " + std::string(to_string(k.scenario)) +
                                 " " + std::string(to_string(k.transfer)) + " " + got.step;
        EXPECT_EQ(got.epoch_form, EpochForm::Graph) << what;
        EXPECT_EQ(got.step, ref.step) << what;
        EXPECT_EQ(first_difference(ref, got), "") << what;
      }
    }
}

// Refused before any device work (Session, before it opens the device; the CLI turns it into
// exit 2): what the strategy's data path does not allow in the scenario, and a kernel form with a
// step that runs one launch per batch.
TEST(LaunchForms, WhatCannotRunIsRefusedBeforeAnyDeviceWork) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  struct Case {
    const char* strategy;
    LaunchForm form;
    Scenario scenario;
    FusedMode fused;
    const char* says;
  };
  const Case cases[] = {
      {"pageable", LaunchForm::Graph, Scenario::Static, FusedMode::Single, "pageable"},
      {"pinned", LaunchForm::Kernel, Scenario::Refresh, FusedMode::Single, "batch buffer"},
      {"double-buffer", LaunchForm::ChunkKernels, Scenario::Static, FusedMode::Single, "slot"},
      {"double-buffer-graph", LaunchForm::Kernel, Scenario::Static, FusedMode::Single, "chunk"},
      {"um-prefetch", LaunchForm::Graph, Scenario::Static, FusedMode::Single, "graph node"},
      {"um", LaunchForm::Graph, Scenario::Stream, FusedMode::Single, "stream"},
      {"resident", LaunchForm::Kernel, Scenario::Static, FusedMode::Lt, "single-launch step"},
      {"resident", LaunchForm::ChunkKernels, Scenario::Refresh, FusedMode::Off, "single-launch"},
      {"zero-copy", LaunchForm::Kernel, Scenario::Static, FusedMode::On, "mapped host memory"},
  };
  for (const Case& k : cases) {
    RunConfig c = short_run(k.strategy);
    c.launch_form = k.form;
    c.scenario = k.scenario;
    c.fused = k.fused;
    const std::string what = std::string(k.strategy) + " --launch-form " +
                             std::string(to_string(k.form)) + " " +
                             std::string(to_string(k.scenario));
    std::ostringstream out, err;
    try {
      Session(c, small_mnist()).run(out, err);
      ADD_FAILURE() << what << ": ran";
    } catch (const std::invalid_argument& ex) {
      EXPECT_NE(std::string(ex.what()).find(k.says), std::string::npos)
          << what << ": " << ex.what();
      EXPECT_NE(std::string(ex.what()).find("--launch-form"), std::string::npos) << ex.what();
    }
  }
}

// The Trainer itself never runs another form than the one asked for: what the attached strategy
// or the Mlp's step does not allow throws.
TEST(LaunchForms, TheTrainerRefusesWhatTheStrategyOrStepDoesNotAllow) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& data = small_mnist();
  struct Case {
    const char* strategy;
    LaunchForm form;
    FusedMode fused;
  };
  for (const Case k : {Case{"pageable", LaunchForm::Graph, FusedMode::Single},
                       Case{"pinned-graph", LaunchForm::Kernel, FusedMode::Single},
                       Case{"resident", LaunchForm::Kernel, FusedMode::Lt}}) {
    RunConfig c = short_run(k.strategy);
    c.launch_form = k.form;
    c.fused = k.fused;
    Stream compute = Stream::create();
    Mlp mlp(mlp_config(c, data.features(), data.classes), compute);
    auto st = c.strategy->make();
    st->attach(data, strategy_options(c), compute);
    EXPECT_THROW({ Trainer tr(mlp, *st, data, c, compute); }, std::invalid_argument)
        << k.strategy << " " << to_string(k.form);
  }
}
