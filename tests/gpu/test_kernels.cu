// test_kernels.cu: every kernel of kernels/layerwise/ and kernels/common/ (normalize_u8,
// bias_act, relu_backward) and both Gemm backends against the CPU reference
// (kernels/reference/cpu_reference.h) on random inputs of odd and real MLP shapes.
// Outputs are poisoned with NaN before every launch, so an element a kernel forgets to write
// fails the comparison. Skips (GTEST_SKIP) when no CUDA device is present.
//
// Tolerances (|got - ref| <= atol + rtol·|ref|; ref accumulated in double):
//  * fp32 GEMM: every output is an fp32 chain of K multiply-adds of inputs in [-1, 1]. Each
//    step rounds with relative error <= 2^-24 of a partial sum that grows like sqrt(k)/3, so
//    the error is a random walk of roughly sqrt(K)·2^-24·sqrt(K)/3. A numpy simulation of
//    sequential fp32 accumulation (unfused, i.e. worse than fmaf) gives max errors of 4.5e-5
//    at 1000×256×784 and 5.8e-5 at 784×256×1000: about 1/100 of atol = 1e-4·sqrt(K)
//    (2.8e-3 at K = 784). That margin also covers cuBLAS's own (blocked, maybe split-K)
//    order. A wrong layout, a missing k term or a wrong epilogue gives errors of order
//    0.1..sqrt(K)/3. rtol = 1e-4 covers the bias add of the epilogue.
//  * TF32 GEMM (cuBLAS tensor cores): inputs lose 13 mantissa bits (relative error up to
//    2^-10 per operand if truncated, 2^-11 if rounded), which also biases the sum by up to
//    ~1e-3·|ref|. Simulated max errors: 0.029 (truncate) / 0.012 (round) at 1000×256×784,
//    0.038 at 784×256×1000, i.e. <= 0.18 of atol = 2e-3·sqrt(K) + rtol = 1e-2 (0.056 at
//    K = 784).
//  * Elementwise ops (normalize, bias_act, relu_backward, sgd) use the same float expressions
//    as the reference (sgd: explicit fma on both sides): compared bitwise (atol = rtol = 0).
//  * bias_grad: fp32 sum of M values in [-1, 1]; error ~sqrt(M)·2^-24·|partial sums|, ~1e-5 at
//    M = 1000. atol = 2e-6·M + 1e-6 (2e-3 at M = 1000), rtol = 1e-5.
//  * softmax_xent: expf/logf are accurate to 2 ulp, the fp32 exp-sum adds ~C·2^-24 relative
//    in the worst case (6e-6 at C = 100). loss: atol 2e-5, rtol 1e-5. dlogits: rtol 1e-4 and
//    atol 1e-5·grad_scale (p - 1 at the label cancels, leaving ~6e-6 absolute before scaling).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "kernels/common/gemm.h"
#include "kernels/common/pixel_norm.h"
#include "kernels/layerwise/layer_kernels.h"
#include "kernels/reference/cpu_reference.h"
#include "kernel_test_support.h"

