// test_fused_step.cu: the single-launch training step (kernels/single_launch/) against the CPU
// reference of the same step, for batch sizes that take every phase-A tile shape (1..1024
// rows), shapes whose tiles do not divide evenly (in 36, hidden 20), uint8 and float input,
// momentum 0 and 0.9; evaluation (phases A+B only); bitwise determinism and independence
// of the grid size; several steps in one launch (run_steps) against one launch per step,
// bitwise; the gradients-only launch (run_gradients, data-parallel training) against the CPU
// reference's gradients and, bitwise, against what the training launch steps with; argument
// checks. Skips (GTEST_SKIP) without a device.
//
// Reference (kernels/reference/cpu_reference.h, double sums): H = gemm_nn(X, W1, b1, BiasRelu),
// then cpu_ref::fused_head (loss, correct, dlogits, dH), gW1 = gemm_tn(X, dH), then
// cpu_ref::fused_update (dW2, db2, db1 and the SGD step of W2, b2, b1, W1).
// Tolerances (|got - ref| <= atol + rtol·|ref|):
//  * loss: atol 5e-5, rtol 1e-5 (as test_fused.cu's fused_head: the logits are fp32 sums of
//    `hidden` + `in` terms; rounding ~1e-6);
//  * parameters after one step: the step moves a parameter by lr·|v| ~ 0.05·1e-2; fp32
//    summation order changes v by ~1e-6 relative, so params atol 1e-6, rtol 1e-5, and
//    velocities (= momentum·v0 + gradient) atol 1e-6, rtol 1e-4. A wrong index, a missing
//    chunk or a dropped row moves values by ~1e-4 and more. A hidden unit whose
//    pre-activation is within rounding of 0 could flip its ReLU between GPU and reference
//    (probability ~1e-6 per unit with these random inputs).
//  * correct: may differ only where the two largest reference logits are within 1e-4.
//  * gradients (gradients-only launch): the velocities' tolerance, atol 1e-6, rtol 1e-4 (a
//    velocity after one step is momentum·v0 + the gradient); a wrong row, scale or offset moves
//    a gradient by its own size (1e-4 and more). Hidden units whose reference pre-activation is
//    within 2e-6 of 0 in some row are left out (their gW1 column and db1 entry): fp32 rounding
//    may put them on the other side of the ReLU, which moves those entries by a row's term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "kernels/common/pixel_norm.h"
#include "kernels/lt_fused/fused_head_update.h"
#include "kernels/reference/cpu_reference.h"
#include "kernels/single_launch/step_launcher.h"
#include "kernel_test_support.h"

namespace {

using namespace memstrat::kernel_testing;  // NOLINT: shared test helpers

using memstrat::DeviceBuffer;
namespace ref = memstrat::cpu_ref;
namespace k = memstrat::kernels;

class SingleLaunch : public WithGpuStream<> {};

struct Case {
  int rows, in, hidden, classes;
  bool u8;
  float momentum;
  int max_batch = 0;  // 0: rows
};

std::string describe(const Case& c) {
  return "rows " + std::to_string(c.rows) + " in " + std::to_string(c.in) + " hidden " +
         std::to_string(c.hidden) + " classes " + std::to_string(c.classes) +
         (c.u8 ? " u8" : " f32") + " momentum " + std::to_string(c.momentum);
}

// Host state of one step: inputs and parameters.
struct Host {
  std::vector<std::uint8_t> px;
  std::vector<float> x;  // normalised as the GPU does
  std::vector<std::int32_t> y;
  std::vector<float> W1, b1, W2, b2, vW1, vb1, vW2, vb2;
};

Host make_host(const Case& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Host h;
  std::uniform_int_distribution<int> px(0, 255);
  h.px.resize(static_cast<std::size_t>(c.rows) * c.in);
  for (auto& p : h.px) p = static_cast<std::uint8_t>(px(rng) < 100 ? 0 : px(rng));
  h.x.resize(h.px.size());
  for (std::size_t i = 0; i < h.x.size(); ++i) h.x[i] = k::normalize_pixel(h.px[i]);
  std::uniform_int_distribution<int> lab(0, c.classes - 1);
  h.y.resize(static_cast<std::size_t>(c.rows));
  for (auto& v : h.y) v = lab(rng);
  const float s1 = std::sqrt(2.f / static_cast<float>(c.in)), s2 = std::sqrt(2.f / c.hidden);
  h.W1 = random_floats(static_cast<std::size_t>(c.in) * c.hidden, rng, -s1, s1);
  h.b1 = random_floats(c.hidden, rng, -0.1f, 0.1f);
  h.W2 = random_floats(static_cast<std::size_t>(c.hidden) * c.classes, rng, -s2, s2);
  h.b2 = random_floats(c.classes, rng, -0.1f, 0.1f);
  const bool mom = c.momentum > 0.f;
  h.vW1 = mom ? random_floats(h.W1.size(), rng, -0.01f, 0.01f) : std::vector<float>();
  h.vb1 = mom ? random_floats(h.b1.size(), rng, -0.01f, 0.01f) : std::vector<float>();
  h.vW2 = mom ? random_floats(h.W2.size(), rng, -0.01f, 0.01f) : std::vector<float>();
  h.vb2 = mom ? random_floats(h.b2.size(), rng, -0.01f, 0.01f) : std::vector<float>();
  return h;
}

struct Out {
  std::vector<float> W1, b1, W2, b2, vW1, vb1, vW2, vb2, loss;
  std::vector<std::int32_t> correct;
  std::vector<unsigned long long> stamps;  // run_sequence with stamp_step >= 0: [point][block]
};

// Device copies of h (inputs, parameters, velocities) and a step's workspaces for batches of
// up to max_batch rows (workspaces and outputs poisoned), with the StepArgs every step shares.
struct OnDevice {
  DeviceBuffer<float> x, W1, b1, W2, b2, vW1, vb1, vW2, vb2, H, dH, dl, part, loss;
  DeviceBuffer<std::uint8_t> px;
  DeviceBuffer<std::int32_t> y, correct;

