// test_mlp_step_paths.cu: Mlp's fused paths (the single-launch step, the cuBLASLt-fused step)
// against its layer-by-layer path: which path Mlp takes, agreement, determinism, independence of
// where the batch lives (device, pinned, managed, mapped, u8 or f32), CUDA-graph capture, and
// the evaluate forward; and data-parallel training's split step on the single-launch path
// (Mlp::shard_gradients, Mlp::apply_gradients) against the layer-by-layer path's gradients and
// against its own training step. The kernels each path runs are tested on their own in
// test_fused.cu, test_fused_step.cu and test_kernels.cu. Skips (GTEST_SKIP) without a device.
//
// Tolerances (|got - ref| <= atol + rtol·|ref|):
//  * fused vs layer-by-layer Mlp after 3 SGD steps (784-H-10, batch 256): the two paths differ
//    only in fp32 summation order (gradients agree to ~1e-6 relative), so parameters agree to
//    ~1e-9 absolute; a ReLU unit whose pre-activation is within rounding of 0 may flip between
//    them and move a few weights by ~lr·1e-4. Parameters: atol 2e-5, rtol 1e-4; per-sample
//    losses: atol 1e-5, rtol 1e-4.
//  * single-launch vs layer-by-layer gradients of one shard (no update between): test_fused_step's
//    gradient tolerance, atol 1e-6, rtol 1e-4, the units within 2e-6 of a ReLU kink in some row
//    left out (kernel_test_support.h, without_units).
//  * single-launch gradients then update vs its training step: bitwise (the same phase-C sums,
//    and sgd_update's fmaf expressions are the kernel's own).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "experiments/core/mlp.h"
#include "kernels/common/pixel_norm.h"
#include "kernel_test_support.h"