namespace {

using namespace memstrat::kernel_testing;  // NOLINT: shared test helpers

using memstrat::DeviceBuffer;
using memstrat::cpu_ref::compare;
using memstrat::kernels::Epilogue;
using memstrat::kernels::Gemm;
using memstrat::kernels::GemmBackend;
namespace ref = memstrat::cpu_ref;
namespace k = memstrat::kernels;

// ---- helpers ---------------------------------------------------------------------------

Tol fp32_gemm_tol(int K) { return {1e-4 * std::sqrt(std::max(K, 1)), 1e-4}; }
Tol tf32_gemm_tol(int K) { return {2e-3 * std::sqrt(std::max(K, 1)), 1e-2}; }

class Kernels : public WithGpuStream<> {};

// ---- GEMM ------------------------------------------------------------------------------

enum class Layout { NN, NT, TN };
const char* name(Layout l) { return l == Layout::NN ? "nn" : l == Layout::NT ? "nt" : "tn"; }
const char* name(Epilogue e) {
  return e == Epilogue::None ? "none" : e == Epilogue::Bias ? "bias" : "bias+relu";
}

struct Shape {
  int M, N, K;
};

// Every combination of odd sizes, plus 784 (the MNIST input width) in every position.
std::vector<Shape> odd_shapes() {
  const int sizes[] = {1, 7, 33, 129, 257};
  std::vector<Shape> v;
  for (int m : sizes)
    for (int n : sizes)
      for (int kk : sizes) v.push_back({m, n, kk});
  const std::vector<Shape> with784 = {{784, 7, 33},   {33, 784, 129}, {129, 33, 784},
                                      {784, 784, 1},  {1, 784, 784},  {257, 129, 784},
                                      {784, 257, 33}, {7, 1, 784},    {784, 1, 7}};
  v.insert(v.end(), with784.begin(), with784.end());
  return v;
}

// The MLP's own GEMMs (784 -> 256 -> 10, batch 256 and 1000).
std::vector<Shape> mlp_shapes(Layout l) {
  switch (l) {
    case Layout::NN:  // Z1 = X·W1, Z2 = H·W2
      return {{256, 256, 784}, {256, 10, 256}, {1000, 256, 784}, {1000, 10, 256}};
    case Layout::NT:  // dH = dZ2·W2^T
      return {{256, 256, 10}, {1000, 256, 10}};
    case Layout::TN:  // dW1 = X^T·dZ1, dW2 = H^T·dZ2
      return {{784, 256, 256}, {256, 10, 256}, {784, 256, 1000}, {256, 10, 1000}};
  }
  return {};
}

struct GemmCase {
  Layout layout;
  Shape s;
  Epilogue ep = Epilogue::None;  // nn only
  bool mask = false;             // nt only
};

// Runs one GEMM through `g` and returns whether it matches the reference.
::testing::AssertionResult check_gemm(const Gemm& g, const GemmCase& c, Tol tol,
                                      cudaStream_t stream) {
  const int M = c.s.M, N = c.s.N, K = c.s.K;
  std::mt19937 rng(
      seed_of(static_cast<int>(c.layout) * 16 + static_cast<int>(c.ep) * 2 + c.mask, M, N, K));
  const auto hA = random_floats(static_cast<std::size_t>(M) * K, rng);
  const auto hB = random_floats(static_cast<std::size_t>(K) * N, rng);
  const auto hbias = random_floats(N, rng);
  const auto hmask = random_floats(static_cast<std::size_t>(M) * N, rng);
  std::vector<float> want(static_cast<std::size_t>(M) * N);
  const float* mask_h = c.mask ? hmask.data() : nullptr;
  switch (c.layout) {
    case Layout::NN:
      ref::gemm_nn(hA.data(), hB.data(), want.data(), M, N, K, hbias.data(), c.ep);
      break;
    case Layout::NT:
      ref::gemm_nt(hA.data(), hB.data(), want.data(), M, N, K, mask_h);
      break;
    case Layout::TN:
      ref::gemm_tn(hA.data(), hB.data(), want.data(), M, N, K);
      break;
  }
  auto dA = to_device(hA, stream);
  auto dB = to_device(hB, stream);
  auto dbias = to_device(hbias, stream);
  auto dmask = to_device(hmask, stream);
  DeviceBuffer<float> dC(want.size());
  poison(dC.data(), dC.size(), stream);
  switch (c.layout) {
    case Layout::NN:
      g.nn(dA.data(), dB.data(), dC.data(), M, N, K, dbias.data(), c.ep);
      break;
    case Layout::NT:
      g.nt(dA.data(), dB.data(), dC.data(), M, N, K, c.mask ? dmask.data() : nullptr);
      break;
    case Layout::TN:
      g.tn(dA.data(), dB.data(), dC.data(), M, N, K);
      break;
  }
  const auto got = to_host(dC.data(), dC.size(), stream);
  std::ostringstream what;
  what << to_string(g.backend()) << " " << name(c.layout) << " M=" << M << " N=" << N << " K=" << K;
  if (c.layout == Layout::NN) what << " epilogue=" << name(c.ep);
  if (c.layout == Layout::NT) what << " mask=" << (c.mask ? "yes" : "no");
  return matches(got, want, tol, what.str());
}

std::vector<GemmCase> all_cases(Layout l) {
  std::vector<GemmCase> cases;
  auto add = [&](Shape s) {
    if (l == Layout::NN) {
      for (Epilogue ep : {Epilogue::None, Epilogue::Bias, Epilogue::BiasRelu})
        cases.push_back({l, s, ep, false});
    } else if (l == Layout::NT) {
      cases.push_back({l, s, Epilogue::None, false});
      cases.push_back({l, s, Epilogue::None, true});
    } else {
      cases.push_back({l, s});
    }
  };
  for (Shape s : odd_shapes()) add(s);
  for (Shape s : mlp_shapes(l)) add(s);
  return cases;
}

void run_all(GemmBackend backend, Layout l, cudaStream_t stream) {
  const Gemm g(backend, /*tf32=*/false, stream);
  int failures = 0;
  for (const GemmCase& c : all_cases(l)) {
    const auto r = check_gemm(g, c, fp32_gemm_tol(c.s.K), stream);
    EXPECT_TRUE(r);
    if (!r && ++failures >= 5) FAIL() << "stopping after 5 failing shapes";
  }
}

TEST_F(Kernels, TiledGemmNnMatchesReference) { run_all(GemmBackend::Tiled, Layout::NN, stream_); }
TEST_F(Kernels, TiledGemmNtMatchesReference) { run_all(GemmBackend::Tiled, Layout::NT, stream_); }
TEST_F(Kernels, TiledGemmTnMatchesReference) { run_all(GemmBackend::Tiled, Layout::TN, stream_); }
TEST_F(Kernels, CublasGemmNnMatchesReference) { run_all(GemmBackend::Cublas, Layout::NN, stream_); }
TEST_F(Kernels, CublasGemmNtMatchesReference) { run_all(GemmBackend::Cublas, Layout::NT, stream_); }
TEST_F(Kernels, CublasGemmTnMatchesReference) { run_all(GemmBackend::Cublas, Layout::TN, stream_); }

TEST_F(Kernels, CublasTf32GemmMatchesReferenceLoosely) {
  const Gemm g(GemmBackend::Cublas, /*tf32=*/true, stream_);
  const std::vector<Shape> shapes = {{1, 1, 1}, {7, 33, 129}, {257, 129, 784}, {129, 257, 33}};
  for (Layout l : {Layout::NN, Layout::NT, Layout::TN}) {
    std::vector<Shape> all = shapes;
    for (Shape s : mlp_shapes(l)) all.push_back(s);
    for (Shape s : all) {
      GemmCase c{l, s, l == Layout::NN ? Epilogue::BiasRelu : Epilogue::None, l == Layout::NT};
      EXPECT_TRUE(check_gemm(g, c, tf32_gemm_tol(s.K), stream_));
    }
  }
}

// Zero-size outputs are a no-op; K == 0 is an empty sum (C = epilogue(0)).
TEST_F(Kernels, GemmZeroSizes) {
  for (GemmBackend backend : {GemmBackend::Tiled, GemmBackend::Cublas}) {
    SCOPED_TRACE(std::string(to_string(backend)));
    const Gemm g(backend, false, stream_);
    DeviceBuffer<float> dC(6);
    poison(dC.data(), dC.size(), stream_);
    const std::vector<float> hbias = {1.5f, -2.f, 0.25f};
    auto dbias = to_device(hbias, stream_);
    // M == 0 or N == 0: nothing written (C stays poisoned).
    g.nn(nullptr, nullptr, dC.data(), 0, 3, 4, dbias.data(), Epilogue::BiasRelu);
    g.nn(nullptr, nullptr, dC.data(), 2, 0, 4, nullptr, Epilogue::None);
    g.nt(nullptr, nullptr, dC.data(), 0, 3, 4, nullptr);
    g.tn(nullptr, nullptr, dC.data(), 2, 0, 4);
    for (float v : to_host(dC.data(), dC.size(), stream_)) EXPECT_TRUE(std::isnan(v));
    // K == 0.
    g.nn(nullptr, nullptr, dC.data(), 2, 3, 0, dbias.data(), Epilogue::BiasRelu);
    EXPECT_TRUE(matches(to_host(dC.data(), 6, stream_), {1.5f, 0.f, 0.25f, 1.5f, 0.f, 0.25f},
                        kExact, "nn K=0 bias+relu"));
    poison(dC.data(), dC.size(), stream_);
    g.tn(nullptr, nullptr, dC.data(), 2, 3, 0);
    EXPECT_TRUE(
        matches(to_host(dC.data(), 6, stream_), std::vector<float>(6, 0.f), kExact, "tn K=0"));
    poison(dC.data(), dC.size(), stream_);
    g.nt(nullptr, nullptr, dC.data(), 3, 2, 0, nullptr);
    EXPECT_TRUE(
        matches(to_host(dC.data(), 6, stream_), std::vector<float>(6, 0.f), kExact, "nt K=0"));
  }
}

// The tiled kernels must give bitwise-identical results run after run, and whatever the
// (4-byte) alignment of the input pointers: a batch's X can start anywhere in a dataset.
TEST_F(Kernels, TiledGemmIsDeterministicAndAlignmentIndependent) {
  const int M = 257, N = 129, K = 784;
  std::mt19937 rng(seed_of(99, M, N, K));
  const auto hA = random_floats(static_cast<std::size_t>(M) * K, rng);
  const auto hB = random_floats(static_cast<std::size_t>(K) * N, rng);
  const auto hbias = random_floats(N, rng);
  auto dbias = to_device(hbias, stream_);
  DeviceBuffer<float> dA(hA.size() + 4), dB(hB.size() + 4), dC(static_cast<std::size_t>(M) * N);
  std::vector<float> first_nn, first_tn, first_nt;
  for (int run = 0; run < 2; ++run) {
    for (int off = 0; off < 4; ++off) {
      SCOPED_TRACE("run " + std::to_string(run) + " offset " + std::to_string(off) + " floats");
      copy_to(dA.data() + off, hA, stream_);
      copy_to(dB.data() + (3 - off), hB, stream_);
      const float* A = dA.data() + off;
      const float* B = dB.data() + (3 - off);
      poison(dC.data(), dC.size(), stream_);
      k::gemm_nn_tiled(A, B, dC.data(), M, N, K, dbias.data(), Epilogue::BiasRelu, stream_);
      auto nn = to_host(dC.data(), dC.size(), stream_);
      poison(dC.data(), dC.size(), stream_);
      // Same buffers reinterpreted: A as K×M (tn), B as N×K (nt).
      k::gemm_tn_tiled(A, B, dC.data(), M, N, K, stream_);
      auto tn = to_host(dC.data(), dC.size(), stream_);
      poison(dC.data(), dC.size(), stream_);
      k::gemm_nt_tiled(A, B, dC.data(), M, N, K, nullptr, stream_);
      auto nt = to_host(dC.data(), dC.size(), stream_);
      if (first_nn.empty()) {
        first_nn = nn, first_tn = tn, first_nt = nt;
        for (const auto* v : {&nn, &tn, &nt})
          for (float x : *v) ASSERT_FALSE(std::isnan(x)) << "unwritten element";
      } else {
        EXPECT_TRUE(bitwise_equal(nn, first_nn, "nn"));
        EXPECT_TRUE(bitwise_equal(tn, first_tn, "tn"));
        EXPECT_TRUE(bitwise_equal(nt, first_nt, "nt"));
      }
    }
  }
}

// ---- elementwise -----------------------------------------------------------------------

TEST_F(Kernels, NormalizeU8IsBitwiseTheHostExpression) {
  const std::size_t n = 256 * 5 + 3;
  std::vector<std::uint8_t> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint8_t>((i * 7 + i / 256) % 256);
  std::vector<float> want(n);
  ref::normalize_u8(in.data(), want.data(), n);
  DeviceBuffer<std::uint8_t> din(n + 16);
  DeviceBuffer<float> dout(n + 16);
  // offset 0: the uchar4/float4 path; odd offsets: the scalar path.
  for (int off : {0, 1, 3, 4}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    copy_to(din.data() + off, in, stream_);
    poison(dout.data(), dout.size(), stream_);
    k::normalize_u8(din.data() + off, dout.data() + off, n, stream_);
    const auto got = to_host(dout.data() + off, n, stream_);
    EXPECT_TRUE(matches(got, want, kExact, "normalize_u8"));
    EXPECT_TRUE(bitwise_equal(got, want, "normalize_u8"));
  }
  // All 256 values, bitwise, and the end points exactly.
  std::vector<std::uint8_t> all(256);
  for (int v = 0; v < 256; ++v) all[v] = static_cast<std::uint8_t>(v);
  auto dall = to_device(all, stream_);
  poison(dout.data(), 256, stream_);
  k::normalize_u8(dall.data(), dout.data(), 256, stream_);
  const auto got = to_host(dout.data(), 256, stream_);
  for (int v = 0; v < 256; ++v) {
    const float h = k::normalize_pixel(static_cast<std::uint8_t>(v));
    EXPECT_EQ(std::memcmp(&got[v], &h, sizeof(float)), 0) << "pixel " << v;
  }
  EXPECT_EQ(got[0], 0.f);
  EXPECT_EQ(got[255], 1.f);
}

TEST_F(Kernels, BiasActMatchesReference) {
  const std::vector<std::pair<int, int>> shapes = {
      {1, 1}, {7, 33}, {256, 256}, {1000, 10}, {33, 257}};
  for (auto [M, N] : shapes) {
    for (int mode = 0; mode < 3; ++mode) {  // 0: bias, 1: bias + relu, 2: relu only
      std::mt19937 rng(seed_of(11, M, N, mode));
      const auto hC = random_floats(static_cast<std::size_t>(M) * N, rng);
      const auto hbias = random_floats(N, rng);
      const bool relu = mode != 0;
      const float* bias_h = mode == 2 ? nullptr : hbias.data();
      auto want = hC;
      ref::bias_act(want.data(), bias_h, M, N, relu);
      auto dC = to_device(hC, stream_);
      auto dbias = to_device(hbias, stream_);
      k::bias_act(dC.data(), mode == 2 ? nullptr : dbias.data(), M, N, relu, stream_);
      std::ostringstream what;
      what << "bias_act M=" << M << " N=" << N << " mode=" << mode;
      EXPECT_TRUE(matches(to_host(dC.data(), dC.size(), stream_), want, kExact, what.str()));
    }
  }
}

TEST_F(Kernels, ReluBackwardMatchesReference) {
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1025}, std::size_t{65537}}) {
    std::mt19937 rng(seed_of(12, static_cast<int>(n)));
    const auto hdA = random_floats(n, rng);
    auto hA = random_floats(n, rng);
    for (std::size_t i = 0; i < n; i += 5) hA[i] = (i % 10 == 0) ? 0.f : -0.f;  // A == 0 drops
    auto want = hdA;
    ref::relu_backward(want.data(), hA.data(), n);
    DeviceBuffer<float> ddA(n + 4), dA(n + 4);
    for (int off : {0, 1}) {  // 16-byte aligned (float4 path) and not (scalar path)
      copy_to(ddA.data() + off, hdA, stream_);
      copy_to(dA.data() + off, hA, stream_);
      k::relu_backward(ddA.data() + off, dA.data() + off, n, stream_);
      EXPECT_TRUE(
          matches(to_host(ddA.data() + off, n, stream_), want, kExact,
                  "relu_backward n=" + std::to_string(n) + " offset " + std::to_string(off)));
    }
  }
}

TEST_F(Kernels, BiasGradMatchesReferenceAndIsDeterministic) {
  const std::vector<std::pair<int, int>> shapes = {{1, 1},    {7, 10},    {33, 257},  {256, 256},
                                                   {256, 10}, {1000, 10}, {1025, 33}, {1000, 256}};
  for (auto [M, N] : shapes) {
    std::mt19937 rng(seed_of(13, M, N));
    const auto hdZ = random_floats(static_cast<std::size_t>(M) * N, rng);
    std::vector<float> want(N);
    ref::bias_grad(hdZ.data(), want.data(), M, N);
    auto ddZ = to_device(hdZ, stream_);
    DeviceBuffer<float> ddb(N);
    poison(ddb.data(), ddb.size(), stream_);
    k::bias_grad(ddZ.data(), ddb.data(), M, N, stream_);
    const auto got = to_host(ddb.data(), ddb.size(), stream_);
    std::ostringstream what;
    what << "bias_grad M=" << M << " N=" << N;
    EXPECT_TRUE(matches(got, want, {2e-6 * M + 1e-6, 1e-5}, what.str()));
    poison(ddb.data(), ddb.size(), stream_);
    k::bias_grad(ddZ.data(), ddb.data(), M, N, stream_);
    EXPECT_TRUE(bitwise_equal(to_host(ddb.data(), ddb.size(), stream_), got, what.str()));
  }
  // M == 0: an empty sum.
  DeviceBuffer<float> ddb(3);
  poison(ddb.data(), 3, stream_);
  k::bias_grad(nullptr, ddb.data(), 0, 3, stream_);
  EXPECT_TRUE(matches(to_host(ddb.data(), 3, stream_), {0.f, 0.f, 0.f}, kExact, "M=0"));
}

// ---- softmax cross-entropy -------------------------------------------------------------

struct SoftmaxOut {
  std::vector<float> dlogits, loss;
  std::vector<std::int32_t> correct;
};

SoftmaxOut run_softmax(const std::vector<float>& logits, const std::vector<std::int32_t>& labels,
                       int M, int C, float grad_scale, bool with_grad, cudaStream_t s) {
  auto dlog = to_device(logits, s);
  auto dlab = to_device(labels, s);
  DeviceBuffer<float> dd(static_cast<std::size_t>(M) * C), dloss(M);
  DeviceBuffer<std::int32_t> dcorr(M);
  poison(dd.data(), dd.size(), s);
  poison(dloss.data(), dloss.size(), s);
  poison(dcorr.data(), dcorr.size(), s);
  k::softmax_xent(dlog.data(), dlab.data(), with_grad ? dd.data() : nullptr, dloss.data(),
                  dcorr.data(), M, C, grad_scale, s);
  SoftmaxOut o;
  o.dlogits = to_host(dd.data(), dd.size(), s);
  o.loss = to_host(dloss.data(), dloss.size(), s);
  o.correct = to_host(dcorr.data(), dcorr.size(), s);
  return o;
}

void check_softmax(const std::vector<float>& logits, const std::vector<std::int32_t>& labels, int M,
                   int C, const std::string& what, cudaStream_t s) {
  const float grad_scale = 1.f / static_cast<float>(M);
  SoftmaxOut want;
  want.dlogits.resize(logits.size());
  want.loss.resize(M);
  want.correct.resize(M);
  ref::softmax_xent(logits.data(), labels.data(), want.dlogits.data(), want.loss.data(),
                    want.correct.data(), M, C, grad_scale);
  for (bool with_grad : {true, false}) {
    const std::string w = what + (with_grad ? "" : " (dlogits = nullptr)");
    const SoftmaxOut got = run_softmax(logits, labels, M, C, grad_scale, with_grad, s);
    EXPECT_TRUE(matches(got.loss, want.loss, {2e-5, 1e-5}, w + " loss"));
    EXPECT_EQ(got.correct, want.correct) << w << " correct";
    if (with_grad) {
      EXPECT_TRUE(matches(got.dlogits, want.dlogits, {1e-5 * grad_scale, 1e-4}, w + " dlogits"));
    } else {
      for (float v : got.dlogits) ASSERT_TRUE(std::isnan(v)) << w << ": dlogits was written";
    }
  }
}

TEST_F(Kernels, SoftmaxXentMatchesReference) {
  const std::vector<std::pair<int, int>> shapes = {{1, 1},     {1, 10},  {7, 3},   {256, 10},
                                                   {1000, 10}, {33, 33}, {5, 100}, {9, 65}};
  for (auto [M, C] : shapes) {
    std::mt19937 rng(seed_of(14, M, C));
    const auto logits = random_floats(static_cast<std::size_t>(M) * C, rng, -5.f, 5.f);
    std::uniform_int_distribution<int> lab(0, C - 1);
    std::vector<std::int32_t> labels(M);
    for (auto& l : labels) l = lab(rng);
    check_softmax(logits, labels, M, C,
                  "softmax_xent M=" + std::to_string(M) + " C=" + std::to_string(C), stream_);
  }
}

TEST_F(Kernels, SoftmaxXentLargeLogitsAndTies) {
  // Logits around 1000: exp would overflow without the max subtraction.
  {
    const int M = 64, C = 10;
    std::mt19937 rng(seed_of(15, M, C));
    const auto logits = random_floats(static_cast<std::size_t>(M) * C, rng, 990.f, 1010.f);
    std::vector<std::int32_t> labels(M);
    for (int i = 0; i < M; ++i) labels[i] = i % C;
    check_softmax(logits, labels, M, C, "large logits", stream_);
    const auto got = run_softmax(logits, labels, M, C, 1.f / M, true, stream_);
    for (float v : got.loss) EXPECT_TRUE(std::isfinite(v));
  }
  // Ties: the first maximum is the prediction, also across lanes (C = 100: columns j and
  // j + 32·t live on the same lane, others on different lanes).
  {
    const int C = 100;
    const std::vector<std::pair<int, int>> ties = {{3, 7}, {5, 37}, {40, 70}, {0, 99}, {31, 32}};
    const int M = static_cast<int>(ties.size()) * 2;
    std::vector<float> logits(static_cast<std::size_t>(M) * C, 0.f);
    std::vector<std::int32_t> labels(M), expect_correct(M);
    for (int t = 0; t < static_cast<int>(ties.size()); ++t) {
      for (int r = 0; r < 2; ++r) {
        const int row = 2 * t + r;
        float* x = logits.data() + static_cast<std::size_t>(row) * C;
        for (int j = 0; j < C; ++j) x[j] = -0.01f * static_cast<float>((j * 37) % 11);
        x[ties[t].first] = 2.5f;
        x[ties[t].second] = 2.5f;
        labels[row] = r == 0 ? ties[t].first : ties[t].second;
        expect_correct[row] = r == 0 ? 1 : 0;
      }
    }
    const auto got = run_softmax(logits, labels, M, C, 1.f / M, true, stream_);
    EXPECT_EQ(got.correct, expect_correct);
    check_softmax(logits, labels, M, C, "ties", stream_);
  }
}