  OnDevice(const Case& c, const Host& h, int max_batch, cudaStream_t s)
      : x(to_device(h.x, s)),
        W1(to_device(h.W1, s)),
        b1(to_device(h.b1, s)),
        W2(to_device(h.W2, s)),
        b2(to_device(h.b2, s)),
        H(static_cast<std::size_t>(max_batch) * c.hidden),
        dH(H.size()),
        dl(static_cast<std::size_t>(max_batch) * c.classes),
        part(k::step_partial_floats(max_batch, c.in, c.hidden)),
        loss(c.rows),
        px(to_device(h.px, s)),
        y(to_device(h.y, s)),
        correct(c.rows) {
    if (c.momentum > 0.f) {
      vW1 = to_device(h.vW1, s);
      vb1 = to_device(h.vb1, s);
      vW2 = to_device(h.vW2, s);
      vb2 = to_device(h.vb2, s);
    }
    poison(H.data(), H.size(), s);
    poison(dH.data(), dH.size(), s);
    poison(dl.data(), dl.size(), s);
    poison(part.data(), part.size(), s);
    poison(loss.data(), loss.size(), s);
    poison(correct.data(), correct.size(), s);
  }

  // Everything but rows and grad_scale; x, labels and outputs start at row 0.
  k::StepArgs args(const Case& c, bool train) const {
    k::StepArgs a;
    if (c.u8)
      a.x_u8 = px.data();
    else
      a.x_f32 = x.data();
    a.labels = y.data();
    a.in = c.in;
    a.hidden = c.hidden;
    a.classes = c.classes;
    a.W1 = W1.data();
    a.b1 = b1.data();
    a.W2 = W2.data();
    a.b2 = b2.data();
    if (c.momentum > 0.f) {
      a.vW1 = vW1.data();
      a.vb1 = vb1.data();
      a.vW2 = vW2.data();
      a.vb2 = vb2.data();
    }
    a.H = H.data();
    a.dH = dH.data();
    a.dlogits = dl.data();
    a.partial = part.data();
    a.sample_loss = loss.data();
    a.sample_correct = correct.data();
    a.lr = 0.05f;
    a.momentum = c.momentum;
    a.train = train;
    return a;
  }

  // Parameters, velocities (when there are any) and per-sample outputs, after the stream drains.
  Out read(cudaStream_t s) const {
    CUDA_CHECK(cudaStreamSynchronize(s));
    Out o;
    o.W1 = to_host(W1.data(), W1.size(), s);
    o.b1 = to_host(b1.data(), b1.size(), s);
    o.W2 = to_host(W2.data(), W2.size(), s);
    o.b2 = to_host(b2.data(), b2.size(), s);
    o.vW1 = to_host(vW1.data(), vW1.size(), s);
    o.vb1 = to_host(vb1.data(), vb1.size(), s);
    o.vW2 = to_host(vW2.data(), vW2.size(), s);
    o.vb2 = to_host(vb2.data(), vb2.size(), s);
    o.loss = to_host(loss.data(), loss.size(), s);
    o.correct = to_host(correct.data(), correct.size(), s);
    return o;
  }
};

// One launch of the single-launch step on copies of h.
Out run_gpu(const Case& c, const Host& h, bool train, cudaStream_t s, int blocks_per_sm = 0,
            int free_blocks = 0) {
  const int max_batch = c.max_batch > 0 ? c.max_batch : c.rows;
  const k::StepLauncher step(c.in, c.hidden, c.classes, max_batch, blocks_per_sm, free_blocks);
  const OnDevice d(c, h, max_batch, s);
  k::StepArgs a = d.args(c, train);
  a.rows = c.rows;
  a.grad_scale = 1.f / static_cast<float>(c.rows);
  step.run(a, s);
  return d.read(s);
}

struct Ref {
  Out out;
  std::vector<bool> near_tie;  // rows whose two largest logits are within 1e-4
};

Ref run_ref(const Case& c, const Host& h, bool train) {
  Ref r;
  Out& o = r.out;
  o = Out{h.W1, h.b1, h.W2, h.b2, h.vW1, h.vb1, h.vW2, h.vb2, {}, {}, {}};
  const std::size_t rh = static_cast<std::size_t>(c.rows) * c.hidden;
  std::vector<float> H(rh), dH(rh), dl(static_cast<std::size_t>(c.rows) * c.classes),
      logits(static_cast<std::size_t>(c.rows) * c.classes);
  ref::gemm_nn(h.x.data(), h.W1.data(), H.data(), c.rows, c.hidden, c.in, h.b1.data(),
               k::Epilogue::BiasRelu);
  ref::gemm_nn(H.data(), h.W2.data(), logits.data(), c.rows, c.classes, c.hidden, h.b2.data(),
               k::Epilogue::Bias);
  for (int i = 0; i < c.rows; ++i) {
    std::vector<float> z(logits.begin() + static_cast<std::ptrdiff_t>(i) * c.classes,
                         logits.begin() + static_cast<std::ptrdiff_t>(i + 1) * c.classes);
    std::sort(z.begin(), z.end());
    r.near_tie.push_back(c.classes > 1 && z[c.classes - 1] - z[c.classes - 2] < 1e-4f);
  }
  o.loss.resize(c.rows);
  o.correct.resize(c.rows);
  ref::fused_head(H.data(), h.W2.data(), h.b2.data(), h.y.data(), dl.data(), dH.data(),
                  o.loss.data(), o.correct.data(), c.rows, c.hidden, c.classes,
                  1.f / static_cast<float>(c.rows));
  if (!train) return r;
  std::vector<float> gW1(h.W1.size());
  ref::gemm_tn(h.x.data(), dH.data(), gW1.data(), c.in, c.hidden, c.rows);
  const bool mom = c.momentum > 0.f;
  k::FusedUpdateArgs u;
  u.H = H.data();
  u.dlogits = dl.data();
  u.dH = dH.data();
  u.W2 = o.W2.data();
  u.b2 = o.b2.data();
  u.b1 = o.b1.data();
  u.vW2 = mom ? o.vW2.data() : nullptr;
  u.vb2 = mom ? o.vb2.data() : nullptr;
  u.vb1 = mom ? o.vb1.data() : nullptr;
  u.W1 = o.W1.data();
  u.gW1 = gW1.data();
  u.vW1 = mom ? o.vW1.data() : nullptr;
  u.n_w1 = gW1.size();
  u.rows = c.rows;
  u.hidden = c.hidden;
  u.classes = c.classes;
  u.lr = 0.05f;
  u.momentum = c.momentum;
  ref::fused_update(u);
  return r;
}

void expect_correct_matches(const std::vector<std::int32_t>& got, const Ref& r) {
  int differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != r.out.correct[i] && !r.near_tie[i]) ++differ;
  EXPECT_EQ(differ, 0) << "sample_correct differs (outside near ties) in " << differ << " rows";
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      // every phase-A tile shape (rows <= 4, 8, 16, > 16) and c_split 1/2/4/8
      {1, 784, 256, 10, true, 0.9f},    {3, 784, 256, 10, false, 0.f},
      {8, 784, 256, 10, true, 0.9f},    {13, 784, 1024, 10, false, 0.9f},
      {64, 784, 256, 10, true, 0.9f},   {256, 784, 256, 10, true, 0.9f},
      {256, 784, 256, 10, false, 0.9f}, {300, 784, 1024, 10, true, 0.f},
      {600, 784, 256, 10, false, 0.9f}, {1024, 784, 256, 10, true, 0.9f},
      // tiles that do not divide: in 36 (phase C: 32 + 4), hidden 20 (every tile width),
      // 3 and 16 classes; a partial batch of a larger max_batch
      {37, 36, 20, 3, false, 0.9f},     {5, 36, 20, 16, true, 0.f},
      {100, 784, 256, 10, true, 0.9f, 256},
      // phase A's block-level path (hidden % 128 == 0, > 16 rows) with ragged rows and a K of
      // 9 quads (one quad per chunk: the odd-quad tail in every item); 300 × 1024 above takes
      // the per-warp path (its staged X would not fit)
      {40, 36, 128, 3, true, 0.9f},
      // the tall phase-C tile (launchers of >= 512 rows, as 600 and 1024 above) on small and
      // ragged steps: c_split 2 and 4, in 36 (a second tile row of 4 inputs), hidden 20
      {100, 784, 256, 10, true, 0.9f, 600}, {37, 36, 20, 3, false, 0.9f, 512},
  };
  return c;
}