namespace {

using namespace memstrat::kernel_testing;  // NOLINT: shared test helpers

using memstrat::DeviceBuffer;
using memstrat::ManagedBuffer;
using memstrat::PinnedBuffer;
namespace k = memstrat::kernels;


class MlpStepPaths : public WithGpuStream<> {};

// ---- Mlp: fused path vs layer-by-layer path ------------------------------------------

using memstrat::BatchView;
using memstrat::Mlp;
using memstrat::MlpConfig;
using memstrat::StepKind;

constexpr int kF = 784, kC = 10;

struct Batch {
  std::vector<std::uint8_t> pixels;  // rows × 784
  std::vector<float> x;              // the same, normalised exactly like the GPU does
  std::vector<std::int32_t> y;
  int rows = 0;
};

Batch make_batch(int rows, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> px(0, 255);
  Batch b;
  b.rows = rows;
  b.pixels.resize(static_cast<std::size_t>(rows) * kF);
  for (auto& p : b.pixels) p = static_cast<std::uint8_t>(px(rng) < 100 ? 0 : px(rng));
  b.x.resize(b.pixels.size());
  for (std::size_t i = 0; i < b.x.size(); ++i) b.x[i] = k::normalize_pixel(b.pixels[i]);
  b.y = random_labels(rows, kC, rng);
  return b;
}

// fused && single: the single-launch step (kernels/single_launch/), at every size it takes, not
// only where it is faster; fused && !single: the cuBLASLt fused path; !fused: layer by layer.
MlpConfig mlp_config(int hidden, int max_batch, bool fused, bool single = true) {
  MlpConfig m;
  m.step = !fused ? StepKind::Layerwise : single ? StepKind::SingleLaunch : StepKind::LtFused;
  m.layers = {kF, hidden, kC};
  m.max_batch = max_batch;
  return m;
}

enum class XPlace { Device, DeviceOffset16, DeviceOffset4, Mapped, Managed, U8Offset16 };
const char* name(XPlace p) {
  switch (p) {
    case XPlace::Device:
      return "device";
    case XPlace::DeviceOffset16:
      return "device+16B";
    case XPlace::DeviceOffset4:
      return "device+4B";
    case XPlace::Mapped:
      return "mapped host+16B";
    case XPlace::Managed:
      return "managed+48B";
    case XPlace::U8Offset16:
      return "u8 device+16B";
  }
  return "?";
}

// Where a batch lives for one step; keeps the memory alive.
struct PlacedBatch {
  DeviceBuffer<float> dev;
  DeviceBuffer<std::uint8_t> dev_u8;
  PinnedBuffer<float> mapped;
  ManagedBuffer<float> managed;
  DeviceBuffer<std::int32_t> y;
  BatchView view;
};

std::unique_ptr<PlacedBatch> place(const Batch& b, XPlace where, std::int64_t first_sample,
                                   cudaStream_t s) {
  auto p = std::make_unique<PlacedBatch>();
  const std::size_t n = b.x.size();
  p->y = to_device(b.y, s);
  p->view.y = p->y.data();
  p->view.rows = b.rows;
  p->view.first_sample = first_sample;
  switch (where) {
    case XPlace::Device:
      p->dev = to_device(b.x, s);
      p->view.x_f32 = p->dev.data();
      break;
    case XPlace::DeviceOffset16:
    case XPlace::DeviceOffset4: {
      const int off = where == XPlace::DeviceOffset16 ? 4 : 1;  // floats
      p->dev = DeviceBuffer<float>(n + 8);
      copy_to(p->dev.data() + off, b.x, s);
      p->view.x_f32 = p->dev.data() + off;
      break;
    }
    case XPlace::Mapped: {
      p->mapped = PinnedBuffer<float>(n + 8, cudaHostAllocMapped);
      std::memcpy(p->mapped.data() + 4, b.x.data(), n * sizeof(float));
      float* dptr = nullptr;
      CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dptr), p->mapped.data(), 0));
      p->view.x_f32 = dptr + 4;
      break;
    }
    case XPlace::Managed:
      p->managed = ManagedBuffer<float>(n + 16);
      CUDA_CHECK(cudaStreamSynchronize(s));
      std::memcpy(p->managed.data() + 12, b.x.data(), n * sizeof(float));
      p->view.x_f32 = p->managed.data() + 12;
      break;
    case XPlace::U8Offset16:
      p->dev_u8 = DeviceBuffer<std::uint8_t>(b.pixels.size() + 32);
      copy_to(p->dev_u8.data() + 16, b.pixels, s);
      p->view.x_u8 = p->dev_u8.data() + 16;
      break;
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  return p;
}

struct TrainOut {
  std::vector<float> params;
  std::vector<float> loss;
  std::vector<std::int32_t> correct;
};

// Steps with the given batches (in order, each placed as `where`); first_sample accumulates.
TrainOut train(const MlpConfig& cfg, const std::vector<Batch>& batches, XPlace where,
               cudaStream_t s, bool* fused = nullptr) {
  Mlp mlp(cfg, s);
  if (fused) *fused = mlp.fused();
  std::size_t total = 0;
  for (const Batch& b : batches) total += static_cast<std::size_t>(b.rows);
  DeviceBuffer<float> loss(total);
  DeviceBuffer<std::int32_t> correct(total);
  poison(loss.data(), total, s);
  poison(correct.data(), total, s);
  std::int64_t first = 0;
  for (const Batch& b : batches) {
    auto p = place(b, where, first, s);
    mlp.train_step(p->view, loss.data(), correct.data());
    CUDA_CHECK(cudaStreamSynchronize(s));  // p's memory is released at the end of this scope
    first += b.rows;
  }
  TrainOut o;
  o.params = mlp.parameters();
  o.loss = to_host(loss.data(), total, s);
  o.correct = to_host(correct.data(), total, s);
  return o;
}

