// test_fused.cu: the fused one-hidden-layer step's kernels: fused_head and fused_update
// (kernels/lt_fused/fused_head_update.h) against their CPU references, and the cuBLASLt wrapper
// (kernels/lt_fused/cublaslt_gemm.h) against cpu_ref GEMMs. Mlp's fused paths against its
// layer-by-layer path: test_mlp_step_paths.cu. Outputs are poisoned with NaN before every
// launch. Skips (GTEST_SKIP) without a device.
//
// Tolerances (|got - ref| <= atol + rtol·|ref|; references accumulate in double):
//  * fused_head: logits are fp32 sums of `hidden` products h·w with h in [0, 1], |w| <= 0.1;
//    the random-walk rounding error is ~sqrt(hidden)·2^-24·|partial| <= ~2e-6 at hidden 1024.
//    loss: atol 5e-5, rtol 1e-5; dlogits: the softmax moves by at most 1/4 of the logit error,
//    atol 2e-5·grad_scale, rtol 1e-4; dH: a 10-term fp32 sum of dlogits·w on top, atol
//    2e-5·grad_scale, rtol 1e-3. correct: exact, except rows whose two largest reference logits
//    are within 1e-4 (a legitimate tie-break difference). A wrong index or layout gives errors
//    of order 0.1·grad_scale and up.
//  * fused_update: gradients are fp32 sums of `rows` terms (|terms| <= 1/rows·1); error
//    ~sqrt(rows)·2^-24 relative; after one SGD step with lr 0.05: params and velocities atol 1e-6,
//    rtol 1e-5. The W1 step is elementwise with the reference's fma expressions: bitwise.
//  * GemmLt: as test_kernels.cu's fp32 GEMM tolerance, atol 1e-4·sqrt(K), rtol 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "experiments/core/mlp.h"
#include "kernels/common/epilogue.h"
#include "kernels/common/pixel_norm.h"
#include "kernels/lt_fused/cublaslt_gemm.h"
#include "kernels/lt_fused/fused_head_update.h"
#include "kernels/reference/cpu_reference.h"
#include "kernel_test_support.h"