TEST_F(SingleLaunch, StepMatchesCpuReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const Host h = make_host(c, seed_of(91, c.rows, c.hidden, c.in));
    const Out g = run_gpu(c, h, true, stream_);
    const Ref r = run_ref(c, h, true);
    EXPECT_TRUE(matches(g.loss, r.out.loss, {5e-5, 1e-5}, "loss"));
    expect_correct_matches(g.correct, r);
    EXPECT_TRUE(matches(g.W1, r.out.W1, {1e-6, 1e-5}, "W1"));
    EXPECT_TRUE(matches(g.b1, r.out.b1, {1e-6, 1e-5}, "b1"));
    EXPECT_TRUE(matches(g.W2, r.out.W2, {1e-6, 1e-5}, "W2"));
    EXPECT_TRUE(matches(g.b2, r.out.b2, {1e-6, 1e-5}, "b2"));
    if (c.momentum > 0.f) {
      EXPECT_TRUE(matches(g.vW1, r.out.vW1, {1e-6, 1e-4}, "vW1"));
      EXPECT_TRUE(matches(g.vb1, r.out.vb1, {1e-6, 1e-4}, "vb1"));
      EXPECT_TRUE(matches(g.vW2, r.out.vW2, {1e-6, 1e-4}, "vW2"));
      EXPECT_TRUE(matches(g.vb2, r.out.vb2, {1e-6, 1e-4}, "vb2"));
    }
    // The step did move every parameter block (the check can fail).
    EXPECT_FALSE(matches(g.W1, h.W1, {0, 0}, "W1 moved"));
    EXPECT_FALSE(matches(g.W2, h.W2, {0, 0}, "W2 moved"));
  }
}

TEST_F(SingleLaunch, EvaluationMatchesReferenceAndLeavesParametersAlone) {
  for (const Case& c : {Case{256, 784, 256, 10, false, 0.f}, Case{7, 784, 1024, 10, false, 0.f},
                        Case{37, 36, 20, 3, false, 0.f}}) {
    SCOPED_TRACE(describe(c));
    const Host h = make_host(c, seed_of(92, c.rows, c.hidden));
    const Out g = run_gpu(c, h, false, stream_);
    const Ref r = run_ref(c, h, false);
    EXPECT_TRUE(matches(g.loss, r.out.loss, {5e-5, 1e-5}, "loss"));
    expect_correct_matches(g.correct, r);
    EXPECT_TRUE(bitwise_equal(g.W1, h.W1, "W1 untouched"));
    EXPECT_TRUE(bitwise_equal(g.b1, h.b1, "b1 untouched"));
    EXPECT_TRUE(bitwise_equal(g.W2, h.W2, "W2 untouched"));
    EXPECT_TRUE(bitwise_equal(g.b2, h.b2, "b2 untouched"));
  }
}