TEST_F(MlpStepPaths, MlpUsesTheFusedPathWhereItApplies) {
  EXPECT_TRUE(Mlp(mlp_config(256, 256, true), stream_).fused());
  EXPECT_EQ(Mlp(mlp_config(256, 256, true), stream_).step_kind(), "single-launch");
  EXPECT_EQ(Mlp(mlp_config(256, 256, true, false), stream_).step_kind(), "cublaslt-fused");
  EXPECT_EQ(Mlp(mlp_config(256, 256, false), stream_).step_kind(), "layer-by-layer");
  MlpConfig big = mlp_config(1024, 1024, true);  // batch × hidden beyond the single-launch rule
  big.step = StepKind::Auto;
  const Mlp b(big, stream_);
  EXPECT_EQ(b.step_kind(), "cublaslt-fused");
  EXPECT_NE(b.single_off_reason().find("--fused single"), std::string::npos) << b.single_off_reason();
  big.step = StepKind::SingleLaunch;
  EXPECT_EQ(Mlp(big, stream_).step_kind(), "single-launch");
  MlpConfig tf32 = mlp_config(256, 256, true);
  tf32.tf32 = true;
  const Mlp t32(tf32, stream_);
  EXPECT_EQ(t32.step_kind(), "cublaslt-fused") << "the single-launch step is fp32 only";
  EXPECT_NE(t32.single_off_reason().find("TF32"), std::string::npos) << t32.single_off_reason();
  EXPECT_TRUE(Mlp(mlp_config(1024, 8, true), stream_).fused());
  EXPECT_FALSE(Mlp(mlp_config(256, 256, false), stream_).fused());
  MlpConfig deep = mlp_config(256, 64, true);
  deep.layers = {kF, 128, 64, kC};
  EXPECT_FALSE(Mlp(deep, stream_).fused());
  MlpConfig tiled = mlp_config(256, 64, true);
  tiled.gemm = memstrat::kernels::GemmBackend::Tiled;
  const Mlp t(tiled, stream_);
  EXPECT_FALSE(t.fused());
  EXPECT_NE(t.fused_off_reason().find("cuBLAS"), std::string::npos) << t.fused_off_reason();
  MlpConfig wide = mlp_config(8192, 16, true);
  EXPECT_FALSE(Mlp(wide, stream_).fused());
  MlpConfig many = mlp_config(64, 16, true);
  many.layers.back() = 20;
  EXPECT_FALSE(Mlp(many, stream_).fused());
}

// Three SGD steps (momentum 0.9) with the fused and the layer-by-layer path from the same
// initialisation: same function, different fp32 summation order (see the file comment).
TEST_F(MlpStepPaths, FusedStepMatchesLayerByLayerStep) {
  struct Case {
    int hidden, max_batch;
    std::vector<int> rows;  // per step
  };
  // max_batch <= 1024: every row count runs cuBLASLt; max_batch 1100: the partial batch (37)
  // runs classic cuBLAS.
  for (const Case& c : {Case{256, 256, {256, 256, 255}}, Case{1024, 256, {256, 7, 256}},
                        Case{256, 8, {8, 8, 1}}, Case{256, 1100, {1100, 37, 1100}}}) {
    std::vector<Batch> batches;
    for (std::size_t i = 0; i < c.rows.size(); ++i)
      batches.push_back(make_batch(c.rows[i], seed_of(51, c.hidden, static_cast<int>(i))));
    for (auto [where, single] : {std::pair{XPlace::Device, true}, std::pair{XPlace::U8Offset16, true},
                                 std::pair{XPlace::Device, false},
                                 std::pair{XPlace::U8Offset16, false}}) {
      SCOPED_TRACE("hidden " + std::to_string(c.hidden) + " max_batch " +
                   std::to_string(c.max_batch) + " " + name(where) +
                   (single ? " single-launch" : " cuBLASLt"));
      bool fused_on = false, fused_off = true;
      const TrainOut f = train(mlp_config(c.hidden, c.max_batch, true, single), batches, where,
                               stream_, &fused_on);
      const TrainOut u =
          train(mlp_config(c.hidden, c.max_batch, false), batches, where, stream_, &fused_off);
      ASSERT_TRUE(fused_on);
      ASSERT_FALSE(fused_off);
      EXPECT_TRUE(matches(f.params, u.params, {2e-5, 1e-4}, "parameters after 3 steps"));
      EXPECT_TRUE(matches(f.loss, u.loss, {1e-5, 1e-4}, "per-sample loss"));
      int differ = 0;
      for (std::size_t i = 0; i < f.correct.size(); ++i) differ += f.correct[i] != u.correct[i];
      EXPECT_LE(differ, 1) << "sample_correct differs in " << differ << " rows";
      // The parameters did move.
      const TrainOut none = train(mlp_config(c.hidden, c.max_batch, true), {}, where, stream_);
      EXPECT_FALSE(matches(f.params, none.params, {1e-7, 0}, "moved"));
    }
  }
}