namespace {

using namespace memstrat::kernel_testing;  // NOLINT: shared test helpers

using memstrat::DeviceBuffer;
using memstrat::ManagedBuffer;
using memstrat::PinnedBuffer;
using memstrat::cpu_ref::compare;
using memstrat::kernels::Epilogue;
using memstrat::kernels::FusedUpdateArgs;
using memstrat::kernels::GemmLt;
using memstrat::kernels::LtAlignment;
namespace ref = memstrat::cpu_ref;
namespace k = memstrat::kernels;

// ---- helpers ---------------------------------------------------------------------------

// Post-ReLU-like activations: about a third exact zeros, the rest in (0, 1].
std::vector<float> random_activations(std::size_t n, std::mt19937& rng) {
  std::vector<float> v = random_floats(n, rng, -0.5f, 1.f);
  for (auto& e : v) e = e < 0.f ? 0.f : e;
  return v;
}

class Fused : public WithGpuStream<> {};

// ---- fused_head ------------------------------------------------------------------------

struct HeadCase {
  int rows, hidden, classes;
};

struct HeadOut {
  std::vector<float> dlogits, dH, loss;
  std::vector<std::int32_t> correct;
};

struct HeadInputs {
  std::vector<float> H, W2, b2;
  std::vector<std::int32_t> labels;
};

HeadInputs head_inputs(const HeadCase& c) {
  std::mt19937 rng(seed_of(21, c.rows, c.hidden, c.classes));
  HeadInputs in;
  in.H = random_activations(static_cast<std::size_t>(c.rows) * c.hidden, rng);
  in.W2 = random_floats(static_cast<std::size_t>(c.hidden) * c.classes, rng, -0.1f, 0.1f);
  in.b2 = random_floats(static_cast<std::size_t>(c.classes), rng, -0.5f, 0.5f);
  in.labels = random_labels(c.rows, c.classes, rng);
  return in;
}

HeadOut run_head(const HeadCase& c, const HeadInputs& in, bool grads, cudaStream_t s) {
  const std::size_t rc = static_cast<std::size_t>(c.rows) * c.classes;
  const std::size_t rh = static_cast<std::size_t>(c.rows) * c.hidden;
  auto dH_in = to_device(in.H, s);
  auto dW2 = to_device(in.W2, s);
  auto db2 = to_device(in.b2, s);
  auto dlab = to_device(in.labels, s);
  DeviceBuffer<float> ddl(rc), ddH(rh), dloss(static_cast<std::size_t>(c.rows));
  DeviceBuffer<std::int32_t> dcorr(static_cast<std::size_t>(c.rows));
  poison(ddl.data(), rc, s);
  poison(ddH.data(), rh, s);
  poison(dloss.data(), dloss.size(), s);
  poison(dcorr.data(), dcorr.size(), s);
  k::fused_head(dH_in.data(), dW2.data(), db2.data(), dlab.data(), grads ? ddl.data() : nullptr,
                grads ? ddH.data() : nullptr, dloss.data(), dcorr.data(), c.rows, c.hidden,
                c.classes, 1.f / static_cast<float>(c.rows), s);
  HeadOut o;
  o.dlogits = to_host(ddl.data(), rc, s);
  o.dH = to_host(ddH.data(), rh, s);
  o.loss = to_host(dloss.data(), dloss.size(), s);
  o.correct = to_host(dcorr.data(), dcorr.size(), s);
  return o;
}

// Rows whose two largest logits (double, from the inputs) are closer than 1e-4.
std::vector<bool> near_ties(const HeadCase& c, const HeadInputs& in) {
  std::vector<bool> tie(static_cast<std::size_t>(c.rows), false);
  for (int r = 0; r < c.rows; ++r) {
    std::vector<double> z(static_cast<std::size_t>(c.classes));
    for (int cc = 0; cc < c.classes; ++cc) {
      double s = in.b2[cc];
      for (int j = 0; j < c.hidden; ++j)
        s += static_cast<double>(in.H[static_cast<std::size_t>(r) * c.hidden + j]) *
             in.W2[static_cast<std::size_t>(j) * c.classes + cc];
      z[cc] = s;
    }
    std::sort(z.begin(), z.end());
    tie[r] = c.classes > 1 && z[c.classes - 1] - z[c.classes - 2] < 1e-4;
  }
  return tie;
}

void check_head(const HeadCase& c, cudaStream_t s) {
  std::ostringstream name;
  name << "fused_head rows=" << c.rows << " hidden=" << c.hidden << " classes=" << c.classes;
  SCOPED_TRACE(name.str());
  const HeadInputs in = head_inputs(c);
  const float gs = 1.f / static_cast<float>(c.rows);
  HeadOut want;
  want.dlogits.resize(static_cast<std::size_t>(c.rows) * c.classes);
  want.dH.resize(static_cast<std::size_t>(c.rows) * c.hidden);
  want.loss.resize(static_cast<std::size_t>(c.rows));
  want.correct.resize(static_cast<std::size_t>(c.rows));
  ref::fused_head(in.H.data(), in.W2.data(), in.b2.data(), in.labels.data(), want.dlogits.data(),
                  want.dH.data(), want.loss.data(), want.correct.data(), c.rows, c.hidden,
                  c.classes, gs);
  const HeadOut got = run_head(c, in, true, s);
  EXPECT_TRUE(matches(got.loss, want.loss, {5e-5, 1e-5}, "loss"));
  EXPECT_TRUE(matches(got.dlogits, want.dlogits, {2e-5 * gs, 1e-4}, "dlogits"));
  EXPECT_TRUE(matches(got.dH, want.dH, {2e-5 * gs, 1e-3}, "dH"));
  const std::vector<bool> tie = near_ties(c, in);
  int wrong = 0;
  for (int r = 0; r < c.rows; ++r)
    if (!tie[r] && got.correct[r] != want.correct[r]) ++wrong;
  EXPECT_EQ(wrong, 0) << "sample_correct differs outside near-ties";
  // Evaluation mode: same loss / correct bits, no gradient written.
  const HeadOut ev = run_head(c, in, false, s);
  EXPECT_TRUE(bitwise_equal(ev.loss, got.loss, "eval loss"));
  EXPECT_TRUE(bitwise_equal(ev.correct, got.correct, "eval correct"));
  for (float v : ev.dlogits) ASSERT_TRUE(std::isnan(v)) << "dlogits written in eval mode";
  for (float v : ev.dH) ASSERT_TRUE(std::isnan(v)) << "dH written in eval mode";
  // Deterministic.
  const HeadOut again = run_head(c, in, true, s);
  EXPECT_TRUE(bitwise_equal(again.dlogits, got.dlogits, "dlogits rerun"));
  EXPECT_TRUE(bitwise_equal(again.dH, got.dH, "dH rerun"));
  EXPECT_TRUE(bitwise_equal(again.loss, got.loss, "loss rerun"));
}

TEST_F(Fused, HeadMatchesReference) {
  for (int hidden : {256, 1024})
    for (int rows : {1, 7, 255, 256, 1000}) check_head({rows, hidden, 10}, stream_);
  // Odd widths (a partial last lane round, hidden < 32) and other class counts.
  for (HeadCase c : {HeadCase{9, 1, 10}, HeadCase{33, 33, 10}, HeadCase{17, 100, 3},
                     HeadCase{8, 257, 16}, HeadCase{5, 64, 1}})
    check_head(c, stream_);
}

TEST_F(Fused, HeadBadLabelIsLoudAndNeverOutOfBounds) {
  const HeadCase c{4, 64, 10};
  HeadInputs in = head_inputs(c);
  in.labels = {-1, 10, 3, 1000};
  HeadOut want;
  want.dlogits.resize(40);
  want.dH.resize(256);
  want.loss.resize(4);
  want.correct.resize(4);
  ref::fused_head(in.H.data(), in.W2.data(), in.b2.data(), in.labels.data(), want.dlogits.data(),
                  want.dH.data(), want.loss.data(), want.correct.data(), 4, 64, 10, 0.25f);
  const HeadOut got = run_head(c, in, true, stream_);
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(std::isnan(got.loss[r])) << r;
    EXPECT_EQ(got.correct[r], 0) << r;
  }
  EXPECT_FALSE(std::isnan(got.loss[2]));
  EXPECT_TRUE(matches(got.dlogits, want.dlogits, {2e-5 * 0.25, 1e-4}, "dlogits"));
  EXPECT_TRUE(matches(got.dH, want.dH, {2e-5 * 0.25, 1e-3}, "dH"));
}

