// test_launch_request.cpp: from --launch-form to the epoch form a Trainer runs (launch_request.h),
// without a GPU: auto is the rule the epoch launch followed before forms could be asked for by
// name (its off reasons included); a form asked for by name runs as asked or is refused, never
// replaced; kernel-per-chunk's groups; and the refusals a run's options decide before any device
// work (the strategy's declared forms in the scenario, the step a kernel form needs).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "experiments/core/launch_request.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/registry.h"

using namespace memstrat;

namespace {

constexpr int kBatches = 235;  // MNIST at batch 256

EpochFormInputs inputs(LaunchForms own, LaunchForms allowed, bool multi_step = true) {
  EpochFormInputs in;
  in.strategy = "s";
  in.own = own;
  in.allowed = allowed;
  in.multi_step = multi_step;
  in.step_kind = multi_step ? "single-launch" : "cublaslt-fused";
  in.batches = kBatches;
  in.cut_group = 41;
  return in;
}

const LaunchForms kResident{true, 0, false};            // auto: kernel
const LaunchForms kResidentAllows{true, 0, true};       // asked: every form
const LaunchForms kChunkRing{false, 41, true};          // double-buffer-graph's own
const LaunchForms kPinnedGraph{false, 0, true};         // auto: graph
const LaunchForms kPinnedGraphAllows{false, 41, true};  // asked: also one launch per chunk
const LaunchForms kNothing{false, 0, false};            // pinned's own: per batch
const LaunchForms kPinnedAllows{false, 0, true};        // asked: also the epoch graph

std::string refusal(LaunchForm asked, const EpochFormInputs& in) {
  try {
    choose_epoch_form(asked, in);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

RunConfig run_of(const char* strategy, LaunchForm form, Scenario sc = Scenario::Static,
                 FusedMode fused = FusedMode::On) {
  RunConfig c;
  c.strategy = find_strategy(strategy);
  c.launch_form = form;
  c.scenario = sc;
  c.fused = fused;
  return c;
}

std::string device_lacks_it(int, int) { return "this GPU cannot run the single-launch step"; }

}  // namespace

// Auto follows the rule the epoch launch always followed, off reasons included (records and the
// analysis compare them): kernel, kernel-per-chunk (both with a multi-step Mlp), graph, per batch.
TEST(LaunchRequest, AutoIsTheFormTheStrategyWasBuiltFor) {
  EpochFormChoice c = choose_epoch_form(LaunchForm::Auto, inputs(kResident, {}));
  EXPECT_EQ(c.form, EpochForm::Kernel);
  EXPECT_EQ(c.group, kBatches);
  EXPECT_EQ(c.off_reason, "");
  c = choose_epoch_form(LaunchForm::Auto, inputs(kChunkRing, {}));
  EXPECT_EQ(c.form, EpochForm::ChunkKernels);
  EXPECT_EQ(c.group, 41);
  c = choose_epoch_form(LaunchForm::Auto, inputs(kChunkRing, {}, false));
  EXPECT_EQ(c.form, EpochForm::Graph);
  c = choose_epoch_form(LaunchForm::Auto, inputs(kPinnedGraph, {}));
  EXPECT_EQ(c.form, EpochForm::Graph);
  EXPECT_EQ(c.off_reason, "");
  c = choose_epoch_form(LaunchForm::Auto, inputs(kNothing, {}));
  EXPECT_EQ(c.form, EpochForm::PerBatch);
  EXPECT_EQ(c.off_reason,
            "strategy s moves each batch while the previous ones compute, and strategy s cannot "
            "be captured as one epoch graph");
  c = choose_epoch_form(LaunchForm::Auto, inputs(kResident, {}, false));
  EXPECT_EQ(c.form, EpochForm::PerBatch);
  EXPECT_EQ(c.off_reason,
            "the cublaslt-fused step runs one launch per batch, and strategy s cannot be captured "
            "as one epoch graph");
  // What the strategy allows when asked does not change what auto takes.
  EXPECT_EQ(choose_epoch_form(LaunchForm::Auto, inputs(kNothing, kPinnedAllows)).form,
            EpochForm::PerBatch);
  EXPECT_EQ(choose_epoch_form(LaunchForm::Auto, inputs(kPinnedGraph, kPinnedGraphAllows)).form,
            EpochForm::Graph);
  EXPECT_EQ(choose_epoch_form(LaunchForm::Auto, inputs(kResident, kResidentAllows, false)).form,
            EpochForm::PerBatch);
  // A launch group as long as the epoch keeps its form; one longer is cut to the epoch.
  c = choose_epoch_form(LaunchForm::Auto, inputs({false, 1000, true}, {}));
  EXPECT_EQ(c.form, EpochForm::ChunkKernels);
  EXPECT_EQ(c.group, kBatches);
}

TEST(LaunchRequest, AFormByNameRunsAsAsked) {
  const EpochFormInputs resident = inputs(kResident, kResidentAllows);
  EpochFormChoice c = choose_epoch_form(LaunchForm::Kernel, resident);
  EXPECT_EQ(c.form, EpochForm::Kernel);
  EXPECT_EQ(c.group, kBatches);
  c = choose_epoch_form(LaunchForm::ChunkKernels, resident);  // the trainer's cut
  EXPECT_EQ(c.form, EpochForm::ChunkKernels);
  EXPECT_EQ(c.group, 41);
  c = choose_epoch_form(LaunchForm::Graph, resident);
  EXPECT_EQ(c.form, EpochForm::Graph);
  EXPECT_EQ(c.off_reason, "");
  c = choose_epoch_form(LaunchForm::PerBatch, resident);
  EXPECT_EQ(c.form, EpochForm::PerBatch);
  EXPECT_NE(c.off_reason.find("--launch-form per-batch"), std::string::npos) << c.off_reason;
  EXPECT_NE(c.off_reason.find("--epoch-launch off"), std::string::npos) << c.off_reason;
  // The strategy's own groups, not the trainer's cut.
  c = choose_epoch_form(LaunchForm::ChunkKernels, inputs(kPinnedGraph, {false, 7, true}));
  EXPECT_EQ(c.group, 7);
  // The graph form with any step.
  EXPECT_EQ(choose_epoch_form(LaunchForm::Graph, inputs(kNothing, kPinnedAllows, false)).form,
            EpochForm::Graph);
  // A cut longer than the epoch is one launch.
  EpochFormInputs one = resident;
  one.cut_group = 1000;
  EXPECT_EQ(choose_epoch_form(LaunchForm::ChunkKernels, one).group, kBatches);
}

TEST(LaunchRequest, AFormTheStrategyOrStepCannotRunIsRefusedNeverReplaced) {
  std::string why = refusal(LaunchForm::Graph, inputs(kNothing, kNothing));
  EXPECT_NE(why.find("--launch-form graph"), std::string::npos) << why;
  EXPECT_NE(why.find("it allows per-batch"), std::string::npos) << why;
  why = refusal(LaunchForm::Kernel, inputs(kPinnedGraph, kPinnedGraphAllows));
  EXPECT_NE(why.find("per-batch, graph, kernel-per-chunk"), std::string::npos) << why;
  why = refusal(LaunchForm::ChunkKernels, inputs(kPinnedGraph, kPinnedGraph));
  EXPECT_NE(why.find("--launch-form kernel-per-chunk"), std::string::npos) << why;
  why = refusal(LaunchForm::Kernel, inputs(kResident, kResidentAllows, false));
  EXPECT_NE(why.find("cublaslt-fused step runs one launch per batch"), std::string::npos) << why;
  why = refusal(LaunchForm::ChunkKernels, inputs(kChunkRing, kChunkRing, false));
  EXPECT_NE(why.find("only the single-launch step"), std::string::npos) << why;
  EXPECT_EQ(refusal(LaunchForm::PerBatch, inputs(kNothing, kNothing, false)), "");
}

// The trainer cuts an epoch as ChunkPlan::packed cuts the chunks pinned-graph, double-buffer-graph
// and zero-copy-staged copy at the same --copy-chunk, so resident's kernel-per-chunk launches
// hold the batches theirs hold.
TEST(LaunchRequest, TheTrainersCutIsTheChunkOfCopyChunk) {
  for (const Transfer t : {Transfer::U8, Transfer::F32})
    for (const int batch : {64, 256, 1007})
      for (const int mib : {1, 8, 1024}) {
        RunConfig c;
        c.transfer = t;
        c.batch = batch;
        c.copy_chunk_mib = mib;
        const BatchGeometry g{60000, batch, (t == Transfer::U8 ? 1u : 4u) * 784u};
        EXPECT_EQ(cut_launch_group(c, 784, 60000),
                  ChunkPlan::packed(g, static_cast<std::size_t>(mib) << 20).batches_per_chunk())
            << to_string(t) << " " << batch << " " << mib;
      }
  RunConfig c;  // u8, batch 256 (201728 B a block), 8 MiB: 41 batches a launch
  EXPECT_EQ(cut_launch_group(c, 784, 60000), 41);
  c.copy_chunk_mib = 1024;  // more than the epoch: one launch
  EXPECT_EQ(cut_launch_group(c, 784, 60000), 235);
}

// Before any device work: the strategy's declared forms in the scenario, then the step a kernel
// form needs (with the options alone: exit 2; with the device's answer: a waiver, exit 3).
TEST(LaunchRequest, RefusalsTheOptionsDecide) {
  for (const LaunchForm f : {LaunchForm::Auto, LaunchForm::PerBatch, LaunchForm::Graph,
                             LaunchForm::ChunkKernels, LaunchForm::Kernel})
    EXPECT_EQ(launch_form_refusal(run_of("resident", f), 784, 10, any_device_runs_it), "")
        << to_string(f);
  // Auto is never refused, whatever the strategy.
  for (const StrategyEntry& e : strategy_registry()) {
    RunConfig c = run_of("resident", LaunchForm::Auto, Scenario::Refresh, FusedMode::Off);
    c.strategy = &e;
    EXPECT_EQ(launch_form_refusal(c, 784, 10, device_lacks_it), "") << e.name;
  }
  std::string why =
      launch_form_refusal(run_of("pageable", LaunchForm::Graph), 784, 10, any_device_runs_it);
  EXPECT_NE(why.find("strategy pageable runs per-batch in the static scenario"), std::string::npos)
      << why;
  why = launch_form_refusal(run_of("um", LaunchForm::Kernel, Scenario::Stream), 784, 10,
                            any_device_runs_it);
  EXPECT_NE(why.find("stream scenario"), std::string::npos) << why;
  // The step: --fused on takes the layer-by-layer step for zero-copy; --fused single runs it.
  why = launch_form_refusal(run_of("zero-copy", LaunchForm::Kernel), 784, 10, any_device_runs_it);
  EXPECT_NE(why.find("layer-by-layer step"), std::string::npos) << why;
  EXPECT_NE(why.find("mapped host memory"), std::string::npos) << why;
  EXPECT_EQ(launch_form_refusal(
                run_of("zero-copy", LaunchForm::Kernel, Scenario::Static, FusedMode::Single), 784,
                10, any_device_runs_it),
            "");
  why = launch_form_refusal(
      run_of("resident", LaunchForm::ChunkKernels, Scenario::Static, FusedMode::Lt), 784, 10,
      any_device_runs_it);
  EXPECT_NE(why.find("cublaslt-fused step"), std::string::npos) << why;
  RunConfig big = run_of("resident", LaunchForm::Kernel);
  big.batch = 2048;  // batch × hidden past the work limit: --fused on takes cuBLASLt
  EXPECT_NE(launch_form_refusal(big, 784, 10, any_device_runs_it), "");
  big.fused = FusedMode::Single;
  EXPECT_EQ(launch_form_refusal(big, 784, 10, any_device_runs_it), "");
  // The graph form needs no particular step.
  EXPECT_EQ(
      launch_form_refusal(run_of("pinned", LaunchForm::Graph, Scenario::Refresh, FusedMode::Off),
                          784, 10, device_lacks_it),
      "");
  // What the device says decides only where the options allow the form.
  why = launch_form_refusal(run_of("resident", LaunchForm::Kernel), 784, 10, device_lacks_it);
  EXPECT_NE(why.find("this GPU cannot run the single-launch step"), std::string::npos) << why;
}