// The 1/batch factor: the gradient with grad_scale = 1/M is exactly the grad_scale = 1
// gradient divided by M (M is a power of two here, so the scaling is exact).
TEST_F(Kernels, SoftmaxXentAppliesGradScale) {
  const int M = 16, C = 10;
  std::mt19937 rng(seed_of(16, M, C));
  const auto logits = random_floats(static_cast<std::size_t>(M) * C, rng, -3.f, 3.f);
  std::vector<std::int32_t> labels(M);
  for (int i = 0; i < M; ++i) labels[i] = (i * 3) % C;
  const auto g1 = run_softmax(logits, labels, M, C, 1.f, true, stream_);
  const auto gm = run_softmax(logits, labels, M, C, 1.f / M, true, stream_);
  for (std::size_t i = 0; i < g1.dlogits.size(); ++i)
    EXPECT_EQ(gm.dlogits[i], g1.dlogits[i] / M) << i;
  for (int i = 0; i < M; ++i) {
    double row = 0;
    for (int j = 0; j < C; ++j) row += g1.dlogits[static_cast<std::size_t>(i) * C + j];
    EXPECT_NEAR(row, 0.0, 1e-6) << "row " << i;  // softmax sums to 1, minus the one-hot
    EXPECT_LT(g1.dlogits[static_cast<std::size_t>(i) * C + labels[i]], 0.f);
  }
}