TEST_F(Fused, HeadRejectsShapesItCannotTake) {
  EXPECT_THROW(k::fused_head(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             1, 256, k::kFusedMaxClasses + 1, 1.f, stream_),
               std::invalid_argument);
  EXPECT_THROW(k::fused_head(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             1, 8192, 10, 1.f, stream_),
               std::invalid_argument);
  EXPECT_EQ(k::fused_mlp_unsupported(256, 10), "");
  EXPECT_EQ(k::fused_mlp_unsupported(1024, 10), "");
  EXPECT_NE(k::fused_mlp_unsupported(8192, 10), "");
  EXPECT_NE(k::fused_mlp_unsupported(256, 17), "");
  // rows == 0: a no-op.
  EXPECT_NO_THROW(k::fused_head(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                nullptr, 0, 256, 10, 1.f, stream_));
}

// ---- fused_update ----------------------------------------------------------------------

struct UpdateCase {
  int rows, hidden, classes;
  float momentum;
  std::size_t n_w1;
  int w1_offset;  // floats: 0 -> float4 path, 1 -> scalar path
};

struct UpdateState {
  std::vector<float> W2, b2, b1, vW2, vb2, vb1, W1, vW1;
};

void check_update(const UpdateCase& c, cudaStream_t s) {
  std::ostringstream name;
  name << "fused_update rows=" << c.rows << " hidden=" << c.hidden << " classes=" << c.classes
       << " momentum=" << c.momentum << " n_w1=" << c.n_w1 << " offset=" << c.w1_offset;
  SCOPED_TRACE(name.str());
  std::mt19937 rng(seed_of(31, c.rows, c.hidden, static_cast<int>(c.n_w1) + c.w1_offset));
  const std::size_t rh = static_cast<std::size_t>(c.rows) * c.hidden;
  const std::size_t rc = static_cast<std::size_t>(c.rows) * c.classes;
  const std::size_t hc = static_cast<std::size_t>(c.hidden) * c.classes;
  const float gs = 1.f / static_cast<float>(std::max(c.rows, 1));
  const auto H = random_activations(rh, rng);
  const auto dl = random_floats(rc, rng, -gs, gs);
  const auto dH = random_floats(rh, rng, -gs, gs);
  const auto gW1 = random_floats(c.n_w1, rng, -0.01f, 0.01f);
  UpdateState st;
  st.W2 = random_floats(hc, rng, -0.1f, 0.1f);
  st.b2 = random_floats(static_cast<std::size_t>(c.classes), rng, -0.1f, 0.1f);
  st.b1 = random_floats(static_cast<std::size_t>(c.hidden), rng, -0.1f, 0.1f);
  st.vW2 = random_floats(hc, rng, -0.01f, 0.01f);
  st.vb2 = random_floats(static_cast<std::size_t>(c.classes), rng, -0.01f, 0.01f);
  st.vb1 = random_floats(static_cast<std::size_t>(c.hidden), rng, -0.01f, 0.01f);
  st.W1 = random_floats(c.n_w1, rng, -0.1f, 0.1f);
  st.vW1 = random_floats(c.n_w1, rng, -0.01f, 0.01f);

  auto dH_act = to_device(H, s);
  auto d_dl = to_device(dl, s);
  auto d_dH = to_device(dH, s);
  DeviceBuffer<float> dW1(c.n_w1 + 4), dgW1(c.n_w1 + 4), dvW1(c.n_w1 + 4);
  copy_to(dW1.data() + c.w1_offset, st.W1, s);
  copy_to(dgW1.data() + c.w1_offset, gW1, s);
  copy_to(dvW1.data() + c.w1_offset, st.vW1, s);
  auto dW2 = to_device(st.W2, s), db2 = to_device(st.b2, s), db1 = to_device(st.b1, s);
  auto dvW2 = to_device(st.vW2, s), dvb2 = to_device(st.vb2, s), dvb1 = to_device(st.vb1, s);

  FusedUpdateArgs a;
  a.rows = c.rows;
  a.hidden = c.hidden;
  a.classes = c.classes;
  a.lr = 0.05f;
  a.momentum = c.momentum;
  a.n_w1 = c.n_w1;
  UpdateState want = st;
  a.H = H.data();
  a.dlogits = dl.data();
  a.dH = dH.data();
  a.W2 = want.W2.data();
  a.b2 = want.b2.data();
  a.b1 = want.b1.data();
  a.vW2 = want.vW2.data();
  a.vb2 = want.vb2.data();
  a.vb1 = want.vb1.data();
  a.W1 = want.W1.data();
  a.gW1 = gW1.data();
  a.vW1 = want.vW1.data();
  ref::fused_update(a);

  a.H = dH_act.data();
  a.dlogits = d_dl.data();
  a.dH = d_dH.data();
  a.W2 = dW2.data();
  a.b2 = db2.data();
  a.b1 = db1.data();
  a.vW2 = dvW2.data();
  a.vb2 = dvb2.data();
  a.vb1 = dvb1.data();
  a.W1 = dW1.data() + c.w1_offset;
  a.gW1 = dgW1.data() + c.w1_offset;
  a.vW1 = dvW1.data() + c.w1_offset;
  k::fused_update(a, s);

  const Tol tol{1e-6, 1e-5};
  EXPECT_TRUE(matches(to_host(dW2.data(), hc, s), want.W2, tol, "W2"));
  EXPECT_TRUE(matches(to_host(db2.data(), db2.size(), s), want.b2, tol, "b2"));
  EXPECT_TRUE(matches(to_host(db1.data(), db1.size(), s), want.b1, tol, "b1"));
  EXPECT_TRUE(matches(to_host(dvW2.data(), hc, s), want.vW2, tol, "vW2"));
  EXPECT_TRUE(matches(to_host(dvb2.data(), dvb2.size(), s), want.vb2, tol, "vb2"));
  EXPECT_TRUE(matches(to_host(dvb1.data(), dvb1.size(), s), want.vb1, tol, "vb1"));
  EXPECT_TRUE(matches(to_host(dW1.data() + c.w1_offset, c.n_w1, s), want.W1, kExact, "W1"));
  EXPECT_TRUE(matches(to_host(dvW1.data() + c.w1_offset, c.n_w1, s), want.vW1, kExact, "vW1"));
}