// The work split depends only on the shape: 1 and 2 blocks per SM give the same bits, and so
// does running again; uint8 input gives the bits of its normalised float input.
TEST_F(SingleLaunch, BitwiseDeterministicForAnyGridSizeAndInputType) {
  for (const Case& c : {Case{256, 784, 256, 10, true, 0.9f}, Case{8, 784, 256, 10, false, 0.9f},
                        Case{1024, 784, 1024, 10, false, 0.9f}}) {
    SCOPED_TRACE(describe(c));
    const Host h = make_host(c, seed_of(93, c.rows, c.hidden));
    const Out a = run_gpu(c, h, true, stream_, 1);
    const Out again = run_gpu(c, h, true, stream_, 1);
    Case other = c;
    other.u8 = !c.u8;
    const Out t = run_gpu(other, h, true, stream_, 1);
    for (const Out* o : {&again, &t}) {
      EXPECT_TRUE(bitwise_equal(o->W1, a.W1, "W1"));
      EXPECT_TRUE(bitwise_equal(o->W2, a.W2, "W2"));
      EXPECT_TRUE(bitwise_equal(o->b1, a.b1, "b1"));
      EXPECT_TRUE(bitwise_equal(o->loss, a.loss, "loss"));
    }
    // 128 registers × 256 threads: 2 blocks fit on every SM of cc >= 7.0.
    const Out b = run_gpu(c, h, true, stream_, 2);
    EXPECT_TRUE(bitwise_equal(b.W1, a.W1, "W1 (2 blocks per SM)"));
    EXPECT_TRUE(bitwise_equal(b.vW1, a.vW1, "vW1 (2 blocks per SM)"));
    EXPECT_TRUE(bitwise_equal(b.W2, a.W2, "W2 (2 blocks per SM)"));
    EXPECT_TRUE(bitwise_equal(b.loss, a.loss, "loss (2 blocks per SM)"));
    // Block slots left to a staging kernel (zero-copy-staged's --stage-blocks): a smaller grid,
    // the same bits.
    const Out f = run_gpu(c, h, true, stream_, 2, 11);
    EXPECT_TRUE(bitwise_equal(f.W1, a.W1, "W1 (11 block slots left free)"));
    EXPECT_TRUE(bitwise_equal(f.vW1, a.vW1, "vW1 (11 block slots left free)"));
    EXPECT_TRUE(bitwise_equal(f.W2, a.W2, "W2 (11 block slots left free)"));
    EXPECT_TRUE(bitwise_equal(f.loss, a.loss, "loss (11 block slots left free)"));
  }
}

TEST_F(SingleLaunch, FreeBlocksShrinkTheGrid) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  EXPECT_EQ(k::StepLauncher(784, 256, 10, 256, 2).grid_blocks(), 2 * sms);
  EXPECT_EQ(k::StepLauncher(784, 256, 10, 256, 2, 3).grid_blocks(), 2 * sms - 3);
  EXPECT_EQ(k::StepLauncher(784, 256, 10, 256, 1, sms - 1).grid_blocks(), 1);
  EXPECT_THROW(k::StepLauncher(784, 256, 10, 256, 1, sms), std::invalid_argument);
  EXPECT_THROW(k::StepLauncher(784, 256, 10, 256, 2, -1), std::invalid_argument);
}

