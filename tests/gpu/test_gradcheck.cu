// test_gradcheck.cu: finite-difference gradient check of a tiny 2-layer MLP built from the
// kernels themselves (5 inputs, 7 hidden, 3 classes, batch 4), once per Gemm backend.
// Analytic gradients come from the GPU forward + backward (the same kernel sequence as the
// real MLP); numerical ones from central differences of a double-precision CPU forward.
// It catches a missing 1/batch factor, a transposed layout, a wrong ReLU mask or bias sum.
// Skips (GTEST_SKIP) when no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "kernels/common/gemm.h"
#include "kernels/layerwise/layer_kernels.h"
#include "kernels/reference/cpu_reference.h"
#include "kernel_test_support.h"

namespace {

using memstrat::DeviceBuffer;
using memstrat::kernels::Epilogue;
using memstrat::kernels::Gemm;
using memstrat::kernels::GemmBackend;

constexpr int kIn = 5, kHid = 7, kOut = 3, kBatch = 4;
constexpr double kEps = 1e-3;   // central-difference step
constexpr double kAtol = 1e-4;  // fp32 analytic vs double numeric
constexpr double kRtol = 2e-2;

struct Problem {
  std::vector<float> x, w1, b1, w2, b2;  // row-major: x B×in, w1 in×hid, w2 hid×out
  std::vector<std::int32_t> y;
};

// Double-precision forward: mean cross-entropy of the batch (cpu_ref::mlp_mean_xent).
double loss_double(const Problem& p, const std::vector<double>* params) {
  const std::vector<double> x(p.x.begin(), p.x.end());
  return memstrat::cpu_ref::mlp_mean_xent(x.data(), p.y.data(), kBatch, kIn, kHid, kOut,
                                          params[0].data(), params[1].data(), params[2].data(),
                                          params[3].data());
}

// Smallest |hidden pre-activation|: a central difference straddling a ReLU kink is wrong.
double min_abs_preactivation(const Problem& p) {
  double m = 1e300;
  for (int n = 0; n < kBatch; ++n)
    for (int j = 0; j < kHid; ++j) {
      double s = p.b1[j];
      for (int i = 0; i < kIn; ++i) s += static_cast<double>(p.x[n * kIn + i]) * p.w1[i * kHid + j];
      m = std::min(m, std::fabs(s));
    }
  return m;
}

// Random problem (values in [-1, 1]) whose hidden pre-activations all stay >= 10·eps away
// from the ReLU kink (|dz| <= eps·max(1, |x|) = eps for one perturbed parameter).
Problem make_problem() {
  for (std::uint32_t seed = 2024;; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto fill = [&](std::vector<float>& v, std::size_t n) {
      v.resize(n);
      for (auto& e : v) e = u(rng);
    };
    Problem p;
    fill(p.x, kBatch * kIn);
    fill(p.w1, kIn * kHid);
    fill(p.b1, kHid);
    fill(p.w2, kHid * kOut);
    fill(p.b2, kOut);
    p.y = {0, 2, 1, 2};
    if (min_abs_preactivation(p) > 10 * kEps) return p;
  }
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& h, cudaStream_t s) {
  DeviceBuffer<T> d(h.size());
  CUDA_CHECK(cudaMemcpyAsync(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  return d;
}

std::vector<float> to_host(const DeviceBuffer<float>& d, cudaStream_t s) {
  std::vector<float> h(d.size());
  CUDA_CHECK(cudaMemcpyAsync(h.data(), d.data(), d.bytes(), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}

DeviceBuffer<float> poisoned(std::size_t n, cudaStream_t s) {
  DeviceBuffer<float> d(n);
  CUDA_CHECK(cudaMemsetAsync(d.data(), 0xFF, d.bytes(), s));  // NaN everywhere
  return d;
}

using memstrat::kernel_testing::WithGpuStream;

class GradCheck : public WithGpuStream<::testing::TestWithParam<GemmBackend>> {};

TEST_P(GradCheck, TinyMlpGradientsMatchFiniteDifferences) {
  const cudaStream_t s = stream_;
  const Problem p = make_problem();
  const Gemm gemm(GetParam(), /*tf32=*/false, s);

  auto x = to_device(p.x, s), w1 = to_device(p.w1, s), b1 = to_device(p.b1, s);
  auto w2 = to_device(p.w2, s), b2 = to_device(p.b2, s);
  auto y = to_device(p.y, s);
  auto h = poisoned(kBatch * kHid, s), z2 = poisoned(kBatch * kOut, s);
  auto dz2 = poisoned(kBatch * kOut, s), loss = poisoned(kBatch, s);
  auto dh = poisoned(kBatch * kHid, s);
  auto dw1 = poisoned(kIn * kHid, s), db1 = poisoned(kHid, s);
  auto dw2 = poisoned(kHid * kOut, s), db2 = poisoned(kOut, s);
  DeviceBuffer<std::int32_t> correct(kBatch);

  // Forward: H = relu(X·W1 + b1); Z2 = H·W2 + b2; per-sample loss and dZ2 = (p - 1[y]) / B.
  gemm.nn(x.data(), w1.data(), h.data(), kBatch, kHid, kIn, b1.data(), Epilogue::BiasRelu);
  gemm.nn(h.data(), w2.data(), z2.data(), kBatch, kOut, kHid, b2.data(), Epilogue::Bias);
  memstrat::kernels::softmax_xent(z2.data(), y.data(), dz2.data(), loss.data(), correct.data(),
                                  kBatch, kOut, 1.f / kBatch, s);
  // Backward: dW2 = H^T·dZ2; db2 = colsum(dZ2); dH = dZ2·W2^T ⊙ 1[H>0];
  //           dW1 = X^T·dH;  db1 = colsum(dH).
  gemm.tn(h.data(), dz2.data(), dw2.data(), kHid, kOut, kBatch);
  memstrat::kernels::bias_grad(dz2.data(), db2.data(), kBatch, kOut, s);
  gemm.nt(dz2.data(), w2.data(), dh.data(), kBatch, kHid, kOut, h.data());
  gemm.tn(x.data(), dh.data(), dw1.data(), kIn, kHid, kBatch);
  memstrat::kernels::bias_grad(dh.data(), db1.data(), kBatch, kHid, s);

  const std::vector<float> analytic[4] = {to_host(dw1, s), to_host(db1, s), to_host(dw2, s),
                                          to_host(db2, s)};
  const char* names[4] = {"dW1", "db1", "dW2", "db2"};

  std::vector<double> params[4] = {{p.w1.begin(), p.w1.end()},
                                   {p.b1.begin(), p.b1.end()},
                                   {p.w2.begin(), p.w2.end()},
                                   {p.b2.begin(), p.b2.end()}};

  // The GPU loss is the double loss at the same point.
  double gpu_loss = 0;
  for (float l : to_host(loss, s)) gpu_loss += l;
  EXPECT_NEAR(gpu_loss / kBatch, loss_double(p, params), 1e-5);

  int checked = 0;
  for (int t = 0; t < 4; ++t) {
    ASSERT_EQ(analytic[t].size(), params[t].size());
    for (std::size_t i = 0; i < params[t].size(); ++i) {
      const double saved = params[t][i];
      params[t][i] = saved + kEps;
      const double lp = loss_double(p, params);
      params[t][i] = saved - kEps;
      const double lm = loss_double(p, params);
      params[t][i] = saved;
      const double numeric = (lp - lm) / (2 * kEps);
      const double got = analytic[t][i];
      EXPECT_NEAR(got, numeric, kAtol + kRtol * std::fabs(numeric))
          << names[t] << "[" << i << "] (NaN = never written)";
      ++checked;
    }
  }
  EXPECT_EQ(checked, kIn * kHid + kHid + kHid * kOut + kOut);
}

}  // namespace

// Readable parameter names in failure messages.
namespace memstrat::kernels {
void PrintTo(GemmBackend b, std::ostream* os) { *os << to_string(b); }
}  // namespace memstrat::kernels

namespace {

INSTANTIATE_TEST_SUITE_P(Backends, GradCheck,
                         ::testing::Values(GemmBackend::Tiled, GemmBackend::Cublas),
                         [](const ::testing::TestParamInfo<GemmBackend>& info) {
                           return std::string(memstrat::kernels::to_string(info.param));
                         });

}  // namespace