// ---- SGD -------------------------------------------------------------------------------

TEST_F(Kernels, SgdUpdateMatchesReferenceBitwise) {
  // 203530 = 784·256 + 256 + 256·10 + 10, the MLP's flat parameter count.
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1025}, std::size_t{203530}}) {
    for (float momentum : {0.f, 0.9f}) {
      for (int off : {0, 1}) {  // float4 path and scalar path
        std::ostringstream what;
        what << "sgd n=" << n << " momentum=" << momentum << " offset=" << off;
        std::mt19937 rng(seed_of(17, static_cast<int>(n), static_cast<int>(momentum * 10), off));
        auto hp = random_floats(n, rng);
        std::vector<float> hv(n, 0.f);
        DeviceBuffer<float> dp(n + 4), dg(n + 4), dv(n + 4);
        copy_to(dp.data() + off, hp, stream_);
        copy_to(dv.data() + off, hv, stream_);
        for (int step = 0; step < 2; ++step) {
          const auto hg = random_floats(n, rng);
          copy_to(dg.data() + off, hg, stream_);
          ref::sgd_update(hp.data(), hg.data(), momentum > 0.f ? hv.data() : nullptr, n, 0.05f,
                          momentum);
          float* dvel = momentum > 0.f ? dv.data() + off : nullptr;
          k::sgd_update(dp.data() + off, dg.data() + off, dvel, n, 0.05f, momentum, stream_);
          EXPECT_TRUE(matches(to_host(dp.data() + off, n, stream_), hp, kExact,
                              what.str() + " params step " + std::to_string(step)));
          if (momentum > 0.f) {
            EXPECT_TRUE(matches(to_host(dv.data() + off, n, stream_), hv, kExact,
                                what.str() + " velocity step " + std::to_string(step)));
          }
        }
      }
    }
  }
}

TEST_F(Kernels, SgdMomentumTwoStepsByHand) {
  // v1 = g = [0.5, 0.25]; p1 = [0.95, -2.025]; v2 = 0.9·v1 + g = [0.95, 0.475];
  // p2 = p1 - 0.1·v2 = [0.855, -2.0725]
  auto dp = to_device(std::vector<float>{1.f, -2.f}, stream_);
  auto dg = to_device(std::vector<float>{0.5f, 0.25f}, stream_);
  auto dv = to_device(std::vector<float>{0.f, 0.f}, stream_);
  k::sgd_update(dp.data(), dg.data(), dv.data(), 2, 0.1f, 0.9f, stream_);
  k::sgd_update(dp.data(), dg.data(), dv.data(), 2, 0.1f, 0.9f, stream_);
  EXPECT_TRUE(matches(to_host(dv.data(), 2, stream_), {0.95f, 0.475f}, {1e-6, 0}, "velocity"));
  EXPECT_TRUE(matches(to_host(dp.data(), 2, stream_), {0.855f, -2.0725f}, {1e-6, 0}, "params"));
}

}  // namespace
