// kernel_test_support.h: helpers the kernel-level GPU tests share: seeded random inputs,
// host<->device copies, NaN poisoning, gtest assertions for "within atol + rtol*|ref|"
// (printing the first mismatches) and "bitwise equal", and the ReLU-kink exclusion of gradient
// comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "kernels/reference/cpu_reference.h"

namespace memstrat::kernel_testing {

inline std::uint32_t seed_of(int a, int b = 0, int c = 0, int d = 0) {
  return static_cast<std::uint32_t>(a) * 73856093u ^ static_cast<std::uint32_t>(b) * 19349663u ^
         static_cast<std::uint32_t>(c) * 83492791u ^ static_cast<std::uint32_t>(d) * 2654435761u;
}

inline std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float lo = -1.f,
                                        float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

inline std::vector<std::int32_t> random_labels(int n, int classes, std::mt19937& rng) {
  std::uniform_int_distribution<int> u(0, classes - 1);
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& e : v) e = u(rng);
  return v;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& h, cudaStream_t s, std::size_t extra = 0) {
  DeviceBuffer<T> d(h.size() + extra);
  if (!h.empty())
    CUDA_CHECK(
        cudaMemcpyAsync(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  return d;
}

/// Copies h to d (device, mapped or managed memory; e.g. d = buffer + offset for tests that
/// place an input at an unaligned address).
template <typename T>
void copy_to(T* d, const std::vector<T>& h, cudaStream_t s) {
  if (!h.empty())
    CUDA_CHECK(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(T), cudaMemcpyDefault, s));
}

template <typename T>
std::vector<T> to_host(const T* d, std::size_t n, cudaStream_t s) {
  std::vector<T> h(n);
  if (n > 0) CUDA_CHECK(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}

/// 0xFF bytes: every float is a NaN, every int32 is -1.
template <typename T>
void poison(T* d, std::size_t n, cudaStream_t s) {
  if (n > 0) CUDA_CHECK(cudaMemsetAsync(d, 0xFF, n * sizeof(T), s));
}

struct Tol {
  double atol;
  double rtol;
};
inline constexpr Tol kExact{0.0, 0.0};

inline ::testing::AssertionResult matches(const std::vector<float>& got,
                                          const std::vector<float>& want, Tol tol,
                                          const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": size " << got.size() << " vs " << want.size();
  const auto r = cpu_ref::compare(got.data(), want.data(), got.size(), tol.atol, tol.rtol);
  if (r.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << r.mismatches << " of " << r.n << " elements outside atol " << tol.atol
         << " + rtol " << tol.rtol << "·|ref| (max abs err " << r.max_abs_err
         << "); first mismatches:\n"
         << r.first_mismatches;
}

template <typename T>
::testing::AssertionResult bitwise_equal(const std::vector<T>& a, const std::vector<T>& b,
                                         const std::string& what) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0)
    return ::testing::AssertionSuccess();
  std::size_t i = 0;
  while (i < std::min(a.size(), b.size()) && std::memcmp(&a[i], &b[i], sizeof(T)) == 0) ++i;
  return ::testing::AssertionFailure() << what << ": not bitwise equal, first difference at " << i
                                       << " (sizes " << a.size() << ", " << b.size() << ")";
}

/// Hidden units of X·W1 + b1 (double sums; X [rows × in], W1 [in × hidden]) whose pre-activation
/// lies within `margin` of 0 in some row. Two fp32 summation orders may put such a unit on either
/// side of the ReLU, which moves its column of gW1 and its db1 entry by a whole row's term:
/// gradient comparisons between two paths leave those entries out (without_units).
inline std::vector<bool> relu_ambiguous_units(const float* x, const float* W1, const float* b1,
                                              int rows, int in, int hidden, double margin) {
  std::vector<float> z(static_cast<std::size_t>(rows) * hidden);
  cpu_ref::gemm_nn(x, W1, z.data(), rows, hidden, in, b1, kernels::Epilogue::Bias);
  std::vector<bool> amb(static_cast<std::size_t>(hidden), false);
  for (std::size_t i = 0; i < z.size(); ++i)
    if (std::fabs(static_cast<double>(z[i])) < margin)
      amb[i % static_cast<std::size_t>(hidden)] = true;
  return amb;
}

/// g, a one-hidden-layer MLP's gradients in the flat layout (W1 [in × hidden], b1, W2, b2), with
/// the gW1 columns and db1 entries of the units `amb` marks set to 0.
inline std::vector<float> without_units(std::vector<float> g, int in, int hidden,
                                        const std::vector<bool>& amb) {
  for (int j = 0; j < hidden; ++j) {
    if (!amb[static_cast<std::size_t>(j)]) continue;
    for (int f = 0; f < in; ++f) g[static_cast<std::size_t>(f) * hidden + j] = 0.f;
    g[static_cast<std::size_t>(in) * hidden + j] = 0.f;
  }
  return g;
}

/// A test fixture (over ::testing::Test or TestWithParam<T>) that skips without a CUDA device
/// and gives each test its own stream.
template <typename Base = ::testing::Test>
class WithGpuStream : public Base {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda_device_available(&reason)) GTEST_SKIP() << "no CUDA device: " << reason;
    stream_ = Stream::create();
  }
  Stream stream_;
};

}  // namespace memstrat::kernel_testing
