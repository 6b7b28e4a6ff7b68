// cpu_reference.cpp: CPU references of the MLP's kernels (see cpu_reference.h).
#include "kernels/reference/cpu_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/common/pixel_norm.h"

namespace memstrat::cpu_ref {
namespace {

void check_dims(int M, int N, int K) {
  if (M < 0 || N < 0 || K < 0) throw std::invalid_argument("cpu_ref: negative matrix dimension");
}

float relu(float v) { return v < 0.f ? 0.f : v; }

}  // namespace

void gemm_nn(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
             kernels::Epilogue ep) {
  check_dims(M, N, K);
  if (ep != kernels::Epilogue::None && bias == nullptr)
    throw std::invalid_argument("cpu_ref::gemm_nn: epilogue needs a bias");
  std::vector<double> acc(static_cast<std::size_t>(N));
  for (int i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < K; ++k) {
      const double a = A[static_cast<std::size_t>(i) * K + k];
      const float* b = B + static_cast<std::size_t>(k) * N;
      for (int j = 0; j < N; ++j) acc[j] += a * static_cast<double>(b[j]);
    }
    float* c = C + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) {
      double v = acc[j];
      if (ep != kernels::Epilogue::None) v += bias[j];
      if (ep == kernels::Epilogue::BiasRelu && v < 0.0) v = 0.0;
      c[j] = static_cast<float>(v);
    }
  }
}

void gemm_nt(const float* A, const float* B, float* C, int M, int N, int K,
             const float* relu_mask) {
  check_dims(M, N, K);
  for (int i = 0; i < M; ++i) {
    const float* a = A + static_cast<std::size_t>(i) * K;
    for (int j = 0; j < N; ++j) {
      const float* b = B + static_cast<std::size_t>(j) * K;
      double acc = 0.0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(a[k]) * static_cast<double>(b[k]);
      const std::size_t idx = static_cast<std::size_t>(i) * N + j;
      float v = static_cast<float>(acc);
      if (relu_mask != nullptr && !(relu_mask[idx] > 0.f)) v = 0.f;
      C[idx] = v;
    }
  }
}

void gemm_tn(const float* A, const float* B, float* C, int M, int N, int K) {
  check_dims(M, N, K);
  std::vector<double> acc(static_cast<std::size_t>(M) * N, 0.0);
  for (int k = 0; k < K; ++k) {
    const float* a = A + static_cast<std::size_t>(k) * M;
    const float* b = B + static_cast<std::size_t>(k) * N;
    for (int i = 0; i < M; ++i) {
      const double ai = a[i];
      double* c = acc.data() + static_cast<std::size_t>(i) * N;
      for (int j = 0; j < N; ++j) c[j] += ai * static_cast<double>(b[j]);
    }
  }
  for (std::size_t idx = 0; idx < acc.size(); ++idx) C[idx] = static_cast<float>(acc[idx]);
}

void normalize_u8(const std::uint8_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = kernels::normalize_pixel(in[i]);
}

void bias_act(float* C, const float* bias, int M, int N, bool relu_on) {
  check_dims(M, N, 0);
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) {
      float v = c[j];
      if (bias != nullptr) v = v + bias[j];
      if (relu_on) v = relu(v);
      c[j] = v;
    }
  }
}

void relu_backward(float* dA, const float* A, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dA[i] = A[i] > 0.f ? dA[i] : 0.f;
}

void bias_grad(const float* dZ, float* db, int M, int N) {
  check_dims(M, N, 0);
  for (int j = 0; j < N; ++j) {
    double s = 0.0;
    for (int i = 0; i < M; ++i) s += dZ[static_cast<std::size_t>(i) * N + j];
    db[j] = static_cast<float>(s);
  }
}

void softmax_xent(const float* logits, const std::int32_t* labels, float* dlogits,
                  float* sample_loss, std::int32_t* sample_correct, int M, int C,
                  float grad_scale) {
  check_dims(M, C, 0);
  if (M > 0 && C == 0) throw std::invalid_argument("cpu_ref::softmax_xent: C must be > 0");
  for (int i = 0; i < M; ++i) {
    const float* x = logits + static_cast<std::size_t>(i) * C;
    // First maximum, compared in float exactly like the kernel.
    int arg = 0;
    float mx = x[0];
    for (int j = 1; j < C; ++j) {
      if (x[j] > mx) {
        mx = x[j];
        arg = j;
      }
    }
    double sum = 0.0;
    for (int j = 0; j < C; ++j) sum += std::exp(static_cast<double>(x[j]) - mx);
    const int label = labels[i];
    const bool valid = label >= 0 && label < C;
    if (sample_loss != nullptr) {
      sample_loss[i] =
          valid ? static_cast<float>(std::log(sum) - (static_cast<double>(x[label]) - mx))
                : std::numeric_limits<float>::quiet_NaN();
    }
    if (sample_correct != nullptr) sample_correct[i] = (valid && arg == label) ? 1 : 0;
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<std::size_t>(i) * C;
      for (int j = 0; j < C; ++j) {
        const double p = std::exp(static_cast<double>(x[j]) - mx) / sum;
        d[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * grad_scale);
      }
    }
  }
}

void rank_sum(const float* gathered, int ranks, std::size_t count, float* out) {
  if (ranks < 1) throw std::invalid_argument("cpu_ref::rank_sum: ranks must be >= 1");
  for (std::size_t i = 0; i < count; ++i) {
    float s = gathered[i];
    for (int r = 1; r < ranks; ++r) s += gathered[static_cast<std::size_t>(r) * count + i];
    out[i] = s;
  }
}

void sgd_update(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                float momentum) {
  if (momentum < 0.f) throw std::invalid_argument("cpu_ref::sgd_update: momentum < 0");
  if (momentum > 0.f && velocity == nullptr && n > 0)
    throw std::invalid_argument("cpu_ref::sgd_update: momentum needs a velocity buffer");
  for (std::size_t i = 0; i < n; ++i) {
    if (momentum > 0.f) {
      velocity[i] = std::fma(momentum, velocity[i], grads[i]);
      params[i] = std::fma(-lr, velocity[i], params[i]);
    } else {
      params[i] = std::fma(-lr, grads[i], params[i]);
    }
  }
}

CompareResult compare(const float* got, const float* ref, std::size_t n, double atol, double rtol,
                      std::size_t max_listed) {
  CompareResult r;
  r.n = n;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[i];
    const double f = ref[i];
    bool match;
    if (std::isnan(g) || std::isnan(f)) {
      match = std::isnan(g) && std::isnan(f);
    } else if (std::isinf(g) || std::isinf(f)) {
      match = g == f;
    } else {
      const double err = std::fabs(g - f);
      r.max_abs_err = std::max(r.max_abs_err, err);
      if (f != 0.0) r.max_rel_err = std::max(r.max_rel_err, err / std::fabs(f));
      match = err <= atol + rtol * std::fabs(f);
    }
    if (!match) {
      if (r.mismatches < max_listed) {
        char line[160];
        std::snprintf(line, sizeof line, "  [%zu] got=%.9g ref=%.9g |err|=%.3g tol=%.3g\n", i, g, f,
                      std::fabs(g - f), atol + rtol * std::fabs(f));
        r.first_mismatches += line;
      }
      ++r.mismatches;
    }
  }
  return r;
}

// ---- the fused one-hidden-layer step ----------------------------------------------------

void fused_head(const float* H, const float* W2, const float* b2, const std::int32_t* labels,
                float* dlogits, float* dH, float* sample_loss, std::int32_t* sample_correct,
                int rows, int hidden, int classes, float grad_scale) {
  check_dims(rows, hidden, classes);
  if (rows == 0) return;
  std::vector<float> logits(static_cast<std::size_t>(rows) * classes);
  gemm_nn(H, W2, logits.data(), rows, classes, hidden, b2, kernels::Epilogue::Bias);
  softmax_xent(logits.data(), labels, dlogits, sample_loss, sample_correct, rows, classes,
               grad_scale);
  if (dlogits != nullptr && dH != nullptr) gemm_nt(dlogits, W2, dH, rows, hidden, classes, H);
}

void fused_update(const kernels::FusedUpdateArgs& a) {
  check_dims(a.rows, a.hidden, a.classes);
  const std::size_t hc = static_cast<std::size_t>(a.hidden) * a.classes;
  std::vector<float> dW2(hc), db2(static_cast<std::size_t>(a.classes)),
      db1(static_cast<std::size_t>(a.hidden));
  gemm_tn(a.H, a.dlogits, dW2.data(), a.hidden, a.classes, a.rows);
  bias_grad(a.dlogits, db2.data(), a.rows, a.classes);
  bias_grad(a.dH, db1.data(), a.rows, a.hidden);
  const bool mom = a.momentum > 0.f;
  sgd_update(a.W2, dW2.data(), mom ? a.vW2 : nullptr, hc, a.lr, a.momentum);
  sgd_update(a.b2, db2.data(), mom ? a.vb2 : nullptr, db2.size(), a.lr, a.momentum);
  sgd_update(a.b1, db1.data(), mom ? a.vb1 : nullptr, db1.size(), a.lr, a.momentum);
  if (a.W1 != nullptr) sgd_update(a.W1, a.gW1, mom ? a.vW1 : nullptr, a.n_w1, a.lr, a.momentum);
}

double mlp_mean_xent(const double* x, const std::int32_t* labels, int rows, int in, int hidden,
                     int classes, const double* w1, const double* b1, const double* w2,
                     const double* b2) {
  std::vector<double> h(static_cast<std::size_t>(hidden)), z(static_cast<std::size_t>(classes));
  double total = 0;
  for (int n = 0; n < rows; ++n) {
    for (int j = 0; j < hidden; ++j) {
      double s = b1[j];
      for (int i = 0; i < in; ++i) s += x[static_cast<std::size_t>(n) * in + i] * w1[static_cast<std::size_t>(i) * hidden + j];
      h[j] = s > 0 ? s : 0;
    }
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < classes; ++c) {
      double s = b2[c];
      for (int j = 0; j < hidden; ++j) s += h[j] * w2[static_cast<std::size_t>(j) * classes + c];
      z[c] = s;
      mx = std::max(mx, s);
    }
    double se = 0;
    for (int c = 0; c < classes; ++c) se += std::exp(z[c] - mx);
    total += std::log(se) + mx - z[labels[n]];
  }
  return total / rows;
}

}  // namespace memstrat::cpu_ref
