// test_cpu_reference.cpp: the CPU references (kernels/reference/cpu_reference.h) against values
// computed by hand, compare() itself, and a finite-difference check of the reference
// backward pass of a tiny MLP. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/pixel_norm.h"
#include "kernels/reference/cpu_reference.h"

namespace {

using memstrat::cpu_ref::compare;
using memstrat::kernels::Epilogue;
namespace ref = memstrat::cpu_ref;

void expect_floats(const std::vector<float>& got, const std::vector<float>& want,
                   double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// A = [[1,2,3],[4,5,6]] (2×3), B = [[7,8],[9,10],[11,12]] (3×2):
// A·B = [[1·7+2·9+3·11, 1·8+2·10+3·12], [4·7+5·9+6·11, 4·8+5·10+6·12]] = [[58,64],[139,154]]
const std::vector<float> kA = {1, 2, 3, 4, 5, 6};
const std::vector<float> kB = {7, 8, 9, 10, 11, 12};
const std::vector<float> kAB = {58, 64, 139, 154};

TEST(CpuRef, GemmNnByHand) {
  std::vector<float> c(4, -1.f);
  ref::gemm_nn(kA.data(), kB.data(), c.data(), 2, 2, 3, nullptr, Epilogue::None);
  expect_floats(c, kAB, 0.0);
  // The other product order (B·A, 3×3) catches swapped operands.
  std::vector<float> ba(9);
  ref::gemm_nn(kB.data(), kA.data(), ba.data(), 3, 3, 2, nullptr, Epilogue::None);
  // B·A row 0 = 7·[1,2,3] + 8·[4,5,6] = [39,54,69]; row 2 = 11·[1,2,3] + 12·[4,5,6] = [59,82,105]
  expect_floats({ba[0], ba[1], ba[2], ba[6], ba[7], ba[8]}, {39, 54, 69, 59, 82, 105}, 0.0);
}

TEST(CpuRef, GemmNnEpilogues) {
  const std::vector<float> bias = {-100, -60};
  std::vector<float> c(4);
  ref::gemm_nn(kA.data(), kB.data(), c.data(), 2, 2, 3, bias.data(), Epilogue::Bias);
  expect_floats(c, {-42, 4, 39, 94}, 0.0);
  ref::gemm_nn(kA.data(), kB.data(), c.data(), 2, 2, 3, bias.data(), Epilogue::BiasRelu);
  expect_floats(c, {0, 4, 39, 94}, 0.0);
  EXPECT_THROW(ref::gemm_nn(kA.data(), kB.data(), c.data(), 2, 2, 3, nullptr, Epilogue::Bias),
               std::invalid_argument);
}

TEST(CpuRef, GemmNtByHand) {
  // B given as N×K = the transpose of kB: the same product.
  const std::vector<float> bt = {7, 9, 11, 8, 10, 12};
  std::vector<float> c(4);
  ref::gemm_nt(kA.data(), bt.data(), c.data(), 2, 2, 3, nullptr);
  expect_floats(c, kAB, 0.0);
  // Asymmetric B: [[1,0,-1],[2,1,0]] -> A·B^T = [[1-3, 2+2], [4-6, 8+5]] = [[-2,4],[-2,13]]
  const std::vector<float> b2 = {1, 0, -1, 2, 1, 0};
  ref::gemm_nt(kA.data(), b2.data(), c.data(), 2, 2, 3, nullptr);
  expect_floats(c, {-2, 4, -2, 13}, 0.0);
  // Mask keeps only entries whose mask is > 0 (0 and negatives drop).
  const std::vector<float> mask = {1, 0, -1, 0.5};
  ref::gemm_nt(kA.data(), b2.data(), c.data(), 2, 2, 3, mask.data());
  expect_floats(c, {-2, 0, 0, 13}, 0.0);
}

TEST(CpuRef, GemmTnByHand) {
  // A given as K×M = the transpose of kA: the same product.
  const std::vector<float> at = {1, 4, 2, 5, 3, 6};
  std::vector<float> c(4);
  ref::gemm_tn(at.data(), kB.data(), c.data(), 2, 2, 3);
  expect_floats(c, kAB, 0.0);
  // X^T·dZ with X 2×3 = kA, dZ 2×2 = [[1,0],[0,-1]] -> 3×2 [[1,-4],[2,-5],[3,-6]]
  const std::vector<float> dz = {1, 0, 0, -1};
  std::vector<float> dw(6);
  ref::gemm_tn(kA.data(), dz.data(), dw.data(), 3, 2, 2);
  expect_floats(dw, {1, -4, 2, -5, 3, -6}, 0.0);
}

TEST(CpuRef, GemmKZeroIsEmptySum) {
  const std::vector<float> bias = {1.5f, -2.f};
  std::vector<float> c(4, 7.f);
  ref::gemm_nn(nullptr, nullptr, c.data(), 2, 2, 0, bias.data(), Epilogue::BiasRelu);
  expect_floats(c, {1.5f, 0, 1.5f, 0}, 0.0);
}

TEST(CpuRef, NormalizeU8) {
  EXPECT_EQ(memstrat::kernels::normalize_pixel(0), 0.0f);
  EXPECT_EQ(memstrat::kernels::normalize_pixel(255), 1.0f);
  EXPECT_EQ(memstrat::kernels::normalize_pixel(128), 128.0f / 255.0f);
  EXPECT_NEAR(memstrat::kernels::normalize_pixel(128), 0.50196078431, 1e-7);
  const std::vector<std::uint8_t> in = {0, 128, 255, 51};
  std::vector<float> out(4);
  ref::normalize_u8(in.data(), out.data(), in.size());
  expect_floats(out, {0.f, 128.0f / 255.0f, 1.f, 0.2f}, 1e-7);
}

TEST(CpuRef, BiasAct) {
  std::vector<float> c = {1, -2, 3, -4, 5, -6};
  const std::vector<float> bias = {0.5f, 1.f, -3.5f};
  std::vector<float> c2 = c;
  ref::bias_act(c.data(), bias.data(), 2, 3, false);
  expect_floats(c, {1.5f, -1.f, -0.5f, -3.5f, 6.f, -9.5f}, 0.0);
  ref::bias_act(c2.data(), bias.data(), 2, 3, true);
  expect_floats(c2, {1.5f, 0.f, 0.f, 0.f, 6.f, 0.f}, 0.0);
}

TEST(CpuRef, ReluBackward) {
  std::vector<float> da = {1, 2, 3, 4, 5};
  const std::vector<float> a = {1.f, 0.f, -1.f, -0.f, 1e-30f};
  ref::relu_backward(da.data(), a.data(), da.size());
  expect_floats(da, {1, 0, 0, 0, 5}, 0.0);
}

TEST(CpuRef, BiasGrad) {
  // dZ 3×2 = [[1,2],[3,4],[5,-6]] -> column sums [9, 0]
  const std::vector<float> dz = {1, 2, 3, 4, 5, -6};
  std::vector<float> db(2, -1.f);
  ref::bias_grad(dz.data(), db.data(), 3, 2);
  expect_floats(db, {9, 0}, 0.0);
  ref::bias_grad(dz.data(), db.data(), 0, 2);  // empty sum
  expect_floats(db, {0, 0}, 0.0);
}

TEST(CpuRef, SoftmaxXentKnownValues) {
  // Row 0: logits [0,0,0], label 1: p = 1/3 each, loss = log 3, argmax 0 (first max) -> wrong.
  // Row 1: logits [1,2,3], label 2: loss = log(e^1+e^2+e^3) - 3 = log(1 + e^-1 + e^-2).
  // grad_scale = 1/2 (batch of 2): dlogits = (p - onehot) / 2.
  const std::vector<float> logits = {0, 0, 0, 1, 2, 3};
  const std::vector<std::int32_t> labels = {1, 2};
  std::vector<float> d(6), loss(2);
  std::vector<std::int32_t> correct(2, -1);
  ref::softmax_xent(logits.data(), labels.data(), d.data(), loss.data(), correct.data(), 2, 3,
                    0.5f);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), s = 1 + e1 + e2;
  EXPECT_NEAR(loss[0], std::log(3.0), 1e-6);
  EXPECT_NEAR(loss[0], 1.0986123, 1e-6);
  EXPECT_NEAR(loss[1], std::log(s), 1e-6);
  EXPECT_NEAR(loss[1], 0.40760596, 1e-6);
  EXPECT_EQ(correct[0], 0);
  EXPECT_EQ(correct[1], 1);
  expect_floats(
      d, {1.f / 6, -1.f / 3, 1.f / 6, float(e2 / s / 2), float(e1 / s / 2), float((1 / s - 1) / 2)},
      1e-7);
  EXPECT_NEAR(d[3], 0.0450153, 1e-6);
  EXPECT_NEAR(d[5], -0.1673795, 1e-6);
}

TEST(CpuRef, SoftmaxXentGradScaleIsApplied) {
  // The 1/batch factor: the same row with grad_scale 1 and 1/4 differs by exactly 4x.
  const std::vector<float> logits = {0.5f, -1.f, 2.f, 0.f};
  const std::vector<std::int32_t> labels = {3};
  std::vector<float> d1(4), d4(4);
  ref::softmax_xent(logits.data(), labels.data(), d1.data(), nullptr, nullptr, 1, 4, 1.f);
  ref::softmax_xent(logits.data(), labels.data(), d4.data(), nullptr, nullptr, 1, 4, 0.25f);
  double row_sum = 0;
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(d4[j] * 4.0, d1[j], 1e-7) << j;
    row_sum += d1[j];
  }
  EXPECT_NEAR(row_sum, 0.0, 1e-6);  // softmax sums to 1, minus the one-hot
  EXPECT_LT(d1[3], 0.f);            // the label's gradient is negative
}