TEST_F(SingleLaunch, RefusesWhatItCannotRun) {
  EXPECT_NE(k::step_unsupported(783, 256, 10), "");
  EXPECT_NE(k::step_unsupported(784, 250, 10), "");
  EXPECT_NE(k::step_unsupported(784, 256, 17), "");
  EXPECT_NE(k::step_unsupported(784, 8192, 10), "");
  EXPECT_EQ(k::step_unsupported(784, 1024, 10), "");
  EXPECT_THROW(k::StepLauncher(783, 256, 10, 8), std::invalid_argument);
  const Case c{8, 784, 256, 10, false, 0.f};
  const Host h = make_host(c, 1);
  const k::StepLauncher step(784, 256, 10, 8);
  auto x = to_device(h.x, stream_, 8);
  auto y = to_device(h.y, stream_);
  DeviceBuffer<float> P(784 * 256 + 256 + 2560 + 10), H(8 * 256), dH(8 * 256), dl(80),
      part(k::step_partial_floats(8, 784, 256));
  k::StepArgs a;
  a.x_f32 = x.data();
  a.labels = y.data();
  a.rows = 8;
  a.in = 784;
  a.hidden = 256;
  a.classes = 10;
  a.W1 = P.data();
  a.b1 = P.data() + 784 * 256;
  a.W2 = a.b1 + 256;
  a.b2 = a.W2 + 2560;
  a.H = H.data();
  a.dH = dH.data();
  a.dlogits = dl.data();
  a.partial = part.data();
  a.lr = 0.05f;
  EXPECT_NO_THROW(step.run(a, stream_));
  k::StepArgs bad = a;
  bad.x_f32 = x.data() + 1;  // 4-byte aligned only
  EXPECT_THROW(step.run(bad, stream_), std::invalid_argument);
  bad = a;
  bad.rows = 9;
  EXPECT_THROW(step.run(bad, stream_), std::invalid_argument);
  bad = a;
  bad.x_u8 = reinterpret_cast<const std::uint8_t*>(x.data());  // both set
  EXPECT_THROW(step.run(bad, stream_), std::invalid_argument);
  bad = a;
  bad.momentum = 0.9f;  // no velocities
  EXPECT_THROW(step.run(bad, stream_), std::invalid_argument);
  bad = a;
  bad.hidden = 128;
  EXPECT_THROW(step.run(bad, stream_), std::invalid_argument);
  bad = a;
  bad.rows = 0;
  EXPECT_NO_THROW(step.run(bad, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// A sequence of steps over consecutive rows of h, sizes[0], sizes[1], ... rows each (summing to
// c.rows), either one run() per batch or all of them in one run_steps() launch; parameters,
// velocities and per-sample outputs after the last step. stamp_step >= 0 (one launch only): the
// launch stamps that step (Out::stamps).
Out run_sequence(const Case& c, const Host& h, const std::vector<int>& sizes, bool one_launch,
                 cudaStream_t s, int stamp_step = -1) {
  const int batch = *std::max_element(sizes.begin(), sizes.end());
  const k::StepLauncher step(c.in, c.hidden, c.classes, batch);
  const OnDevice d(c, h, batch, s);
  const k::StepArgs a = d.args(c, true);
  std::vector<k::StepBatch> table;
  int r0 = 0;
  for (const int rows : sizes) {
    const std::size_t off = static_cast<std::size_t>(r0) * c.in;
    const void* xp = c.u8 ? static_cast<const void*>(d.px.data() + off) : d.x.data() + off;
    table.push_back(step.batch(xp, c.u8, a.labels + r0, a.sample_loss + r0, a.sample_correct + r0, rows));
    r0 += rows;
  }
  if (r0 != c.rows) throw std::logic_error("run_sequence: the sizes do not add up to c.rows");
  if (one_launch) {
    auto dev = to_device(table, s);
    if (stamp_step < 0) {
      step.run_steps(a, dev.data(), static_cast<int>(table.size()), s);
      return d.read(s);
    }
    const std::size_t n = static_cast<std::size_t>(k::kStepStamps) * step.grid_blocks();
    DeviceBuffer<unsigned long long> st(n);
    CUDA_CHECK(cudaMemsetAsync(st.data(), 0, st.bytes(), s));
    k::StepArgs stamped = a;
    stamped.stamps = st.data();
    stamped.stamp_step = stamp_step;
    step.run_steps(stamped, dev.data(), static_cast<int>(table.size()), s);
    Out o = d.read(s);
    o.stamps = to_host(st.data(), n, s);
    return o;
  }
  for (const k::StepBatch& b : table) {
    k::StepArgs one = a;
    if (c.u8)
      one.x_u8 = static_cast<const std::uint8_t*>(b.x);
    else
      one.x_f32 = static_cast<const float*>(b.x);
    one.labels = b.labels;
    one.sample_loss = b.sample_loss;
    one.sample_correct = b.sample_correct;
    one.rows = b.rows;
    one.grad_scale = 1.f / static_cast<float>(b.rows);
    step.run(one, s);
  }
  return d.read(s);
}

// run_steps is the same training as one run() per batch, bit for bit: every step sees the
// parameters the previous one wrote (a missing or misplaced barrier between steps, a stale
// StepBatch slot or a wrong plan for the ragged last batch changes the bits). Batch sizes that
// take different phase-A tiles and phase-C splits, a ragged shape, a single step, and sequences
// whose steps change plan from one step to the next (600, 100, 8 and 700 rows take different
// tiles, chunks and splits), in both input types.
TEST_F(SingleLaunch, StepsInOneLaunchAreBitwiseOneLaunchPerStep) {
  struct Seq {
    Case c;  // c.rows = rows of the whole sequence
    std::vector<int> sizes;
  };
  const auto even = [](int rows, int batch) {
    std::vector<int> v;
    for (int r0 = 0; r0 < rows; r0 += batch) v.push_back(std::min(batch, rows - r0));
    return v;
  };
  for (const Seq& q : {Seq{{8 * 6 + 3, 784, 256, 10, true, 0.9f}, even(8 * 6 + 3, 8)},
                       Seq{{64 * 3 + 17, 784, 256, 10, false, 0.9f}, even(64 * 3 + 17, 64)},
                       Seq{{256 * 2 + 96, 784, 256, 10, true, 0.f}, even(256 * 2 + 96, 256)},
                       Seq{{16 * 4 + 5, 36, 20, 3, true, 0.9f}, even(16 * 4 + 5, 16)},
                       Seq{{512 + 300, 784, 128, 10, false, 0.9f}, even(512 + 300, 512)},
                       Seq{{32, 784, 256, 10, true, 0.9f}, {32}},
                       Seq{{600 * 2 + 100, 784, 256, 10, true, 0.9f}, {600, 600, 100}},
                       Seq{{100 + 600 + 8 + 700, 784, 256, 10, false, 0.9f}, {100, 600, 8, 700}},
                       Seq{{100 + 600 + 8 + 700, 784, 256, 10, true, 0.f}, {100, 600, 8, 700}}}) {
    std::string sizes;
    for (const int n : q.sizes) sizes += " " + std::to_string(n);
    SCOPED_TRACE(describe(q.c) + " steps of" + sizes);
    const Host h = make_host(q.c, seed_of(97, q.c.rows, q.sizes.front()));
    const Out per_step = run_sequence(q.c, h, q.sizes, false, stream_);
    const Out one = run_sequence(q.c, h, q.sizes, true, stream_);
    EXPECT_TRUE(bitwise_equal(one.W1, per_step.W1, "W1"));
    EXPECT_TRUE(bitwise_equal(one.b1, per_step.b1, "b1"));
    EXPECT_TRUE(bitwise_equal(one.W2, per_step.W2, "W2"));
    EXPECT_TRUE(bitwise_equal(one.b2, per_step.b2, "b2"));
    EXPECT_TRUE(bitwise_equal(one.vW1, per_step.vW1, "vW1"));
    EXPECT_TRUE(bitwise_equal(one.vb1, per_step.vb1, "vb1"));
    EXPECT_TRUE(bitwise_equal(one.vW2, per_step.vW2, "vW2"));
    EXPECT_TRUE(bitwise_equal(one.vb2, per_step.vb2, "vb2"));
    EXPECT_TRUE(bitwise_equal(one.loss, per_step.loss, "loss"));
    EXPECT_TRUE(bitwise_equal(one.correct, per_step.correct, "correct"));
    // And the steps really trained: the last batch's loss is finite and W1 moved.
    EXPECT_TRUE(std::isfinite(one.loss.back()));
    EXPECT_FALSE(bitwise_equal(one.W1, h.W1, "W1 vs initial"));
  }
}

// A stamped multi-step launch (step_bench's breakdown of the epoch launch) stamps every point
// of the step it is asked for, in phase order for every block, and trains bit for bit as the
// unstamped one (which runs a kernel built without stamps).
TEST_F(SingleLaunch, StampedMultiStepLaunchTimesOneStepAndChangesNoBits) {
  const Case c{256 * 2 + 96, 784, 256, 10, true, 0.9f};
  const std::vector<int> sizes{256, 256, 96};
  const Host h = make_host(c, seed_of(98, c.rows, 256));
  const Out plain = run_sequence(c, h, sizes, true, stream_);
  for (const int step : {0, 1, 2}) {
    SCOPED_TRACE("stamp_step " + std::to_string(step));
    const Out o = run_sequence(c, h, sizes, true, stream_, step);
    EXPECT_TRUE(bitwise_equal(o.W1, plain.W1, "W1"));
    EXPECT_TRUE(bitwise_equal(o.vW1, plain.vW1, "vW1"));
    EXPECT_TRUE(bitwise_equal(o.W2, plain.W2, "W2"));
    EXPECT_TRUE(bitwise_equal(o.loss, plain.loss, "loss"));
    const std::size_t G = o.stamps.size() / k::kStepStamps;
    ASSERT_GT(G, 0u);
    const int order[] = {k::kStampStart, k::kStampEndA, k::kStampStartB, k::kStampEndB,
                         k::kStampStartC, k::kStampGradC, k::kStampEndC};
    constexpr int kPoints = static_cast<int>(sizeof(order) / sizeof(order[0]));
    static_assert(kPoints == k::kStepStamps, "every stamp point is checked");
    for (std::size_t b = 0; b < G; ++b) {
      SCOPED_TRACE("block " + std::to_string(b));
      for (int i = 0; i < kPoints; ++i) ASSERT_NE(o.stamps[order[i] * G + b], 0ull) << "point " << order[i];
      for (int i = 1; i < kPoints; ++i)
        ASSERT_LE(o.stamps[order[i - 1] * G + b], o.stamps[order[i] * G + b]) << "point " << order[i];
    }
  }
}

// ---- gradients only (StepLauncher::run_gradients) ------------------------------------------

// Units whose pre-activation X·W1 + b1 (double sums) is within kReluMargin of 0 in some row.
constexpr double kReluMargin = 2e-6;
std::vector<bool> ambiguous_units(const Case& c, const Host& h) {
  return memstrat::kernel_testing::relu_ambiguous_units(h.x.data(), h.W1.data(), h.b1.data(),
                                                        c.rows, c.in, c.hidden, kReluMargin);
}

// The reference gradients in the flat layout, the loss gradient scaled by grad_scale, and the
// per-sample outputs (Ref::out.loss / correct).
std::vector<float> ref_grads(const Case& c, const Host& h, float grad_scale, Ref* r) {
  const std::size_t rh = static_cast<std::size_t>(c.rows) * c.hidden;
  std::vector<float> H(rh), dH(rh), dl(static_cast<std::size_t>(c.rows) * c.classes);
  ref::gemm_nn(h.x.data(), h.W1.data(), H.data(), c.rows, c.hidden, c.in, h.b1.data(),
               k::Epilogue::BiasRelu);
  *r = run_ref(c, h, false);  // loss, correct and near ties (grad_scale changes neither)
  std::vector<float> loss(static_cast<std::size_t>(c.rows));
  std::vector<std::int32_t> correct(static_cast<std::size_t>(c.rows));
  ref::fused_head(H.data(), h.W2.data(), h.b2.data(), h.y.data(), dl.data(), dH.data(), loss.data(),
                  correct.data(), c.rows, c.hidden, c.classes, grad_scale);
  const std::size_t nW1 = static_cast<std::size_t>(c.in) * c.hidden;
  const std::size_t nW2 = static_cast<std::size_t>(c.hidden) * c.classes;
  std::vector<float> g(k::step_grad_floats(c.in, c.hidden, c.classes));
  float* gW1 = g.data();
  float* gb1 = gW1 + nW1;
  float* gW2 = gb1 + c.hidden;
  float* gb2 = gW2 + nW2;
  ref::gemm_tn(h.x.data(), dH.data(), gW1, c.in, c.hidden, c.rows);
  ref::bias_grad(dH.data(), gb1, c.rows, c.hidden);
  ref::gemm_tn(H.data(), dl.data(), gW2, c.hidden, c.classes, c.rows);
  ref::bias_grad(dl.data(), gb2, c.rows, c.classes);
  return g;
}

struct GradsOut {
  std::vector<float> grads;  // the flat layout
  Out out;                   // parameters, velocities, loss, correct after the launch
};

// One gradients-only launch on copies of h, `grads` at `offset` floats into a poisoned buffer
// (offset 1: only 4-byte aligned, as a data-parallel gather slot).
GradsOut run_gpu_grads(const Case& c, const Host& h, float grad_scale, cudaStream_t s,
                       std::size_t offset = 0) {
  const int max_batch = c.max_batch > 0 ? c.max_batch : c.rows;
  const k::StepLauncher step(c.in, c.hidden, c.classes, max_batch);
  const OnDevice d(c, h, max_batch, s);
  const std::size_t n = k::step_grad_floats(c.in, c.hidden, c.classes);
  DeviceBuffer<float> g(n + offset);
  poison(g.data(), g.size(), s);
  k::StepArgs a = d.args(c, true);
  a.rows = c.rows;
  a.grad_scale = grad_scale;
  step.run_gradients(a, g.data() + offset, s);
  GradsOut o;
  o.out = d.read(s);
  o.grads = to_host(g.data() + offset, n, s);
  return o;
}

const std::vector<Case>& grad_cases() {
  static const std::vector<Case> c = {
      // hidden 256, both input types, full batches of several phase-A tile shapes
      {256, 784, 256, 10, true, 0.9f},
      {256, 784, 256, 10, false, 0.f},
      {8, 784, 256, 10, false, 0.9f},
      {1, 784, 256, 10, true, 0.9f},
      // a ragged last batch of a launcher for 256 rows
      {100, 784, 256, 10, true, 0.9f, 256},
      {100, 784, 256, 10, false, 0.f, 256},
      // tall launchers (max_batch >= kTallRows: phase C's 32 × 32 tiles), full and ragged
      {600, 784, 256, 10, false, 0.9f},
      {1024, 784, 256, 10, true, 0.9f},
      {100, 784, 256, 10, true, 0.9f, 600},
      // other widths: 1024, 128 (phase A's block-level path), and tiles that do not divide
      // (in 36, hidden 20, 3 classes), tall too
      {64, 784, 1024, 10, false, 0.9f},
      {300, 784, 1024, 10, true, 0.f},
      {40, 36, 128, 3, true, 0.9f},
      {37, 36, 20, 3, false, 0.9f},
      {37, 36, 20, 3, true, 0.9f, 512},
  };
  return c;
}

// The gradients-only launch stores the CPU reference's gradients (the loss gradient scaled by
// grad_scale: here 1 / (2 · rows), as a shard of two in data-parallel training), writes the
// per-sample loss and correctness, and leaves parameters and velocities as they were.
TEST_F(SingleLaunch, GradientsOnlyMatchCpuReference) {
  int left_out = 0, units = 0;
  for (const Case& c : grad_cases()) {
    SCOPED_TRACE(describe(c) + (c.max_batch ? " max_batch " + std::to_string(c.max_batch) : ""));
    const Host h = make_host(c, seed_of(101, c.rows, c.hidden, c.in));
    const float scale = 1.f / static_cast<float>(2 * c.rows);
    const GradsOut g = run_gpu_grads(c, h, scale, stream_);
    Ref r;
    const std::vector<float> want = ref_grads(c, h, scale, &r);
    const std::vector<bool> amb = ambiguous_units(c, h);
    left_out += static_cast<int>(std::count(amb.begin(), amb.end(), true));
    units += c.hidden;
    EXPECT_TRUE(matches(without_units(g.grads, c.in, c.hidden, amb),
                        without_units(want, c.in, c.hidden, amb), {1e-6, 1e-4}, "gradients"));
    EXPECT_TRUE(matches(g.out.loss, r.out.loss, {5e-5, 1e-5}, "loss"));
    expect_correct_matches(g.out.correct, r);
    EXPECT_TRUE(bitwise_equal(g.out.W1, h.W1, "W1 untouched"));
    EXPECT_TRUE(bitwise_equal(g.out.b1, h.b1, "b1 untouched"));
    EXPECT_TRUE(bitwise_equal(g.out.W2, h.W2, "W2 untouched"));
    EXPECT_TRUE(bitwise_equal(g.out.b2, h.b2, "b2 untouched"));
    EXPECT_TRUE(bitwise_equal(g.out.vW1, h.vW1, "vW1 untouched"));
    EXPECT_TRUE(bitwise_equal(g.out.vb2, h.vb2, "vb2 untouched"));
    // Every block of the layout is non-zero (a block left unwritten would be NaN: poisoned).
    const std::size_t b1 = static_cast<std::size_t>(c.in) * c.hidden, w2 = b1 + c.hidden,
                      b2 = w2 + static_cast<std::size_t>(c.hidden) * c.classes;
    for (auto [lo, hi, what] : {std::tuple{std::size_t{0}, b1, "gW1"}, std::tuple{b1, w2, "gb1"},
                                std::tuple{w2, b2, "gW2"}, std::tuple{b2, g.grads.size(), "gb2"}})
      EXPECT_TRUE(std::any_of(g.grads.begin() + static_cast<std::ptrdiff_t>(lo),
                              g.grads.begin() + static_cast<std::ptrdiff_t>(hi),
                              [](float v) { return v != 0.f; }))
          << what << " is all zeros";
  }
  // Units near a ReLU kink are rare (a few in a million rows × units): the comparison covers
  // nearly every gradient.
  EXPECT_LE(100 * left_out, units) << left_out << " of " << units << " units left out";
}

// What the gradients-only launch stores is what the training launch steps with, bit for bit:
// the training launch's parameters and velocities equal cpu_ref::sgd_update (the kernels' own
// fmaf expressions, bitwise) applied to the stored gradients, at grad_scale 1 / rows. The scale
// enters linearly and exactly: half the scale gives exactly half of every gradient (a power of
// two rescales without rounding). A grads pointer only 4-byte aligned gives the same bits.
TEST_F(SingleLaunch, GradientsOnlyAreWhatTheTrainingStepStepsWith) {
  for (const Case& c :
       {Case{256, 784, 256, 10, true, 0.9f}, Case{100, 784, 256, 10, false, 0.f, 256},
        Case{600, 784, 256, 10, true, 0.9f}, Case{100, 784, 256, 10, false, 0.9f, 600},
        Case{300, 784, 1024, 10, false, 0.9f}, Case{37, 36, 20, 3, true, 0.9f}}) {
    SCOPED_TRACE(describe(c) + (c.max_batch ? " max_batch " + std::to_string(c.max_batch) : ""));
    const Host h = make_host(c, seed_of(102, c.rows, c.hidden, c.in));
    const float scale = 1.f / static_cast<float>(c.rows);
    const GradsOut g = run_gpu_grads(c, h, scale, stream_);
    const Out t = run_gpu(c, h, true, stream_);  // the training launch, grad_scale 1 / rows
    std::vector<float> p;  // the parameters, flat, stepped on the host from g.grads
    std::vector<float> v;
    for (const auto* part : {&h.W1, &h.b1, &h.W2, &h.b2})
      p.insert(p.end(), part->begin(), part->end());
    for (const auto* part : {&h.vW1, &h.vb1, &h.vW2, &h.vb2})
      v.insert(v.end(), part->begin(), part->end());
    ref::sgd_update(p.data(), g.grads.data(), c.momentum > 0.f ? v.data() : nullptr, p.size(),
                    0.05f, c.momentum);
    std::vector<float> trained;
    for (const auto* part : {&t.W1, &t.b1, &t.W2, &t.b2})
      trained.insert(trained.end(), part->begin(), part->end());
    EXPECT_TRUE(bitwise_equal(trained, p, "training step's parameters vs sgd_update(gradients)"));
    if (c.momentum > 0.f) {
      std::vector<float> tv;
      for (const auto* part : {&t.vW1, &t.vb1, &t.vW2, &t.vb2})
        tv.insert(tv.end(), part->begin(), part->end());
      EXPECT_TRUE(bitwise_equal(tv, v, "training step's velocities vs sgd_update(gradients)"));
    }
    EXPECT_TRUE(bitwise_equal(g.out.loss, t.loss, "loss"));
    EXPECT_TRUE(bitwise_equal(g.out.correct, t.correct, "correct"));
    const GradsOut half = run_gpu_grads(c, h, scale / 2.f, stream_);
    std::vector<float> doubled = half.grads;
    for (float& e : doubled) e *= 2.f;
    EXPECT_TRUE(bitwise_equal(doubled, g.grads, "2 × gradients at grad_scale / 2"));
    EXPECT_FALSE(bitwise_equal(half.grads, g.grads, "gradients at grad_scale / 2 vs grad_scale"));
    const GradsOut unaligned = run_gpu_grads(c, h, scale, stream_, 1);
    EXPECT_TRUE(bitwise_equal(unaligned.grads, g.grads, "gradients at a 4-byte-aligned address"));
  }
}

TEST_F(SingleLaunch, GradientsOnlyRefusesWhatItCannotRun) {
  const Case c{8, 784, 256, 10, false, 0.9f};
  const Host h = make_host(c, 3);
  const k::StepLauncher step(784, 256, 10, 8);
  const OnDevice d(c, h, 8, stream_);
  DeviceBuffer<float> g(k::step_grad_floats(784, 256, 10) + 1);
  k::StepArgs a = d.args(c, true);
  a.rows = 8;
  a.grad_scale = 1.f / 8.f;
  a.vW1 = a.vb1 = a.vW2 = a.vb2 = nullptr;  // momentum 0.9, yet no velocity is read
  EXPECT_NO_THROW(step.run_gradients(a, g.data(), stream_));
  EXPECT_THROW(step.run(a, stream_), std::invalid_argument) << "training needs the velocities";
  EXPECT_THROW(step.run_gradients(a, nullptr, stream_), std::invalid_argument);
  EXPECT_THROW(step.run_gradients(
                   a, reinterpret_cast<float*>(reinterpret_cast<char*>(g.data()) + 2), stream_),
               std::invalid_argument)
      << "grads 2-byte aligned";
  k::StepArgs bad = a;
  bad.train = false;
  EXPECT_THROW(step.run_gradients(bad, g.data(), stream_), std::invalid_argument)
      << "gradients need the backward pass";
  unsigned long long st = 0;
  bad = a;
  bad.stamps = &st;
  EXPECT_THROW(step.run_gradients(bad, g.data(), stream_), std::invalid_argument)
      << "no stamped gradients kernel";
  bad = a;
  bad.rows = 9;
  EXPECT_THROW(step.run_gradients(bad, g.data(), stream_), std::invalid_argument);
  bad = a;
  bad.x_f32 = d.x.data() + 1;  // 4-byte aligned only
  EXPECT_THROW(step.run_gradients(bad, g.data(), stream_), std::invalid_argument);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

TEST_F(SingleLaunch, MultiStepRefusesWhatItCannotRun) {
  const k::StepLauncher step(784, 256, 10, 8);
  DeviceBuffer<float> x(8 * 784), P(784 * 256 + 256 + 2560 + 10), H(8 * 256), dH(8 * 256),
      dl(80), part(k::step_partial_floats(8, 784, 256)), loss(8);
  DeviceBuffer<std::int32_t> y(8);
  EXPECT_THROW(step.batch(x.data(), false, y.data(), loss.data(), nullptr, 0), std::invalid_argument);
  EXPECT_THROW(step.batch(x.data(), false, y.data(), loss.data(), nullptr, 9), std::invalid_argument);
  EXPECT_THROW(step.batch(x.data() + 1, false, y.data(), loss.data(), nullptr, 8),
               std::invalid_argument);  // a float X must be 16-byte aligned
  EXPECT_THROW(step.batch(nullptr, true, y.data(), loss.data(), nullptr, 8), std::invalid_argument);
  EXPECT_THROW(step.batch(x.data(), false, nullptr, loss.data(), nullptr, 8), std::invalid_argument);
  const k::StepBatch ok = step.batch(x.data(), false, y.data(), loss.data(), nullptr, 5);
  EXPECT_EQ(ok.rows, 5);
  EXPECT_EQ(ok.grad_scale, 1.f / 5.f);
  EXPECT_EQ(ok.plan.a_chunks, k::plan_step(5, 784, 256).a_chunks);
  k::StepArgs a;
  a.x_f32 = x.data();
  a.in = 784;
  a.hidden = 256;
  a.classes = 10;
  a.W1 = P.data();
  a.b1 = P.data() + 784 * 256;
  a.W2 = a.b1 + 256;
  a.b2 = a.W2 + 2560;
  a.H = H.data();
  a.dH = dH.data();
  a.dlogits = dl.data();
  a.partial = part.data();
  a.lr = 0.05f;
  auto table = to_device(std::vector<k::StepBatch>{ok, ok}, stream_);
  EXPECT_NO_THROW(step.run_steps(a, table.data(), 2, stream_));
  EXPECT_NO_THROW(step.run_steps(a, nullptr, 0, stream_));
  k::StepArgs bad = a;
  bad.train = false;
  EXPECT_THROW(step.run_steps(bad, table.data(), 2, stream_), std::invalid_argument);
  EXPECT_THROW(step.run_steps(a, nullptr, 2, stream_), std::invalid_argument);
  EXPECT_THROW(step.run_steps(a, table.data(), -1, stream_), std::invalid_argument);
  bad = a;
  bad.x_f32 = nullptr;
  EXPECT_THROW(step.run_steps(bad, table.data(), 2, stream_), std::invalid_argument);
  unsigned long long st = 0;
  bad = a;
  bad.stamps = &st;
  bad.stamp_step = 2;  // of steps 0 and 1
  EXPECT_THROW(step.run_steps(bad, table.data(), 2, stream_), std::invalid_argument);
  bad.stamp_step = -1;
  EXPECT_THROW(step.run_steps(bad, table.data(), 2, stream_), std::invalid_argument);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace
