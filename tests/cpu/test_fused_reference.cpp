// test_fused_reference.cpp: the CPU references of the fused one-hidden-layer step
// (cpu_ref::fused_head, cpu_ref::fused_update) against values worked out by hand. The GPU
// kernels are compared with these references in tests/gpu/test_fused.cu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/reference/cpu_reference.h"

namespace {

namespace ref = memstrat::cpu_ref;
using memstrat::kernels::FusedUpdateArgs;

// 2 rows, hidden 2, classes 2:
//   H = [[1, 0], [0.5, 1]], W2 = [[1, -1], [2, 3]] (W2[j][c]), b2 = [0, 1]
//   logits: row 0 = [1·1 + 0·2, 1·(-1) + 0·3] + b2 = [1, 0]
//           row 1 = [0.5 + 2, -0.5 + 3] + b2 = [2.5, 3.5]
//   with q = 1 / (1 + e^-1) = softmax of the larger of two logits one apart:
//   row 0 (label 0): p = [q, 1-q], loss = -log q, argmax 0 -> correct
//   row 1 (label 1): p = [1-q, q], loss = -log q, argmax 1 -> correct
//   dlogits (grad_scale 0.5): row 0 = [(q-1)/2, (1-q)/2], row 1 = [(1-q)/2, (q-1)/2]
//   dH[r][j] = H[r][j] > 0 ? sum_c dlogits[r][c]·W2[j][c] : 0, with d = (1-q)/2:
//     row 0: j0 = -d·1 + d·(-1) = -2d, j1 masked (H = 0) -> 0
//     row 1: j0 = d·1 - d·(-1) = 2d,   j1 = d·2 - d·3 = -d
TEST(FusedReference, HeadByHand) {
  const std::vector<float> H = {1.f, 0.f, 0.5f, 1.f};
  const std::vector<float> W2 = {1.f, -1.f, 2.f, 3.f};
  const std::vector<float> b2 = {0.f, 1.f};
  const std::vector<std::int32_t> y = {0, 1};
  std::vector<float> dl(4), dH(4), loss(2);
  std::vector<std::int32_t> correct(2);
  ref::fused_head(H.data(), W2.data(), b2.data(), y.data(), dl.data(), dH.data(), loss.data(),
                  correct.data(), 2, 2, 2, 0.5f);
  const double q = 1.0 / (1.0 + std::exp(-1.0));
  const double d = (1.0 - q) / 2.0;
  EXPECT_NEAR(loss[0], -std::log(q), 1e-6);
  EXPECT_NEAR(loss[1], -std::log(q), 1e-6);
  EXPECT_EQ(correct[0], 1);
  EXPECT_EQ(correct[1], 1);
  EXPECT_NEAR(dl[0], -d, 1e-7);
  EXPECT_NEAR(dl[1], d, 1e-7);
  EXPECT_NEAR(dl[2], d, 1e-7);
  EXPECT_NEAR(dl[3], -d, 1e-7);
  EXPECT_NEAR(dH[0], -2 * d, 1e-7);
  EXPECT_EQ(dH[1], 0.f) << "masked: H[0][1] == 0";
  EXPECT_NEAR(dH[2], 2 * d, 1e-7);
  EXPECT_NEAR(dH[3], -d, 1e-7);
}

// A tie (logits [2, 2]) predicts the first class; a label outside [0, C) gives loss NaN,
// correct 0 and no -1 term; without dlogits neither gradient is written.
TEST(FusedReference, HeadTiesBadLabelsAndEvaluation) {
  const std::vector<float> H = {1.f, 1.f};  // 1 row, hidden 2
  const std::vector<float> W2 = {1.f, 1.f, 1.f, 1.f};
  const std::vector<float> b2 = {0.f, 0.f};
  std::vector<float> dl(2), dH(2), loss(1);
  std::vector<std::int32_t> correct(1);
  const std::vector<std::int32_t> second = {1};
  ref::fused_head(H.data(), W2.data(), b2.data(), second.data(), dl.data(), dH.data(), loss.data(),
                  correct.data(), 1, 2, 2, 1.f);
  EXPECT_EQ(correct[0], 0) << "tie: the first maximum (class 0) is the prediction";
  EXPECT_NEAR(loss[0], std::log(2.0), 1e-6);
  EXPECT_NEAR(dl[0], 0.5, 1e-7);
  EXPECT_NEAR(dl[1], -0.5, 1e-7);
  EXPECT_NEAR(dH[0], 0.0, 1e-7);  // 0.5·1 - 0.5·1

  const std::vector<std::int32_t> bad = {7};
  ref::fused_head(H.data(), W2.data(), b2.data(), bad.data(), dl.data(), dH.data(), loss.data(),
                  correct.data(), 1, 2, 2, 1.f);
  EXPECT_TRUE(std::isnan(loss[0]));
  EXPECT_EQ(correct[0], 0);
  EXPECT_NEAR(dl[0], 0.5, 1e-7);
  EXPECT_NEAR(dl[1], 0.5, 1e-7);
  EXPECT_NEAR(dH[0], 1.0, 1e-7);  // 0.5·1 + 0.5·1

  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> untouched = {nan, nan};
  ref::fused_head(H.data(), W2.data(), b2.data(), second.data(), nullptr, untouched.data(),
                  loss.data(), correct.data(), 1, 2, 2, 1.f);
  EXPECT_TRUE(std::isnan(untouched[0]) && std::isnan(untouched[1]));
  EXPECT_NEAR(loss[0], std::log(2.0), 1e-6);
}

// rows 2, hidden 2, classes 2, lr 0.1, momentum 0.5:
//   H = [[1, 0], [0.5, 1]], dlogits = [[-0.25, 0.25], [0.75, -0.75]], dH = [[0.1, 0], [0.2, -0.3]]
//   dW2[j][c] = sum_r H[r][j]·dlogits[r][c] = [[-0.25 + 0.375, 0.25 - 0.375], [0.75, -0.75]]
//             = [[0.125, -0.125], [0.75, -0.75]]
//   db2 = [0.5, -0.5], db1 = [0.3, -0.3]
//   W2 = [[1, 2], [3, 4]], vW2 = 0  -> vW2 = dW2, W2 -= 0.1·dW2 = [[0.9875, 2.0125],
//   [2.925, 4.075]] b2 = [0.5, -0.5], vb2 = [0.2, 0.2] -> vb2 = 0.5·0.2 + db2 = [0.6, -0.4], b2 =
//   [0.44, -0.46] b1 = [1, -1], vb1 = 0 -> vb1 = [0.3, -0.3], b1 = [0.97, -0.97] W1 = [1, 2, 3],
//   gW1 = [1, -1, 0.5], vW1 = [0, 1, 0] -> vW1 = [1, -0.5, 0.5], W1 = [0.9, 2.05, 2.95]
TEST(FusedReference, UpdateByHand) {
  const std::vector<float> H = {1.f, 0.f, 0.5f, 1.f};
  const std::vector<float> dl = {-0.25f, 0.25f, 0.75f, -0.75f};
  const std::vector<float> dH = {0.1f, 0.f, 0.2f, -0.3f};
  std::vector<float> W2 = {1.f, 2.f, 3.f, 4.f}, vW2(4, 0.f);
  std::vector<float> b2 = {0.5f, -0.5f}, vb2 = {0.2f, 0.2f};
  std::vector<float> b1 = {1.f, -1.f}, vb1(2, 0.f);
  std::vector<float> W1 = {1.f, 2.f, 3.f}, vW1 = {0.f, 1.f, 0.f};
  const std::vector<float> gW1 = {1.f, -1.f, 0.5f};
  FusedUpdateArgs a;
  a.H = H.data();
  a.dlogits = dl.data();
  a.dH = dH.data();
  a.W2 = W2.data();
  a.b2 = b2.data();
  a.b1 = b1.data();
  a.vW2 = vW2.data();
  a.vb2 = vb2.data();
  a.vb1 = vb1.data();
  a.W1 = W1.data();
  a.gW1 = gW1.data();
  a.vW1 = vW1.data();
  a.n_w1 = 3;
  a.rows = 2;
  a.hidden = 2;
  a.classes = 2;
  a.lr = 0.1f;
  a.momentum = 0.5f;
  ref::fused_update(a);
  const double tol = 1e-6;
  const std::vector<double> want_vW2 = {0.125, -0.125, 0.75, -0.75};
  const std::vector<double> want_W2 = {0.9875, 2.0125, 2.925, 4.075};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(vW2[i], want_vW2[i], tol) << i;
    EXPECT_NEAR(W2[i], want_W2[i], tol) << i;
  }
  EXPECT_NEAR(vb2[0], 0.6, tol);
  EXPECT_NEAR(vb2[1], -0.4, tol);
  EXPECT_NEAR(b2[0], 0.44, tol);
  EXPECT_NEAR(b2[1], -0.46, tol);
  EXPECT_NEAR(vb1[0], 0.3, tol);
  EXPECT_NEAR(vb1[1], -0.3, tol);
  EXPECT_NEAR(b1[0], 0.97, tol);
  EXPECT_NEAR(b1[1], -0.97, tol);
  const std::vector<double> want_vW1 = {1.0, -0.5, 0.5}, want_W1 = {0.9, 2.05, 2.95};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(vW1[i], want_vW1[i], tol) << i;
    EXPECT_NEAR(W1[i], want_W1[i], tol) << i;
  }
}

// momentum 0: p -= lr·g, velocities untouched (may be nullptr).
TEST(FusedReference, UpdatePlainSgd) {
  const std::vector<float> H = {2.f};  // 1 row, hidden 1, classes 1
  const std::vector<float> dl = {0.5f};
  const std::vector<float> dH = {-1.f};
  std::vector<float> W2 = {1.f}, b2 = {1.f}, b1 = {1.f}, W1 = {1.f, 1.f};
  const std::vector<float> gW1 = {2.f, -2.f};
  FusedUpdateArgs a;
  a.H = H.data();
  a.dlogits = dl.data();
  a.dH = dH.data();
  a.W2 = W2.data();
  a.b2 = b2.data();
  a.b1 = b1.data();
  a.W1 = W1.data();
  a.gW1 = gW1.data();
  a.n_w1 = 2;
  a.rows = 1;
  a.hidden = 1;
  a.classes = 1;
  a.lr = 0.5f;
  a.momentum = 0.f;
  ref::fused_update(a);
  EXPECT_FLOAT_EQ(W2[0], 1.f - 0.5f * 1.f);  // dW2 = 2·0.5
  EXPECT_FLOAT_EQ(b2[0], 1.f - 0.5f * 0.5f);
  EXPECT_FLOAT_EQ(b1[0], 1.f + 0.5f);
  EXPECT_FLOAT_EQ(W1[0], 0.f);
  EXPECT_FLOAT_EQ(W1[1], 2.f);
}

}  // namespace