TEST(CpuRef, SoftmaxXentStableAndFirstMaxWins) {
  // Huge logits: no overflow (max subtracted). Ties: the first maximum is the prediction.
  // C = 2, rows: [1000,1000] label 1, [5,7] label 1, [7,-1e4] label 0, [3,3] label 1.
  const std::vector<float> logits = {1000.f, 1000.f, 5.f, 7.f, 7.f, -1e4f, 3.f, 3.f};
  const std::vector<std::int32_t> lab = {1, 1, 0, 1};
  std::vector<float> loss(4);
  std::vector<std::int32_t> correct(4);
  ref::softmax_xent(logits.data(), lab.data(), nullptr, loss.data(), correct.data(), 4, 2, 1.f);
  EXPECT_NEAR(loss[0], std::log(2.0), 1e-6);
  EXPECT_EQ(correct[0], 0);  // tie 1000 == 1000: argmax is 0, label 1
  EXPECT_NEAR(loss[1], std::log(1 + std::exp(-2.0)), 1e-6);
  EXPECT_EQ(correct[1], 1);
  EXPECT_NEAR(loss[2], 0.0, 1e-6);
  EXPECT_EQ(correct[2], 1);
  EXPECT_EQ(correct[3], 0);  // tie [3,3], label 1
  // A label out of range is loud (NaN), never an out-of-bounds read.
  const std::vector<std::int32_t> bad = {2};
  ref::softmax_xent(logits.data(), bad.data(), nullptr, loss.data(), correct.data(), 1, 2, 1.f);
  EXPECT_TRUE(std::isnan(loss[0]));
  EXPECT_EQ(correct[0], 0);
}

TEST(CpuRef, SgdPlainTwoSteps) {
  std::vector<float> p = {1.f, -2.f};
  const std::vector<float> g = {0.5f, 0.25f};
  ref::sgd_update(p.data(), g.data(), nullptr, 2, 0.1f, 0.f);
  expect_floats(p, {0.95f, -2.025f});
  ref::sgd_update(p.data(), g.data(), nullptr, 2, 0.1f, 0.f);
  expect_floats(p, {0.9f, -2.05f});
}

TEST(CpuRef, SgdMomentumTwoSteps) {
  // v1 = g = [0.5, 0.25]; p1 = p0 - 0.1 v1 = [0.95, -2.025]
  // v2 = 0.9 v1 + g = [0.95, 0.475]; p2 = p1 - 0.1 v2 = [0.855, -2.0725]
  std::vector<float> p = {1.f, -2.f};
  std::vector<float> v = {0.f, 0.f};
  const std::vector<float> g = {0.5f, 0.25f};
  ref::sgd_update(p.data(), g.data(), v.data(), 2, 0.1f, 0.9f);
  expect_floats(v, {0.5f, 0.25f});
  expect_floats(p, {0.95f, -2.025f});
  ref::sgd_update(p.data(), g.data(), v.data(), 2, 0.1f, 0.9f);
  expect_floats(v, {0.95f, 0.475f});
  expect_floats(p, {0.855f, -2.0725f});
  EXPECT_THROW(ref::sgd_update(p.data(), g.data(), nullptr, 2, 0.1f, 0.9f), std::invalid_argument);
}

TEST(CpuRef, CompareToleranceNanAndListing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ref_v = {1.f, 100.f, 0.f, 5.f, nan, inf};
  const std::vector<float> got = {1.05f, 100.5f, nan, 5.f, nan, inf};
  auto r = compare(got.data(), ref_v.data(), got.size(), 0.1, 0.0);
  EXPECT_EQ(r.mismatches, 2u);  // 100.5 vs 100 (atol only) and NaN vs 0
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.first_mismatches.find("[1]"), std::string::npos) << r.first_mismatches;
  EXPECT_NE(r.first_mismatches.find("[2]"), std::string::npos) << r.first_mismatches;
  r = compare(got.data(), ref_v.data(), 2, 0.1, 0.01);  // rtol covers 0.5 of 100
  EXPECT_TRUE(r.ok()) << r.first_mismatches;
  EXPECT_NEAR(r.max_abs_err, 0.5, 1e-6);
  EXPECT_NEAR(r.max_rel_err, 0.05, 1e-6);
  r = compare(got.data(), ref_v.data(), got.size(), 0.1, 0.01, 0);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_TRUE(r.first_mismatches.empty());  // max_listed = 0
}