// Same seed, same batches: bitwise-identical parameters and losses whether the batch is in a
// device buffer, at a 16-byte offset, in mapped host memory, in managed memory, or arrives as
// uint8; and run after run. X is declared 16-byte aligned (every strategy's batches are: rows
// are 3136 bytes from a >= 256-byte aligned base); an X that breaks that is refused loudly.
TEST_F(MlpStepPaths, FusedStepIsDeterministicAndIndependentOfWhereXLives) {
  for (auto [hidden, single] : {std::pair{256, true}, std::pair{1024, true}, std::pair{256, false},
                                std::pair{1024, false}}) {
    SCOPED_TRACE(single ? "single-launch" : "cuBLASLt");
    const MlpConfig cfg = mlp_config(hidden, 256, true, single);
    const std::vector<Batch> full = {make_batch(256, seed_of(61, hidden, 0)),
                                     make_batch(256, seed_of(61, hidden, 1))};
    std::vector<Batch> with_partial = full;
    with_partial.push_back(make_batch(100, seed_of(61, hidden, 2)));
    const TrainOut base_full = train(cfg, full, XPlace::Device, stream_);
    const TrainOut base_partial = train(cfg, with_partial, XPlace::Device, stream_);
    for (float v : base_partial.loss) ASSERT_TRUE(std::isfinite(v)) << "unwritten loss";
    EXPECT_THROW(train(cfg, full, XPlace::DeviceOffset4, stream_), std::invalid_argument)
        << "an X only 4-byte aligned must be refused, not run on an algorithm chosen for 16";
    for (XPlace where : {XPlace::Device, XPlace::DeviceOffset16, XPlace::Mapped,
                         XPlace::Managed, XPlace::U8Offset16}) {
      SCOPED_TRACE("hidden " + std::to_string(hidden) + " " + name(where));
      const TrainOut a = train(cfg, full, where, stream_);
      EXPECT_TRUE(bitwise_equal(a.params, base_full.params, "parameters"));
      EXPECT_TRUE(bitwise_equal(a.loss, base_full.loss, "loss"));
      EXPECT_TRUE(bitwise_equal(a.correct, base_full.correct, "correct"));
      const TrainOut b = train(cfg, with_partial, where, stream_);
      EXPECT_TRUE(bitwise_equal(b.params, base_partial.params, "parameters (with partial)"));
      EXPECT_TRUE(bitwise_equal(b.loss, base_partial.loss, "loss (with partial)"));
    }
  }
}

