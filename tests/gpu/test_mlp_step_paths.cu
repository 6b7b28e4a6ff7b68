// test_mlp_step_paths.cu: Mlp's fused paths (the single-launch step, the cuBLASLt-fused step)
// against its layer-by-layer path: which path Mlp takes, agreement, determinism, independence of
// where the batch lives (device, pinned, managed, mapped, u8 or f32), CUDA-graph capture, and
// the evaluate forward. The kernels each path runs are tested on their own in test_fused.cu,
// test_fused_step.cu and test_kernels.cu. Skips (GTEST_SKIP) without a device.
//
// Tolerances (|got - ref| <= atol + rtol·|ref|):
//  * fused vs layer-by-layer Mlp after 3 SGD steps (784-H-10, batch 256): the two paths differ
//    only in fp32 summation order (gradients agree to ~1e-6 relative), so parameters agree to
//    ~1e-9 absolute; a ReLU unit whose pre-activation is within rounding of 0 may flip between
//    them and move a few weights by ~lr·1e-4. Parameters: atol 2e-5, rtol 1e-4; per-sample
//    losses: atol 1e-5, rtol 1e-4.
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

}  // namespace
