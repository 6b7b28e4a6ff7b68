// gemm_tiled.cu: the custom SGEMMs of layer_kernels.h (gemm_nn_tiled, gemm_nt_tiled,
// gemm_tn_tiled).
//
// Kernel versions in this file:
//   gemm_tiled_kernel<kAKContig, kBKContig>  shared-memory tiled SGEMM, 64×64 block tile,
//       BK = 16, 256 threads, 4×4 register micro-tile per thread; the template flags only
//       say how the two operands are laid out in memory, so one body covers
//       NN <true,false>, NT <true,true> and TN <false,false>. Fused epilogue: + bias,
//       ReLU, or a ReLU-backward mask, chosen at run time (no extra instantiations).
//
// Determinism: every C element is one fp32 fmaf chain over k = 0, 1, ..., K-1 in order
// (zero-padded past K, which adds exact zeros), whatever M, N, the block position or the
// pointers' alignment. Global loads are scalar, so no path depends on alignment; the same
// inputs always give bitwise-identical outputs.
//
// Launch limits: ceil(M/64) <= 65535 (M <= 4,194,240 rows); dimensions are int.
#include <cstddef>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat::kernels {
namespace {

constexpr int kTile = 64;                                  // BM == BN
constexpr int kBK = 16;                                    // k-depth of one shared-memory stage
constexpr int kMicro = 4;                                  // TM == TN
constexpr int kThreadsPerDim = kTile / kMicro;             // 16
constexpr int kThreads = kThreadsPerDim * kThreadsPerDim;  // 256
constexpr int kPad = 4;  // keeps rows 16-byte aligned for the float4 shared-memory reads
constexpr int kMaxGridY = 65535;

static_assert(kTile * kBK == 4 * kThreads, "each thread loads exactly 4 elements per operand");
static_assert(kThreads % kBK == 0 && kThreads % kTile == 0, "loader layouts");

using Tile = float[kBK][kTile + kPad];

// tile[k][x] = op(x, k0 + k) for x in [x0, x0 + 64), k in [0, 16); zero outside
// [0, xmax) × [0, kmax). The operand is stored either "k-contiguous" (element (x, k) at
// p[x*ld + k]: A of NN/NT, B of NT) or "x-contiguous" (element (x, k) at p[k*ld + x]:
// A of TN, B of NN/TN). Both patterns read consecutive addresses across adjacent threads.
template <bool kKContig>
__device__ __forceinline__ void load_tile(const float* __restrict__ p, int ld, int x0, int xmax,
                                          int k0, int kmax, Tile& tile, int tid) {
  if constexpr (kKContig) {
    const int kk = tid % kBK;
    const int xx = tid / kBK;  // 0..15
    const int gk = k0 + kk;
#pragma unroll
    for (int r = 0; r < kTile / (kThreads / kBK); ++r) {
      const int x = xx + r * (kThreads / kBK);
      const int gx = x0 + x;
      tile[kk][x] = (gx < xmax && gk < kmax) ? p[static_cast<std::size_t>(gx) * ld + gk] : 0.f;
    }
  } else {
    const int xx = tid % kTile;
    const int kk = tid / kTile;  // 0..3
    const int gx = x0 + xx;
#pragma unroll
    for (int r = 0; r < kBK / (kThreads / kTile); ++r) {
      const int k = kk + r * (kThreads / kTile);
      const int gk = k0 + k;
      tile[k][xx] = (gx < xmax && gk < kmax) ? p[static_cast<std::size_t>(gk) * ld + gx] : 0.f;
    }
  }
}

// C[M×N] = opA[M×K]·opB[K×N], then (in this order) + bias[n], ReLU, mask.
// opA(m, k) = kAKContig ? A[m*lda + k] : A[k*lda + m]
// opB(k, n) = kBKContig ? B[n*ldb + k] : B[k*ldb + n]
template <bool kAKContig, bool kBKContig>
__global__ void __launch_bounds__(kThreads)
    gemm_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B, float* C, int M,
                      int N, int K, int lda, int ldb, const float* __restrict__ bias, bool relu,
                      const float* mask) {
  __shared__ __align__(16) Tile As;
  __shared__ __align__(16) Tile Bs;

  const int tid = threadIdx.x;
  const int tx = tid % kThreadsPerDim;  // micro-tile column
  const int ty = tid / kThreadsPerDim;  // micro-tile row
  const int m0 = blockIdx.y * kTile;
  const int n0 = blockIdx.x * kTile;

  float acc[kMicro][kMicro];
#pragma unroll
  for (int i = 0; i < kMicro; ++i)
#pragma unroll
    for (int j = 0; j < kMicro; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += kBK) {
    load_tile<kAKContig>(A, lda, m0, M, k0, K, As, tid);
    load_tile<kBKContig>(B, ldb, n0, N, k0, K, Bs, tid);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(&As[k][ty * kMicro]);
      const float4 b = *reinterpret_cast<const float4*>(&Bs[k][tx * kMicro]);
      const float av[kMicro] = {a.x, a.y, a.z, a.w};
      const float bv[kMicro] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < kMicro; ++i)
#pragma unroll
        for (int j = 0; j < kMicro; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int m = m0 + ty * kMicro + i;
    if (m >= M) break;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const int n = n0 + tx * kMicro + j;
      if (n >= N) break;
      const std::size_t idx = static_cast<std::size_t>(m) * N + n;
      float v = acc[i][j];
      if (bias != nullptr) v = v + bias[n];
      if (relu) v = v < 0.f ? 0.f : v;
      if (mask != nullptr) v = mask[idx] > 0.f ? v : 0.f;
      C[idx] = v;
    }
  }
}