// The trainer replays each step as a CUDA graph: capturing the fused step (a full and a
// partial batch; with max_batch 1030 the partial batch takes the classic-cuBLAS route) must
// work and give the bits of the eager step.
TEST_F(MlpStepPaths, FusedStepCapturedInAGraphMatchesEager) {
  for (auto [max_batch, partial, where, single] :
       {std::tuple{256, 96, XPlace::Device, true}, std::tuple{256, 96, XPlace::U8Offset16, true},
        std::tuple{8, 3, XPlace::U8Offset16, true}, std::tuple{1030, 5, XPlace::Device, true},
        std::tuple{256, 96, XPlace::Device, false}, std::tuple{256, 96, XPlace::U8Offset16, false},
        std::tuple{1030, 5, XPlace::Device, false}}) {
    SCOPED_TRACE(std::string(name(where)) + " max_batch " + std::to_string(max_batch) +
                 (single ? " single-launch" : " cuBLASLt"));
    const MlpConfig cfg = mlp_config(256, max_batch, true, single);
    const std::vector<Batch> batches = {make_batch(max_batch, seed_of(71, 0)),
                                        make_batch(partial, seed_of(71, 1))};
    const std::size_t total = static_cast<std::size_t>(max_batch + partial);
    const TrainOut eager = train(cfg, batches, where, stream_);
    Mlp mlp(cfg, stream_);
    ASSERT_TRUE(mlp.fused());
    DeviceBuffer<float> loss(total);
    DeviceBuffer<std::int32_t> correct(total);
    std::int64_t first = 0;
    for (const Batch& b : batches) {
      auto p = place(b, where, first, stream_);
      const memstrat::GraphExec g =
          memstrat::capture_graph(stream_, cudaStreamCaptureModeThreadLocal,
                                  [&] { mlp.train_step(p->view, loss.data(), correct.data()); });
      CUDA_CHECK(cudaGraphLaunch(g.get(), stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      first += b.rows;
    }
    EXPECT_TRUE(bitwise_equal(mlp.parameters(), eager.params, "parameters"));
    EXPECT_TRUE(bitwise_equal(to_host(loss.data(), total, stream_), eager.loss, "loss"));
  }
}

// evaluate() on the fused path: the loss of the forward pass equals the loss a training
// step reports for the same batch before its update.
TEST_F(MlpStepPaths, FusedEvaluateMatchesTheTrainingForward) {
  for (auto [rows, single] : {std::pair{256, true}, std::pair{13, true}, std::pair{256, false},
                              std::pair{13, false}}) {
    const MlpConfig cfg = mlp_config(256, 256, true, single);
    const Batch b = make_batch(rows, seed_of(81, rows));
    Mlp mlp(cfg, stream_);
    auto dx = to_device(b.x, stream_);
    auto dy = to_device(b.y, stream_);
    DeviceBuffer<float> l1(rows), l2(rows);
    DeviceBuffer<std::int32_t> c1(rows), c2(rows);
    poison(l1.data(), l1.size(), stream_);
    mlp.evaluate(dx.data(), dy.data(), rows, l1.data(), c1.data());
    BatchView v;
    v.x_f32 = dx.data();
    v.y = dy.data();
    v.rows = rows;
    mlp.train_step(v, l2.data(), c2.data());
    SCOPED_TRACE("rows " + std::to_string(rows) + (single ? " single-launch" : " cuBLASLt"));
    EXPECT_TRUE(bitwise_equal(to_host(l1.data(), rows, stream_), to_host(l2.data(), rows, stream_),
                              "loss"));
    EXPECT_TRUE(bitwise_equal(to_host(c1.data(), rows, stream_), to_host(c2.data(), rows, stream_),
                              "correct"));
  }
}

// ---- data-parallel training's split step: gradients, then the update ---------------------

struct ShardOut {
  std::vector<float> grads;  // the flat layout
  std::vector<float> loss;
  std::vector<std::int32_t> correct;
  std::vector<float> params;  // after the gradients
  std::string step;           // the step the Mlp ran
};

// One shard's gradients (grad_scale `scale`) from a fresh Mlp of cfg on b placed as `where`, into
// a poisoned buffer at `offset` floats (offset 1: only 4-byte aligned, as a data-parallel gather
// slot).
ShardOut shard_gradients(const MlpConfig& cfg, const Batch& b, XPlace where, float scale,
                         cudaStream_t s, std::size_t offset = 0) {
  Mlp mlp(cfg, s);
  const std::size_t n = mlp.parameter_count();
  DeviceBuffer<float> g(n + offset), loss(static_cast<std::size_t>(b.rows));
  DeviceBuffer<std::int32_t> correct(static_cast<std::size_t>(b.rows));
  poison(g.data(), g.size(), s);
  poison(loss.data(), loss.size(), s);
  poison(correct.data(), correct.size(), s);
  auto p = place(b, where, 0, s);
  mlp.shard_gradients(p->view, scale, g.data() + offset, loss.data(), correct.data());
  ShardOut o;
  o.grads = to_host(g.data() + offset, n, s);
  o.loss = to_host(loss.data(), loss.size(), s);
  o.correct = to_host(correct.data(), correct.size(), s);
  o.params = mlp.parameters();
  o.step = mlp.step_kind();
  return o;
}

struct ShardCase {
  int hidden, max_batch, rows;
};
std::string describe(const ShardCase& c, XPlace where) {
  return "hidden " + std::to_string(c.hidden) + " max_batch " + std::to_string(c.max_batch) +
         " rows " + std::to_string(c.rows) + " " + name(where);
}
// Hidden 256 at full, ragged and tall batches (launchers of >= 512 rows take phase C's tall
// tiles), hidden 1024 and 128.
const std::vector<ShardCase>& shard_cases() {
  static const std::vector<ShardCase> c = {{256, 256, 256}, {256, 256, 100},  {256, 600, 600},
                                           {256, 600, 100}, {1024, 256, 256}, {128, 64, 37}};
  return c;
}

// One shard's gradients (grad_scale 1 / (2 · rows): a shard of two), single-launch against
// layer-by-layer from the same initialisation: the same gradients up to fp32 summation order,
// the same per-sample losses; and neither touches the parameters.
TEST_F(MlpStepPaths, SingleLaunchShardGradientsMatchLayerByLayer) {
  int left_out = 0, units = 0;
  for (const ShardCase& c : shard_cases())
    for (XPlace where : {XPlace::Device, XPlace::U8Offset16}) {
      SCOPED_TRACE(describe(c, where));
      const Batch b = make_batch(c.rows, seed_of(111, c.hidden, c.rows));
      const float scale = 1.f / static_cast<float>(2 * c.rows);
      const ShardOut single =
          shard_gradients(mlp_config(c.hidden, c.max_batch, true), b, where, scale, stream_);
      const ShardOut layer =
          shard_gradients(mlp_config(c.hidden, c.max_batch, false), b, where, scale, stream_);
      ASSERT_EQ(single.step, "single-launch");
      ASSERT_EQ(layer.step, "layer-by-layer");
      const std::vector<float> init =
          Mlp(mlp_config(c.hidden, c.max_batch, true), stream_).parameters();
      EXPECT_TRUE(bitwise_equal(single.params, init, "parameters after single-launch gradients"));
      EXPECT_TRUE(bitwise_equal(layer.params, init, "parameters after layer-by-layer gradients"));
      const std::vector<bool> amb = relu_ambiguous_units(
          b.x.data(), init.data(), init.data() + static_cast<std::size_t>(kF) * c.hidden, c.rows,
          kF, c.hidden, 2e-6);
      left_out += static_cast<int>(std::count(amb.begin(), amb.end(), true));
      units += c.hidden;
      EXPECT_TRUE(matches(without_units(single.grads, kF, c.hidden, amb),
                          without_units(layer.grads, kF, c.hidden, amb), {1e-6, 1e-4},
                          "gradients"));
      EXPECT_TRUE(matches(single.loss, layer.loss, {1e-5, 1e-4}, "per-sample loss"));
      int differ = 0;
      for (std::size_t i = 0; i < single.correct.size(); ++i)
        differ += single.correct[i] != layer.correct[i];
      EXPECT_LE(differ, 1) << "sample_correct differs in " << differ << " rows";
      // The gradients are not zero (the comparison can fail).
      EXPECT_FALSE(matches(single.grads, std::vector<float>(single.grads.size(), 0.f), {1e-7, 0},
                           "gradients vs zeros"));
    }
  EXPECT_LE(100 * left_out, units) << left_out << " of " << units << " units left out";
}

// The single-launch split step is its training step: gradients at grad_scale 1 / rows into the
// Mlp's own buffer, then apply_gradients, give train_step's parameters and losses bit for bit,
// step after step (momentum 0.9: the velocities carry over), full, ragged and tall, u8 and f32.
// Half the scale gives exactly half the gradients; a gradient buffer only 4-byte aligned the
// same bits; no rows, zeros.
TEST_F(MlpStepPaths, SingleLaunchGradientsThenUpdateAreItsTrainingStep) {
  struct Seq {
    int hidden, max_batch;
    std::vector<int> rows;
  };
  for (const Seq& q :
       {Seq{256, 256, {256, 256, 100}}, Seq{256, 600, {600, 37, 600}}, Seq{1024, 64, {64, 13}}})
    for (XPlace where : {XPlace::Device, XPlace::U8Offset16}) {
      SCOPED_TRACE("hidden " + std::to_string(q.hidden) + " max_batch " +
                   std::to_string(q.max_batch) + " " + name(where));
      const MlpConfig cfg = mlp_config(q.hidden, q.max_batch, true);
      std::vector<Batch> batches;
      for (std::size_t i = 0; i < q.rows.size(); ++i)
        batches.push_back(make_batch(q.rows[i], seed_of(112, q.hidden, static_cast<int>(i))));
      const TrainOut trained = train(cfg, batches, where, stream_);
      Mlp split(cfg, stream_);
      ASSERT_EQ(split.step_kind(), "single-launch");
      const std::size_t total = trained.loss.size();
      DeviceBuffer<float> loss(total);
      DeviceBuffer<std::int32_t> correct(total);
      poison(loss.data(), total, stream_);
      std::int64_t first = 0;
      for (const Batch& b : batches) {
        auto p = place(b, where, first, stream_);
        split.shard_gradients(p->view, 1.f / static_cast<float>(b.rows), split.gradient_buffer(),
                              loss.data(), correct.data());
        split.apply_gradients(split.gradient_buffer());
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        first += b.rows;
      }
      EXPECT_TRUE(bitwise_equal(split.parameters(), trained.params, "parameters"));
      EXPECT_TRUE(bitwise_equal(to_host(loss.data(), total, stream_), trained.loss, "loss"));
      EXPECT_TRUE(
          bitwise_equal(to_host(correct.data(), total, stream_), trained.correct, "correct"));
      const TrainOut none = train(cfg, {}, where, stream_);
      EXPECT_FALSE(bitwise_equal(trained.params, none.params, "the steps moved the parameters"));

      const Batch& b = batches.back();
      const float scale = 1.f / static_cast<float>(b.rows);
      const ShardOut g = shard_gradients(cfg, b, where, scale, stream_);
      const ShardOut half = shard_gradients(cfg, b, where, scale / 2.f, stream_);
      std::vector<float> doubled = half.grads;
      for (float& e : doubled) e *= 2.f;
      EXPECT_TRUE(bitwise_equal(doubled, g.grads, "2 × gradients at grad_scale / 2"));
      EXPECT_TRUE(bitwise_equal(shard_gradients(cfg, b, where, scale, stream_, 1).grads, g.grads,
                                "gradients at a 4-byte-aligned address"));
    }
  Mlp mlp(mlp_config(256, 256, true), stream_);
  DeviceBuffer<float> g(mlp.parameter_count()), loss(1);
  DeviceBuffer<std::int32_t> correct(1);
  poison(g.data(), g.size(), stream_);
  const Batch one = make_batch(1, 113);
  auto p = place(one, XPlace::Device, 0, stream_);
  BatchView empty = p->view;
  empty.rows = 0;
  mlp.shard_gradients(empty, 1.f, g.data(), loss.data(), correct.data());
  EXPECT_TRUE(bitwise_equal(to_host(g.data(), g.size(), stream_), std::vector<float>(g.size(), 0.f),
                            "no rows: zero gradients"));
}

}  // namespace