// ---- finite-difference check of the reference backward pass (the same recipe as the GPU
// test tests/gpu/test_gradcheck.cu, with the references standing in for the kernels) ------

constexpr int kIn = 5, kHid = 7, kOut = 3, kBatch = 4;

// The double-precision loss at the current parameters p = {w1, b1, w2, b2}.
double loss_double(const std::vector<double>& x, const std::vector<std::int32_t>& y,
                   const std::vector<double> (&p)[4]) {
  return ref::mlp_mean_xent(x.data(), y.data(), kBatch, kIn, kHid, kOut, p[0].data(), p[1].data(),
                            p[2].data(), p[3].data());
}

TEST(CpuRef, TinyMlpBackwardMatchesFiniteDifferences) {
  // Same recipe as the GPU test: resample until no hidden pre-activation is within 10·eps of
  // the ReLU kink (a central difference across the kink is not a derivative).
  const double eps = 1e-3;
  std::vector<float> x(kBatch * kIn), w1(kIn * kHid), b1(kHid), w2(kHid * kOut), b2(kOut);
  for (std::uint32_t seed = 2024;; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto* v : {&x, &w1, &b1, &w2, &b2})
      for (auto& e : *v) e = u(rng);
    std::vector<float> z(kBatch * kHid);
    ref::gemm_nn(x.data(), w1.data(), z.data(), kBatch, kHid, kIn, b1.data(), Epilogue::Bias);
    double m = 1e300;
    for (float v : z) m = std::min(m, std::fabs(static_cast<double>(v)));
    if (m > 10 * eps) break;
  }
  const std::vector<std::int32_t> y = {0, 2, 1, 2};

  // Forward + backward with the references (what the GPU test does with the kernels).
  std::vector<float> z1(kBatch * kHid), z2(kBatch * kOut), dz2(kBatch * kOut), loss(kBatch);
  std::vector<std::int32_t> correct(kBatch);
  ref::gemm_nn(x.data(), w1.data(), z1.data(), kBatch, kHid, kIn, b1.data(), Epilogue::BiasRelu);
  ref::gemm_nn(z1.data(), w2.data(), z2.data(), kBatch, kOut, kHid, b2.data(), Epilogue::Bias);
  ref::softmax_xent(z2.data(), y.data(), dz2.data(), loss.data(), correct.data(), kBatch, kOut,
                    1.f / kBatch);
  std::vector<float> dw2(kHid * kOut), db2(kOut), dh(kBatch * kHid), dw1(kIn * kHid), db1(kHid);
  ref::gemm_tn(z1.data(), dz2.data(), dw2.data(), kHid, kOut, kBatch);
  ref::bias_grad(dz2.data(), db2.data(), kBatch, kOut);
  ref::gemm_nt(dz2.data(), w2.data(), dh.data(), kBatch, kHid, kOut, z1.data());
  ref::gemm_tn(x.data(), dh.data(), dw1.data(), kIn, kHid, kBatch);
  ref::bias_grad(dh.data(), db1.data(), kBatch, kHid);

  std::vector<double> xd(x.begin(), x.end());
  std::vector<double> p[4] = {{w1.begin(), w1.end()},
                              {b1.begin(), b1.end()},
                              {w2.begin(), w2.end()},
                              {b2.begin(), b2.end()}};
  const std::vector<float>* grads[4] = {&dw1, &db1, &dw2, &db2};
  double mean_loss = 0;
  for (float l : loss) mean_loss += l;
  EXPECT_NEAR(mean_loss / kBatch, loss_double(xd, y, p), 1e-6);
  for (int t = 0; t < 4; ++t) {
    for (std::size_t i = 0; i < p[t].size(); ++i) {
      const double saved = p[t][i];
      p[t][i] = saved + eps;
      const double lp = loss_double(xd, y, p);
      p[t][i] = saved - eps;
      const double lm = loss_double(xd, y, p);
      p[t][i] = saved;
      const double num = (lp - lm) / (2 * eps);
      const double ana = (*grads[t])[i];
      EXPECT_NEAR(ana, num, 1e-4 + 2e-2 * std::fabs(num)) << "tensor " << t << " index " << i;
    }
  }
}

}  // namespace