template <bool kAKContig, bool kBKContig>
void launch(const float* A, const float* B, float* C, int M, int N, int K, int lda, int ldb,
            const float* bias, bool relu, const float* mask, cudaStream_t s, const char* who) {
  if (M < 0 || N < 0 || K < 0)
    throw std::invalid_argument(std::string(who) + ": negative matrix dimension");
  if (M == 0 || N == 0) return;  // empty output: nothing to write
  const unsigned gx = static_cast<unsigned>((N + kTile - 1) / kTile);
  const unsigned gy = static_cast<unsigned>((M + kTile - 1) / kTile);
  if (gy > static_cast<unsigned>(kMaxGridY))
    throw std::invalid_argument(std::string(who) + ": M too large for the tiled GEMM grid");
  gemm_tiled_kernel<kAKContig, kBKContig>
      <<<dim3(gx, gy), kThreads, 0, s>>>(A, B, C, M, N, K, lda, ldb, bias, relu, mask);
  CUDA_CHECK_LAST();
}

}  // namespace

void gemm_nn_tiled(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
                   Epilogue ep, cudaStream_t s) {
  if (ep != Epilogue::None && bias == nullptr)
    throw std::invalid_argument("gemm_nn_tiled: Epilogue::Bias/BiasRelu needs a bias");
  const float* b = ep == Epilogue::None ? nullptr : bias;
  // A: M×K row-major (k-contiguous, ld K); B: K×N row-major (n-contiguous, ld N).
  launch<true, false>(A, B, C, M, N, K, K, N, b, ep == Epilogue::BiasRelu, nullptr, s,
                      "gemm_nn_tiled");
}

void gemm_nt_tiled(const float* A, const float* B, float* C, int M, int N, int K,
                   const float* relu_mask, cudaStream_t s) {
  // A: M×K row-major (k-contiguous, ld K); B: N×K row-major (k-contiguous, ld K).
  launch<true, true>(A, B, C, M, N, K, K, K, nullptr, false, relu_mask, s, "gemm_nt_tiled");
}

void gemm_tn_tiled(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  // A: K×M row-major (m-contiguous, ld M); B: K×N row-major (n-contiguous, ld N).
  launch<false, false>(A, B, C, M, N, K, M, N, nullptr, false, nullptr, s, "gemm_tn_tiled");
}

}  // namespace memstrat::kernels