TEST_F(Fused, UpdateMatchesReference) {
  for (int hidden : {256, 1024})
    for (int rows : {1, 7, 255, 256, 1000})
      check_update({rows, hidden, 10, 0.9f, static_cast<std::size_t>(784) * hidden, 0}, stream_);
  check_update({256, 256, 10, 0.f, 784 * 256, 0}, stream_);  // plain SGD: velocities untouched
  check_update({33, 33, 10, 0.9f, 1001, 1}, stream_);        // scalar W1 path, odd n
  check_update({9, 1, 3, 0.9f, 7, 0}, stream_);              // n % 4 != 0: scalar path
  check_update({5, 100, 16, 0.5f, 0, 0}, stream_);           // no W1
  check_update({0, 64, 10, 0.9f, 64, 0}, stream_);           // rows == 0: zero gradients
}

TEST_F(Fused, UpdateIsDeterministic) {
  const int rows = 256, hidden = 256, classes = 10;
  std::mt19937 rng(seed_of(32));
  const auto H = random_activations(static_cast<std::size_t>(rows) * hidden, rng);
  const auto dl = random_floats(static_cast<std::size_t>(rows) * classes, rng, -0.01f, 0.01f);
  const auto dH = random_floats(static_cast<std::size_t>(rows) * hidden, rng, -0.01f, 0.01f);
  const auto W2 = random_floats(static_cast<std::size_t>(hidden) * classes, rng);
  auto dHa = to_device(H, stream_), ddl = to_device(dl, stream_), ddH = to_device(dH, stream_);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    auto dW2 = to_device(W2, stream_);
    auto db =
        to_device(std::vector<float>(static_cast<std::size_t>(hidden + classes), 0.f), stream_);
    auto dv = to_device(std::vector<float>(W2.size() + hidden + classes, 0.f), stream_);
    FusedUpdateArgs a;
    a.H = dHa.data();
    a.dlogits = ddl.data();
    a.dH = ddH.data();
    a.W2 = dW2.data();
    a.b1 = db.data();
    a.b2 = db.data() + hidden;
    a.vW2 = dv.data();
    a.vb1 = dv.data() + W2.size();
    a.vb2 = dv.data() + W2.size() + hidden;
    a.rows = rows;
    a.hidden = hidden;
    a.classes = classes;
    a.lr = 0.05f;
    a.momentum = 0.9f;
    k::fused_update(a, stream_);
    auto got = to_host(dW2.data(), W2.size(), stream_);
    const auto b = to_host(db.data(), db.size(), stream_);
    got.insert(got.end(), b.begin(), b.end());
    if (run == 0) {
      first = got;
    } else {
      EXPECT_TRUE(bitwise_equal(got, first, "run " + std::to_string(run)));
    }
  }
}

