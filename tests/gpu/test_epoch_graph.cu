// test_epoch_graph.cu: the Trainer's graph form. For a strategy that allows it
// (epoch_capturable), the first epoch's enqueues (acquire, step, release for every batch, then
// end_epoch) are captured into ONE CUDA graph and replayed every later epoch with only
// begin_epoch in between. It must be the same training as enqueuing batch by batch
// (--launch-form per-batch), bit for bit, static and refresh, u8 and f32, with a ragged last batch;
// it is captured exactly once; and the record says which form ran.
#include "gpu_test_support.h"

#include "experiments/core/mlp.h"
#include "experiments/core/trainer.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

/// The registry's capturable strategies this device runs.
std::vector<const StrategyEntry*> capturable_here() {
  const DeviceCaps caps = DeviceCaps::query(0);
  std::vector<const StrategyEntry*> r;
  for (const auto& e : strategy_registry()) {
    if (!e.make()->epoch_capturable()) continue;
    if (const std::string why = e.unsupported(caps); !why.empty()) {
      std::cout << "[ WAIVED ] " << e.name << ": " << why << "\n";
      continue;
    }
    r.push_back(&e);
  }
  return r;
}

}  // namespace

TEST(EpochGraph, ReplayedGraphIsBitwiseTheSameTrainingAsPerBatchEnqueue) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const std::vector<const StrategyEntry*> strategies = capturable_here();
  ASSERT_FALSE(strategies.empty());
  for (const StrategyEntry* e : strategies)
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh})
      for (const Transfer t : {Transfer::U8, Transfer::F32})
        for (const int batch : {256, 1007}) {  // 60000 = 234·256 + 96 = 59·1007 + 587
          const std::string what = std::string(e->name) + " " + std::string(to_string(sc)) + " " +
                                   std::string(to_string(t)) + " batch " + std::to_string(batch);
          RunConfig graph = short_run(e->name);
          graph.scenario = sc;
          graph.transfer = t;
          graph.batch = batch;
          graph.epochs = 3;  // two replays
          RunConfig per_batch = graph;
          per_batch.launch_form = LaunchForm::PerBatch;
          const RunOutput a = train_run(graph), b = train_run(per_batch);
          EXPECT_TRUE(a.epoch_launch) << what;
          // double-buffer-graph's chunks run one launch each with the single-launch step (the
          // kernel-per-chunk form, bitwise the same too); its graph form is the test below.
          EXPECT_EQ(a.epoch_form, captured_form(e->name)) << what;
          EXPECT_EQ(b.epoch_form, EpochForm::PerBatch) << what;
          EXPECT_EQ(a.step, b.step) << what;
          EXPECT_EQ(first_difference(a, b), "") << what;
          EXPECT_EQ(a.test.acc, b.test.acc) << what;
          for (std::size_t i = 0; i < a.epochs.size(); ++i) {
            EXPECT_EQ(a.epochs[i].strategy.h2d_bytes, b.epochs[i].strategy.h2d_bytes) << what;
            EXPECT_GT(a.epochs[i].gpu_ms, 0.0) << what << " epoch " << i + 1;
            EXPECT_GT(a.epochs[i].compute_ms, 0.0) << what << " epoch " << i + 1;
          }
        }
}

// The cuBLASLt and layer-by-layer steps go into the epoch graph too (many launches per step).
TEST(EpochGraph, EveryStepImplementationReplaysBitwiseTheSame) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const StrategyEntry* e : capturable_here())
    for (const FusedMode f : {FusedMode::Lt, FusedMode::Off}) {
      RunConfig graph = short_run(e->name);
      graph.fused = f;
      RunConfig per_batch = graph;
      per_batch.launch_form = LaunchForm::PerBatch;
      const RunOutput a = train_run(graph), b = train_run(per_batch);
      EXPECT_EQ(a.epoch_form, EpochForm::Graph) << e->name;
      EXPECT_EQ(a.step, b.step) << e->name;
      EXPECT_EQ(first_difference(a, b), "") << e->name << " " << a.step;
    }
}

