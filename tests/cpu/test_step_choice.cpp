// test_step_choice.cpp: choose_step, the rule that picks the Mlp's one step implementation from
// the configuration (--fused on|single|lt|off) and what the device allows, with the reasons the
// run record carries; and choose_gradient_step, the same rule for data-parallel training, limited
// to the steps that compute gradients apart from their update. The device query is replaced by a
// stub, so these run without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "experiments/core/run_config.h"
#include "experiments/core/step_choice.h"

namespace {

using memstrat::choose_gradient_step;
using memstrat::choose_step;
using memstrat::kDataParallelStepReason;
using memstrat::kSingleLaunchMaxWork;
using memstrat::MlpConfig;
using memstrat::StepChoice;
using memstrat::StepKind;

int g_here_calls = 0;
std::string device_runs_it(int, int) {
  ++g_here_calls;
  return "";
}
std::string device_lacks_it(int, int) {
  ++g_here_calls;
  return "this GPU does not support cooperative launches";
}

MlpConfig config(StepKind kind, int hidden = 256, int max_batch = 256) {
  MlpConfig c;
  c.layers = {784, hidden, 10};
  c.max_batch = max_batch;
  c.step = kind;
  return c;
}

TEST(StepChoice, AutoTakesTheSingleLaunchStepUpToTheWorkLimitThenCublasLt) {
  const StepChoice a = choose_step(config(StepKind::Auto), device_runs_it);
  EXPECT_EQ(a.kind, StepKind::SingleLaunch);
  EXPECT_EQ(a.single_off_reason, "");
  EXPECT_EQ(a.fused_off_reason, "");
  // batch × hidden == kSingleLaunchMaxWork is still in; one more row is out.
  const int at_limit = static_cast<int>(kSingleLaunchMaxWork / 256);
  EXPECT_EQ(choose_step(config(StepKind::Auto, 256, at_limit), device_runs_it).kind,
            StepKind::SingleLaunch);
  const StepChoice over = choose_step(config(StepKind::Auto, 256, at_limit + 1), device_runs_it);
  EXPECT_EQ(over.kind, StepKind::LtFused);
  EXPECT_NE(over.single_off_reason.find("--fused single"), std::string::npos) << over.single_off_reason;
  EXPECT_EQ(over.fused_off_reason, "");
  EXPECT_EQ(choose_step(config(StepKind::Auto, 1024, 1024), device_runs_it).kind, StepKind::LtFused);
}

TEST(StepChoice, EachRequestedKindRunsWhereItApplies) {
  EXPECT_EQ(choose_step(config(StepKind::SingleLaunch, 1024, 1024), device_runs_it).kind,
            StepKind::SingleLaunch);  // at any size
  const StepChoice lt = choose_step(config(StepKind::LtFused), device_runs_it);
  EXPECT_EQ(lt.kind, StepKind::LtFused);
  EXPECT_EQ(lt.single_off_reason, "single-launch step off in the configuration");
  EXPECT_EQ(lt.fused_off_reason, "");
  const StepChoice off = choose_step(config(StepKind::Layerwise), device_runs_it);
  EXPECT_EQ(off.kind, StepKind::Layerwise);
  EXPECT_EQ(off.single_off_reason, "off in the configuration");
  EXPECT_EQ(off.fused_off_reason, "off in the configuration");
}

TEST(StepChoice, FallsBackWithTheReasonWhenTheStepDoesNotApply) {
  MlpConfig tf32 = config(StepKind::Auto);
  tf32.tf32 = true;
  const StepChoice t = choose_step(tf32, device_runs_it);
  EXPECT_EQ(t.kind, StepKind::LtFused) << "the single-launch step is fp32 only";
  EXPECT_NE(t.single_off_reason.find("TF32"), std::string::npos) << t.single_off_reason;

  const StepChoice gpu = choose_step(config(StepKind::SingleLaunch), device_lacks_it);
  EXPECT_EQ(gpu.kind, StepKind::LtFused);
  EXPECT_EQ(gpu.single_off_reason, "this GPU does not support cooperative launches");

  MlpConfig deep = config(StepKind::Auto);
  deep.layers = {784, 128, 64, 10};
  const StepChoice d = choose_step(deep, device_runs_it);
  EXPECT_EQ(d.kind, StepKind::Layerwise);
  EXPECT_EQ(d.fused_off_reason, "the fused step needs exactly one hidden layer");

  MlpConfig tiled = config(StepKind::SingleLaunch);
  tiled.gemm = memstrat::kernels::GemmBackend::Tiled;
  const StepChoice ti = choose_step(tiled, device_runs_it);
  EXPECT_EQ(ti.kind, StepKind::Layerwise);
  EXPECT_NE(ti.fused_off_reason.find("cuBLAS"), std::string::npos) << ti.fused_off_reason;

  MlpConfig many = config(StepKind::Auto, 64, 16);
  many.layers.back() = 20;  // more classes than either fused step takes
  EXPECT_EQ(choose_step(many, device_runs_it).kind, StepKind::Layerwise);
  // Too wide for the cuBLASLt kernels' shared memory, too wide for the single launch's too.
  EXPECT_EQ(choose_step(config(StepKind::Auto, 8192, 16), device_runs_it).kind, StepKind::Layerwise);
}

TEST(StepChoice, AsksTheDeviceOnlyWhenTheConfigurationTakesTheSingleLaunchStep) {
  g_here_calls = 0;
  choose_step(config(StepKind::Layerwise), device_runs_it);
  choose_step(config(StepKind::LtFused), device_runs_it);
  choose_step(config(StepKind::Auto, 1024, 1024), device_runs_it);
  EXPECT_EQ(g_here_calls, 0);
  choose_step(config(StepKind::Auto), device_runs_it);
  EXPECT_EQ(g_here_calls, 1);
}

// A batch the step reads in place from mapped host memory (zero-copy): --fused on takes the
// layer-by-layer step, which reads a u8 batch once (the normalise kernel), never the
// single-launch step, which reads X over the bus several times per step. Explicit requests still
// run what they ask for.
MlpConfig in_host_memory(StepKind kind, int hidden = 256, int max_batch = 256) {
  MlpConfig c = config(kind, hidden, max_batch);
  c.batch_in_host_memory = true;
  return c;
}

TEST(StepChoice, AutoTakesTheLayerByLayerStepForABatchInHostMemory) {
  g_here_calls = 0;
  const StepChoice a = choose_step(in_host_memory(StepKind::Auto), device_runs_it);
  EXPECT_EQ(a.kind, StepKind::Layerwise);
  EXPECT_EQ(a.single_off_reason,
            "the batch is read in place from mapped host memory; the single-launch step would "
            "read it over PCIe several times (--fused single forces it)");
  EXPECT_NE(a.fused_off_reason.find("mapped host memory"), std::string::npos) << a.fused_off_reason;
  EXPECT_NE(a.fused_off_reason.find("--fused lt"), std::string::npos) << a.fused_off_reason;
  EXPECT_EQ(g_here_calls, 0) << "the rule needs no device query";
  // Past the single-launch work limit too (Auto would otherwise take cuBLASLt there).
  const int over = static_cast<int>(kSingleLaunchMaxWork / 256) + 1;
  EXPECT_EQ(choose_step(in_host_memory(StepKind::Auto, 256, over), device_runs_it).kind,
            StepKind::Layerwise);
  // A reason the configuration cannot take a fused step at all comes first.
  MlpConfig deep = in_host_memory(StepKind::Auto);
  deep.layers = {784, 128, 64, 10};
  EXPECT_EQ(choose_step(deep, device_runs_it).fused_off_reason,
            "the fused step needs exactly one hidden layer");
}

TEST(StepChoice, ExplicitRequestsIgnoreWhereTheBatchIs) {
  const StepChoice single = choose_step(in_host_memory(StepKind::SingleLaunch), device_runs_it);
  EXPECT_EQ(single.kind, StepKind::SingleLaunch);
  EXPECT_EQ(single.single_off_reason, "");
  const StepChoice lt = choose_step(in_host_memory(StepKind::LtFused), device_runs_it);
  EXPECT_EQ(lt.kind, StepKind::LtFused);
  EXPECT_EQ(lt.fused_off_reason, "");
  // --fused single on a device without it falls back to cuBLASLt, as for any batch.
  EXPECT_EQ(choose_step(in_host_memory(StepKind::SingleLaunch), device_lacks_it).kind,
            StepKind::LtFused);
  EXPECT_EQ(choose_step(in_host_memory(StepKind::Layerwise), device_runs_it).kind,
            StepKind::Layerwise);
}

// The property comes from the strategy's registry entry, through mlp_config (the one place a run
// builds its MlpConfig), for either transfer format: the rule is transfer-independent.
TEST(StepChoice, MlpConfigCarriesWhereTheStrategysBatchesAre) {
  for (const memstrat::Transfer t : {memstrat::Transfer::U8, memstrat::Transfer::F32}) {
    memstrat::RunConfig rc;
    rc.transfer = t;
    rc.strategy = memstrat::find_strategy("zero-copy");
    const MlpConfig zc = memstrat::mlp_config(rc, 784, 10);
    EXPECT_TRUE(zc.batch_in_host_memory);
    EXPECT_EQ(choose_step(zc, device_runs_it).kind, StepKind::Layerwise);
    rc.fused = memstrat::FusedMode::Single;
    EXPECT_EQ(choose_step(memstrat::mlp_config(rc, 784, 10), device_runs_it).kind,
              StepKind::SingleLaunch);
    for (const char* name : {"resident", "zero-copy-staged", "pinned-graph", "um"}) {
      memstrat::RunConfig other;
      other.transfer = t;
      other.strategy = memstrat::find_strategy(name);
      const MlpConfig c = memstrat::mlp_config(other, 784, 10);
      EXPECT_FALSE(c.batch_in_host_memory) << name;
      EXPECT_EQ(choose_step(c, device_runs_it).kind, StepKind::SingleLaunch) << name;
    }
  }
}

// Where zero-copy's batches are depends on who gathers them: in the stream scenario without host
// augmentation the GPU gathers each batch into device memory (gather_input.h), and the step reads
// it there; with host workers (mapped slots) and in refresh (the epoch in mapped memory, written
// by the host or, with --augment-device gpu, by the GPU) the step reads host memory.
TEST(StepChoice, ZeroCopysBatchesAreInDeviceMemoryWhereTheGpuGathersThem) {
  using memstrat::Augment;
  using memstrat::AugmentDevice;
  using memstrat::Scenario;
  struct Case {
    Scenario scenario;
    Augment augment;
    AugmentDevice where;
    bool in_host;
  };
  for (const Case k : {Case{Scenario::Stream, Augment::Light, AugmentDevice::Host, true},
                       Case{Scenario::Stream, Augment::Heavy, AugmentDevice::Gpu, false},
                       Case{Scenario::Stream, Augment::None, AugmentDevice::Host, false},
                       Case{Scenario::Refresh, Augment::Light, AugmentDevice::Gpu, true},
                       Case{Scenario::Refresh, Augment::Light, AugmentDevice::Host, true}}) {
    memstrat::RunConfig rc;
    rc.strategy = memstrat::find_strategy("zero-copy");
    rc.scenario = k.scenario;
    rc.augment = k.augment;
    rc.augment_device = k.where;
    const MlpConfig c = memstrat::mlp_config(rc, 784, 10);
    EXPECT_EQ(c.batch_in_host_memory, k.in_host)
        << to_string(k.scenario) << " " << to_string(k.augment) << " " << to_string(k.where);
    EXPECT_EQ(choose_step(c, device_runs_it).kind,
              k.in_host ? StepKind::Layerwise : StepKind::SingleLaunch);
  }
}

// Data-parallel training's step: choose_step's choice where it computes gradients apart from its
// update (single-launch, layer-by-layer), choose_step's reasons with it; where choose_step takes
// the cuBLASLt step, the layer-by-layer step, whose fused_off_reason says why.
TEST(StepChoice, GradientStepIsTheChoiceUnlessItIsTheCublasLtStep) {
  const StepChoice a = choose_gradient_step(config(StepKind::Auto), device_runs_it);
  EXPECT_EQ(a.kind, StepKind::SingleLaunch);
  EXPECT_EQ(a.single_off_reason, "");
  EXPECT_EQ(a.fused_off_reason, "");
  EXPECT_EQ(choose_gradient_step(config(StepKind::SingleLaunch, 1024, 1024), device_runs_it).kind,
            StepKind::SingleLaunch);

  // Past the single-launch work limit --fused on takes cuBLASLt on one GPU: layer by layer here.
  const int over = static_cast<int>(kSingleLaunchMaxWork / 256) + 1;
  const StepChoice wide = choose_gradient_step(config(StepKind::Auto, 256, over), device_runs_it);
  ASSERT_EQ(choose_step(config(StepKind::Auto, 256, over), device_runs_it).kind, StepKind::LtFused);
  EXPECT_EQ(wide.kind, StepKind::Layerwise);
  EXPECT_EQ(wide.single_off_reason,
            choose_step(config(StepKind::Auto, 256, over), device_runs_it).single_off_reason);
  EXPECT_EQ(wide.fused_off_reason, kDataParallelStepReason);
  EXPECT_NE(std::string(kDataParallelStepReason).find("cannot stop before the update"),
            std::string::npos);

  // --fused lt (refused by data_parallel_refusal; the rule alone falls back too), and --fused
  // single where the device cannot run it (choose_step then takes cuBLASLt).
  const StepChoice lt = choose_gradient_step(config(StepKind::LtFused), device_runs_it);
  EXPECT_EQ(lt.kind, StepKind::Layerwise);
  EXPECT_EQ(lt.fused_off_reason, kDataParallelStepReason);
  const StepChoice lacks = choose_gradient_step(config(StepKind::SingleLaunch), device_lacks_it);
  EXPECT_EQ(lacks.kind, StepKind::Layerwise);
  EXPECT_EQ(lacks.single_off_reason, "this GPU does not support cooperative launches");
  EXPECT_EQ(lacks.fused_off_reason, kDataParallelStepReason);

  // Where choose_step takes the layer-by-layer step, its reasons stand.
  const StepChoice off = choose_gradient_step(config(StepKind::Layerwise), device_runs_it);
  EXPECT_EQ(off.kind, StepKind::Layerwise);
  EXPECT_EQ(off.single_off_reason, "off in the configuration");
  EXPECT_EQ(off.fused_off_reason, "off in the configuration");
  const StepChoice host = choose_gradient_step(in_host_memory(StepKind::Auto), device_runs_it);
  EXPECT_EQ(host.kind, StepKind::Layerwise);
  EXPECT_EQ(host.fused_off_reason,
            choose_step(in_host_memory(StepKind::Auto), device_runs_it).fused_off_reason);
  MlpConfig deep = config(StepKind::Auto);
  deep.layers = {784, 128, 64, 10};
  EXPECT_EQ(choose_gradient_step(deep, device_runs_it).fused_off_reason,
            "the fused step needs exactly one hidden layer");
}

// Over every request, shape and device answer: the same kind as choose_step but for cuBLASLt,
// never the cuBLASLt step.
TEST(StepChoice, GradientStepNeverTakesTheCublasLtStep) {
  int lt_seen = 0;
  for (const StepKind k :
       {StepKind::Auto, StepKind::SingleLaunch, StepKind::LtFused, StepKind::Layerwise})
    for (const int hidden : {64, 256, 1024, 8192})
      for (const int batch : {16, 256, 1024, 4096})
        for (const bool host : {false, true})
          for (const auto here : {device_runs_it, device_lacks_it}) {
            MlpConfig c = config(k, hidden, batch);
            c.batch_in_host_memory = host;
            const StepChoice one = choose_step(c, here), dp = choose_gradient_step(c, here);
            SCOPED_TRACE(std::string(memstrat::to_string(k)) + " hidden " + std::to_string(hidden) +
                         " batch " + std::to_string(batch));
            EXPECT_NE(dp.kind, StepKind::LtFused);
            lt_seen += one.kind == StepKind::LtFused;
            EXPECT_EQ(dp.kind, one.kind == StepKind::LtFused ? StepKind::Layerwise : one.kind);
            EXPECT_EQ(dp.single_off_reason, one.single_off_reason);
            EXPECT_EQ(dp.fused_off_reason, one.kind == StepKind::LtFused
                                               ? std::string(kDataParallelStepReason)
                                               : one.fused_off_reason);
          }
  EXPECT_GT(lt_seen, 0) << "the sweep reaches the cuBLASLt step";
}

TEST(StepChoice, KindsHaveTheRecordsNames) {
  EXPECT_EQ(memstrat::to_string(StepKind::SingleLaunch), "single-launch");
  EXPECT_EQ(memstrat::to_string(StepKind::LtFused), "cublaslt-fused");
  EXPECT_EQ(memstrat::to_string(StepKind::Layerwise), "layer-by-layer");
  EXPECT_EQ(memstrat::to_string(StepKind::Auto), "auto");
}

}  // namespace