// ---- GemmLt ----------------------------------------------------------------------------

struct Shape {
  int M, N, K;
};
Tol fp32_gemm_tol(int K) { return {1e-4 * std::sqrt(std::max(K, 1)), 1e-4}; }

// nn (with epilogue ep) or tn (with beta) through GemmLt; A placed `a_off` floats into its
// buffer (declared 4-byte aligned).
std::vector<float> lt_run(GemmLt& g, bool nn, Shape s, Epilogue ep, float beta, int a_off,
                          const std::vector<float>& hA, const std::vector<float>& hB,
                          const std::vector<float>& hbias, const std::vector<float>& hC0,
                          cudaStream_t st) {
  DeviceBuffer<float> dA(hA.size() + 8);
  copy_to(dA.data() + a_off, hA, st);
  auto dB = to_device(hB, st);
  auto dbias = to_device(hbias, st);
  auto dC = to_device(hC0, st);
  if (nn) {
    poison(dC.data(), dC.size(), st);
    g.nn(dA.data() + a_off, dB.data(), dC.data(), s.M, s.N, s.K, dbias.data(), ep,
         LtAlignment{4, 16, 16});
  } else {
    if (beta == 0.f) poison(dC.data(), dC.size(), st);
    g.tn(dA.data() + a_off, dB.data(), dC.data(), s.M, s.N, s.K, beta, LtAlignment{4, 16, 16});
  }
  return to_host(dC.data(), dC.size(), st);
}