// Captured in the first epoch, then only replayed: the graph depends on nothing that changes.
TEST(EpochGraph, CapturedOnceInTheFirstEpoch) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& data = mnist();
  std::vector<const StrategyEntry*> cases = capturable_here();
  cases.push_back(find_strategy("pinned"));    // per-batch form: never captures an epoch
  cases.push_back(find_strategy("resident"));  // kernel form: neither
  for (const StrategyEntry* e : cases)
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
      RunConfig c = short_run(e->name);
      c.scenario = sc;
      Stream compute = Stream::create();
      auto st = e->make();
      Mlp mlp(mlp_config(c, data.features(), data.classes), compute);
      st->attach(data, strategy_options(c), compute);
      Trainer tr(mlp, *st, data, c, compute);
      const bool graph = tr.epoch_form() == EpochForm::Graph;
      const bool kernel = is_kernel_form(tr.epoch_form());
      EXPECT_EQ(graph, st->epoch_capturable() && !kernel) << e->name;
      EXPECT_EQ(tr.epoch_graph_captures(), 0) << e->name << ": nothing captured before epoch 1";
      for (int ep = 1; ep <= 3; ++ep) {
        tr.run_epoch(ep);
        EXPECT_EQ(tr.epoch_graph_captures(), graph ? 1 : 0)
            << e->name << " " << to_string(sc) << " after epoch " << ep;
      }
    }
}

TEST(EpochGraph, TheRecordSaysWhichFormRanAndWhyNotOne) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  struct Case {
    const char* strategy;
    LaunchForm launch;
    int batch;
    EpochForm form;
    const char* reason;  // a part of config.epoch_launch_off_reason; nullptr: none
  };
  const int lt_batch = static_cast<int>(kSingleLaunchMaxWork / 256) + 64;  // cuBLASLt step
  const Case cases[] = {
      {"resident", LaunchForm::Auto, 256, EpochForm::Kernel, nullptr},
      {"pinned-graph", LaunchForm::Auto, 256, EpochForm::Graph, nullptr},
      {"double-buffer-graph", LaunchForm::Auto, lt_batch, EpochForm::Graph, nullptr},
      {"double-buffer-graph", LaunchForm::Auto, 256, EpochForm::ChunkKernels, nullptr},
      {"zero-copy-staged", LaunchForm::Auto, lt_batch, EpochForm::Graph, nullptr},
      {"zero-copy-staged", LaunchForm::Auto, 256, EpochForm::ChunkKernels, nullptr},
      {"pinned-graph", LaunchForm::PerBatch, 256, EpochForm::PerBatch, "--launch-form per-batch"},
      {"pinned", LaunchForm::Auto, 256, EpochForm::PerBatch, "cannot be captured"},
      {"resident", LaunchForm::Auto, lt_batch, EpochForm::PerBatch, "one launch per batch"},
  };
  for (const Case& k : cases) {
    RunConfig c = short_run(k.strategy);
    c.launch_form = k.launch;
    c.batch = k.batch;
    c.epochs = 1;
    const RunRecord r = run_session(c);
    const std::string what = std::string(k.strategy) + " batch " + std::to_string(k.batch);
    ASSERT_TRUE(r.epoch_launch.has_value()) << what;
    EXPECT_EQ(r.epoch_launch->form, k.form) << what;
    EXPECT_EQ(r.epoch_launch->on, k.form != EpochForm::PerBatch) << what;
    const nlohmann::json j = r.to_json()["config"];
    EXPECT_EQ(j["epoch_form"], std::string(to_string(k.form))) << what;
    if (k.reason == nullptr) {
      EXPECT_TRUE(j["epoch_launch_off_reason"].is_null()) << what;
    } else {
      ASSERT_TRUE(j["epoch_launch_off_reason"].is_string()) << what;
      EXPECT_NE(j["epoch_launch_off_reason"].get<std::string>().find(k.reason), std::string::npos)
          << what << ": " << j["epoch_launch_off_reason"];
    }
  }
}