TEST_F(Fused, LtGemmMatchesReference) {
  GemmLt g(false, stream_);
  const std::vector<Shape> shapes = {{1, 1, 1},       {7, 33, 129},    {33, 7, 1},
                                     {129, 257, 33},  {256, 256, 784}, {8, 256, 784},
                                     {784, 256, 256}, {784, 1024, 8},  {1000, 10, 256}};
  int failures = 0;
  for (Shape s : shapes) {
    std::mt19937 rng(seed_of(41, s.M, s.N, s.K));
    const auto hA = random_floats(static_cast<std::size_t>(s.M) * s.K, rng);
    const auto hB = random_floats(static_cast<std::size_t>(s.K) * s.N, rng);
    const auto hbias = random_floats(static_cast<std::size_t>(s.N), rng);
    const auto hC0 = random_floats(static_cast<std::size_t>(s.M) * s.N, rng);
    for (Epilogue ep : {Epilogue::None, Epilogue::Bias, Epilogue::BiasRelu}) {
      std::vector<float> want(hC0.size());
      ref::gemm_nn(hA.data(), hB.data(), want.data(), s.M, s.N, s.K, hbias.data(), ep);
      for (int off : {0, 1}) {
        const auto got = lt_run(g, true, s, ep, 0.f, off, hA, hB, hbias, hC0, stream_);
        std::ostringstream what;
        what << "GemmLt nn M=" << s.M << " N=" << s.N << " K=" << s.K
             << " ep=" << static_cast<int>(ep) << " A offset " << off;
        const auto r = matches(got, want, fp32_gemm_tol(s.K), what.str());
        EXPECT_TRUE(r);
        if (!r && ++failures >= 5) FAIL() << "stopping after 5 failures";
      }
    }
    // tn: A is K×M here (same element count as M×K).
    for (float beta : {0.f, 0.5f}) {
      std::vector<float> want(hC0.size());
      ref::gemm_tn(hA.data(), hB.data(), want.data(), s.M, s.N, s.K);
      for (std::size_t i = 0; i < want.size(); ++i)
        want[i] =
            static_cast<float>(static_cast<double>(want[i]) + beta * static_cast<double>(hC0[i]));
      for (int off : {0, 3}) {
        const auto got =
            lt_run(g, false, s, Epilogue::None, beta, off, hA, hB, hbias, hC0, stream_);
        std::ostringstream what;
        what << "GemmLt tn M=" << s.M << " N=" << s.N << " K=" << s.K << " beta=" << beta
             << " A offset " << off;
        const auto r = matches(got, want, fp32_gemm_tol(s.K), what.str());
        EXPECT_TRUE(r);
        if (!r && ++failures >= 5) FAIL() << "stopping after 5 failures";
      }
    }
  }
  std::cout << "GemmLt: " << g.plan_count() << " plans, " << g.unfused_epilogues()
            << " with the bias epilogue as a separate bias_act\n";
}

// The algorithm is chosen for a declared 4-byte alignment of A: where A actually sits must
// not change a single bit (a batch can start anywhere in a dataset).
TEST_F(Fused, LtGemmIsBitwiseIndependentOfWhereAIs) {
  GemmLt g(false, stream_);
  for (Shape s : {Shape{256, 256, 784}, Shape{8, 1024, 784}, Shape{784, 256, 256}}) {
    std::mt19937 rng(seed_of(42, s.M, s.N, s.K));
    const auto hA = random_floats(static_cast<std::size_t>(s.M) * s.K, rng);
    const auto hB = random_floats(static_cast<std::size_t>(s.K) * s.N, rng);
    const auto hbias = random_floats(static_cast<std::size_t>(s.N), rng);
    const std::vector<float> hC0(static_cast<std::size_t>(s.M) * s.N, 0.f);
    const auto nn0 = lt_run(g, true, s, Epilogue::BiasRelu, 0.f, 0, hA, hB, hbias, hC0, stream_);
    const auto tn0 = lt_run(g, false, s, Epilogue::None, 0.f, 0, hA, hB, hbias, hC0, stream_);
    for (int off : {1, 2, 3, 4, 5, 8}) {
      SCOPED_TRACE("M=" + std::to_string(s.M) + " A offset " + std::to_string(off) + " floats");
      EXPECT_TRUE(bitwise_equal(
          lt_run(g, true, s, Epilogue::BiasRelu, 0.f, off, hA, hB, hbias, hC0, stream_), nn0,
          "nn"));
      EXPECT_TRUE(bitwise_equal(
          lt_run(g, false, s, Epilogue::None, 0.f, off, hA, hB, hbias, hC0, stream_), tn0, "tn"));
    }
  }
}

TEST_F(Fused, LtGemmChecksDeclaredAlignmentAndZeroSizes) {
  GemmLt g(false, stream_);
  DeviceBuffer<float> d(64);
  // B declared 16-byte aligned but 4 bytes off: refused.
  EXPECT_THROW(g.nn(d.data(), d.data() + 1, d.data() + 32, 2, 2, 2, nullptr, Epilogue::None,
                    LtAlignment{4, 16, 16}),
               std::invalid_argument);
  EXPECT_THROW(g.tn(d.data(), d.data(), d.data(), 2, 2, 2, 0.f, LtAlignment{4, 12, 4}),
               std::invalid_argument);
  // K == 0: C = epilogue(0).
  const std::vector<float> hbias = {1.5f, -2.f, 0.25f};
  auto dbias = to_device(hbias, stream_);
  poison(d.data(), 6, stream_);
  g.nn(nullptr, nullptr, d.data(), 2, 3, 0, dbias.data(), Epilogue::BiasRelu);
  EXPECT_TRUE(matches(to_host(d.data(), 6, stream_), {1.5f, 0.f, 0.25f, 1.5f, 0.f, 0.25f}, kExact,
                      "nn K=0"));
  poison(d.data(), 6, stream_);
  g.tn(nullptr, nullptr, d.data(), 2, 3, 0, 0.f);
  EXPECT_TRUE(matches(to_host(d.data(), 6, stream_), std::vector<float>(6, 0.f), kExact, "tn K=0"));
  EXPECT_EQ(g.plan_count(), 0u);
}

// cuBLASLt's heuristic query must not run inside a capture: an unplanned problem throws
// there, a planned one is captured.
TEST_F(Fused, LtGemmPlansOnlyOutsideACapture) {
  GemmLt g(false, stream_);
  DeviceBuffer<float> A(64 * 64), B(64 * 64), C(64 * 64);
  CUDA_CHECK(cudaMemsetAsync(A.data(), 0, A.bytes(), stream_));
  CUDA_CHECK(cudaMemsetAsync(B.data(), 0, B.bytes(), stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  g.prepare_nn(64, 64, 64, nullptr, Epilogue::None);
  ASSERT_EQ(g.plan_count(), 1u);
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  bool threw = false;
  try {
    g.nn(A.data(), B.data(), C.data(), 64, 64, 64, nullptr, Epilogue::None);  // planned
    g.nn(A.data(), B.data(), C.data(), 32, 64, 64, nullptr, Epilogue::None);  // not planned
  } catch (const std::logic_error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("prepare_"), std::string::npos) << e.what();
  }
  CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
  EXPECT_TRUE(threw);
  EXPECT_EQ(g.plan_count(), 1u);
}

}  // namespace
