// fused_head_update.cu: fused_head and fused_update (see fused_head_update.h), the custom kernels
// of the cuBLASLt fused step. Together with two cuBLASLt GEMMs (cublaslt_gemm.h) they replace the
// 13+ launches of the unfused step by 4 (5 when the batch arrives as uint8).
//
// The step (experiments/core/lt_fused_step.cu): H = relu(X·W1 + b1) [GEMM, fused epilogue] ->
// fused_head -> gW1 = X^T·dH [GEMM] -> fused_update. fused_head reads W2 before fused_update
// changes it.
//
// Kernel versions in this file:
//   fused_head_kernel    one warp per row, 8 rows per 256-thread block (grid-stride over rows
//       beyond kMaxHeadBlocks blocks). W2 is staged transposed in shared memory (stride
//       hidden + 1, so lane j reads bank-conflict free). Lane l accumulates the C logits over
//       j = l, l+32, ... with fmaf, a fixed xor-butterfly adds the 32 lane partials (every lane
//       ends with the same bits: a + b == b + a), then every lane computes the softmax of its
//       row redundantly, lane c stores dlogits[c], and lane l computes dH for j = l, l+32, ...
//   fused_update_kernel  512-thread blocks. Blocks [0, ceil(hidden/32)) are "small-layer"
//       blocks: 32 hidden units (lanes) × 16 row groups (warps); thread (j, y) sums rows y, y+16,
//       ... of H[r][j]·dlogits[r][c] (all c), dH[r][j] and, in block 0, dlogits[r][lane], in
//       order; a fixed shared-memory tree adds the 16 row groups; the block then applies the
//       SGD step to its 32 rows of W2 (a contiguous range), its 32 entries of b1 and, in block
//       0, b2. The remaining blocks apply the SGD step to W1 from its GEMM-computed gradient,
//       grid-stride, float4 when n_w1 % 4 == 0 and the pointers are 16-byte aligned (the same
//       expression either way: the choice never changes a result).
//
// Determinism: every sum has a fixed order that depends only on rows / hidden / classes;
// no atomics; accurate expf/logf. The SGD expressions are those of sgd_update (explicit fmaf).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "kernels/common/sgd_step.cuh"
#include "kernels/lt_fused/fused_head_update.h"

namespace memstrat::kernels {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxC = kFusedMaxClasses;
static_assert(kMaxC <= kWarp, "lane c stores dlogits[c]");

constexpr int kHeadWarps = 8;  // rows per fused_head block
constexpr int kHeadThreads = kWarp * kHeadWarps;
constexpr int kMaxHeadBlocks = 1024;
constexpr std::size_t kMaxSharedBytes = 48 * 1024;  // no opt-in needed below this

constexpr int kUpdCols = kWarp;  // hidden units per small-layer block (one per lane)
constexpr int kUpdRows = 16;     // row groups (one per warp); power of two for the tree
constexpr int kUpdThreads = kUpdCols * kUpdRows;
constexpr std::size_t kMaxW1Blocks = 4096;
static_assert((kUpdRows & (kUpdRows - 1)) == 0, "kUpdRows must be a power of two");

std::size_t head_smem_bytes(int hidden, int classes) {
  return sizeof(float) * static_cast<std::size_t>(classes) * (static_cast<std::size_t>(hidden) + 1);
}
std::size_t update_smem_bytes(int classes) {
  return sizeof(float) * kUpdRows * static_cast<std::size_t>(classes + 2) * kUpdCols;
}
static_assert(sizeof(float) * kUpdRows * (kMaxC + 2) * kUpdCols <= kMaxSharedBytes,
              "fused_update's reduction buffer must fit without a shared-memory opt-in");

// ---- fused_head ----------------------------------------------------------------------------
__global__ void __launch_bounds__(kHeadThreads)
    fused_head_kernel(const float* __restrict__ H, const float* __restrict__ W2,
                      const float* __restrict__ b2, const std::int32_t* __restrict__ labels,
                      float* __restrict__ dlogits, float* __restrict__ dH,
                      float* __restrict__ sample_loss, std::int32_t* __restrict__ sample_correct,
                      int rows, int hidden, int C, float grad_scale) {
  extern __shared__ float sW[];  // sW[c * ld + j] = W2[j][c]
  const int ld = hidden + 1;
  const int n = hidden * C;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int j = i / C;
    const int c = i - j * C;
    sW[c * ld + j] = W2[i];
  }
  __syncthreads();

  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kHeadWarps + threadIdx.x / kWarp; row < rows;
       row += gridDim.x * kHeadWarps) {  // warp-uniform: the shuffles below stay full-warp
    const float* h = H + static_cast<std::size_t>(row) * hidden;

    // logits
    float z[kMaxC];
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) z[c] = 0.f;
#pragma unroll 4
    for (int j = lane; j < hidden; j += kWarp) {
      const float hv = h[j];
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c < C) z[c] = fmaf(hv, sW[c * ld + j], z[c]);
    }
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) {
      if (c < C) {
#pragma unroll
        for (int off = kWarp / 2; off > 0; off /= 2) z[c] += __shfl_xor_sync(kFull, z[c], off);
        z[c] = z[c] + b2[c];
      }
    }

    // softmax cross-entropy (every lane holds the same logits, so the same results)
    float mx = z[0];
    int arg = 0;
#pragma unroll
    for (int c = 1; c < kMaxC; ++c) {
      if (c < C && z[c] > mx) {
        mx = z[c];
        arg = c;
      }
    }
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C) sum += expf(z[c] - mx);
    const int label = labels[row];
    const bool valid = label >= 0 && label < C;
    float z_label = 0.f;
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c == label) z_label = z[c];
    if (lane == 0) {
      if (sample_loss != nullptr) sample_loss[row] = valid ? logf(sum) - (z_label - mx) : NAN;
      if (sample_correct != nullptr) sample_correct[row] = (valid && arg == label) ? 1 : 0;
    }
    if (dlogits == nullptr) continue;

    float d[kMaxC];
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) {
      d[c] = 0.f;
      if (c < C) {
        const float p = expf(z[c] - mx) / sum;
        d[c] = (c == label ? p - 1.f : p) * grad_scale;
      }
    }
    float* dl = dlogits + static_cast<std::size_t>(row) * C;
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C && c == lane) dl[c] = d[c];
    if (dH == nullptr) continue;

    // dH = (dlogits · W2^T) ⊙ 1[H > 0]
    float* dh = dH + static_cast<std::size_t>(row) * hidden;
    for (int j = lane; j < hidden; j += kWarp) {
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c < C) s = fmaf(d[c], sW[c * ld + j], s);
      dh[j] = h[j] > 0.f ? s : 0.f;
    }
  }
}

// ---- fused_update --------------------------------------------------------------------------
__device__ void small_layer_block(const FusedUpdateArgs& a) {
  extern __shared__ float red[];  // red[(y * F + f) * kUpdCols + lane], F = C + 2 fields
  const int C = a.classes;
  const int F = C + 2;  // f < C: dW2[j][f]; f == C: db1[j]; f == C + 1: db2[lane]
  const int tx = threadIdx.x % kUpdCols;
  const int ty = threadIdx.x / kUpdCols;
  const int j0 = blockIdx.x * kUpdCols;
  const int j = j0 + tx;
  const bool has_j = j < a.hidden;
  const bool sums_b2 = blockIdx.x == 0 && tx < C;

  float gw[kMaxC];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c) gw[c] = 0.f;
  float gb1 = 0.f;
  float gb2 = 0.f;
#pragma unroll 4
  for (int r = ty; r < a.rows; r += kUpdRows) {
    const float* dl = a.dlogits + static_cast<std::size_t>(r) * C;
    if (has_j) {
      const std::size_t idx = static_cast<std::size_t>(r) * a.hidden + j;
      const float hv = a.H[idx];
      gb1 += a.dH[idx];
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c < C) gw[c] = fmaf(hv, dl[c], gw[c]);
    }
    if (sums_b2) gb2 += dl[tx];
  }
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    if (c < C) red[(ty * F + c) * kUpdCols + tx] = gw[c];
  red[(ty * F + C) * kUpdCols + tx] = gb1;
  red[(ty * F + C + 1) * kUpdCols + tx] = gb2;
  __syncthreads();
#pragma unroll
  for (int half = kUpdRows / 2; half > 0; half /= 2) {
    if (ty < half) {
      for (int f = 0; f < F; ++f)
        red[(ty * F + f) * kUpdCols + tx] += red[((ty + half) * F + f) * kUpdCols + tx];
    }
    __syncthreads();
  }
  // red[f * kUpdCols + lane] now holds the totals (row group 0).

  const float lr = a.lr;
  const float mom = a.momentum;
  const bool use_v = mom > 0.f;
  const int nj = a.hidden - j0 < kUpdCols ? a.hidden - j0 : kUpdCols;
  // This block's rows of W2 are one contiguous range: W2[j0 * C, (j0 + nj) * C).
  for (int e = threadIdx.x; e < nj * C; e += blockDim.x) {
    const int jl = e / C;
    const int c = e - jl * C;
    const std::size_t idx = static_cast<std::size_t>(j0) * C + e;
    sgd_step(a.W2 + idx, red[c * kUpdCols + jl], use_v ? a.vW2 + idx : nullptr, lr, mom);
  }
  if (static_cast<int>(threadIdx.x) < nj) {
    const int jj = j0 + threadIdx.x;
    sgd_step(a.b1 + jj, red[C * kUpdCols + threadIdx.x], use_v ? a.vb1 + jj : nullptr, lr, mom);
  }
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < C) {
    const int c = threadIdx.x;
    sgd_step(a.b2 + c, red[(C + 1) * kUpdCols + c], use_v ? a.vb2 + c : nullptr, lr, mom);
  }
}

__global__ void __launch_bounds__(kUpdThreads)
    fused_update_kernel(FusedUpdateArgs a, int small_blocks, bool w1_x4) {
  if (static_cast<int>(blockIdx.x) < small_blocks) {
    small_layer_block(a);
    return;
  }
  const float lr = a.lr;
  const float mom = a.momentum;
  const bool use_v = mom > 0.f;
  const std::size_t first =
      static_cast<std::size_t>(blockIdx.x - small_blocks) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x - small_blocks) * blockDim.x;
  if (w1_x4) {
    float4* p4 = reinterpret_cast<float4*>(a.W1);
    const float4* g4 = reinterpret_cast<const float4*>(a.gW1);
    float4* v4 = reinterpret_cast<float4*>(a.vW1);
    for (std::size_t i = first; i < a.n_w1 / 4; i += stride) {
      float4 p = p4[i];
      const float4 g = g4[i];
      if (use_v) {
        float4 v = v4[i];
        sgd_step(&p.x, g.x, &v.x, lr, mom);
        sgd_step(&p.y, g.y, &v.y, lr, mom);
        sgd_step(&p.z, g.z, &v.z, lr, mom);
        sgd_step(&p.w, g.w, &v.w, lr, mom);
        v4[i] = v;
      } else {
        sgd_step(&p.x, g.x, nullptr, lr, mom);
        sgd_step(&p.y, g.y, nullptr, lr, mom);
        sgd_step(&p.z, g.z, nullptr, lr, mom);
        sgd_step(&p.w, g.w, nullptr, lr, mom);
      }
      p4[i] = p;
    }
  } else {
    for (std::size_t i = first; i < a.n_w1; i += stride)
      sgd_step(a.W1 + i, a.gW1[i], use_v ? a.vW1 + i : nullptr, lr, mom);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

std::string fused_mlp_unsupported(int hidden, int classes) {
  if (hidden <= 0 || classes <= 0) return "hidden and classes must be > 0";
  if (classes > kFusedMaxClasses)
    return std::to_string(classes) + " classes (the fused kernels take at most " +
           std::to_string(kFusedMaxClasses) + ")";
  if (head_smem_bytes(hidden, classes) > kMaxSharedBytes)
    return "W2 (" + std::to_string(hidden) + "×" + std::to_string(classes) +
           ") does not fit in 48 KiB of shared memory";
  return "";
}

void fused_head(const float* H, const float* W2, const float* b2, const std::int32_t* labels,
                float* dlogits, float* dH, float* sample_loss, std::int32_t* sample_correct,
                int rows, int hidden, int classes, float grad_scale, cudaStream_t s) {
  if (rows < 0) throw std::invalid_argument("fused_head: rows < 0");
  if (const std::string why = fused_mlp_unsupported(hidden, classes); !why.empty())
    throw std::invalid_argument("fused_head: " + why);
  if (rows == 0) return;
  const unsigned blocks =
      static_cast<unsigned>(std::min((rows + kHeadWarps - 1) / kHeadWarps, kMaxHeadBlocks));
  fused_head_kernel<<<blocks, kHeadThreads, head_smem_bytes(hidden, classes), s>>>(
      H, W2, b2, labels, dlogits, dH, sample_loss, sample_correct, rows, hidden, classes,
      grad_scale);
  CUDA_CHECK_LAST();
}

void fused_update(const FusedUpdateArgs& a, cudaStream_t s) {
  if (a.rows < 0) throw std::invalid_argument("fused_update: rows < 0");
  if (const std::string why = fused_mlp_unsupported(a.hidden, a.classes); !why.empty())
    throw std::invalid_argument("fused_update: " + why);
  if (!(a.momentum >= 0.f)) throw std::invalid_argument("fused_update: momentum must be >= 0");
  if (a.W2 == nullptr || a.b2 == nullptr || a.b1 == nullptr)
    throw std::invalid_argument("fused_update: W2, b2 and b1 are required");
  if (a.rows > 0 && (a.H == nullptr || a.dlogits == nullptr || a.dH == nullptr))
    throw std::invalid_argument("fused_update: H, dlogits and dH are required when rows > 0");
  if (a.momentum > 0.f && (a.vW2 == nullptr || a.vb2 == nullptr || a.vb1 == nullptr))
    throw std::invalid_argument("fused_update: momentum > 0 needs the W2, b2, b1 velocities");
  const bool has_w1 = a.W1 != nullptr && a.n_w1 > 0;
  if (has_w1 && (a.gW1 == nullptr || (a.momentum > 0.f && a.vW1 == nullptr)))
    throw std::invalid_argument("fused_update: W1 needs gW1 (and vW1 when momentum > 0)");
  const int small_blocks = (a.hidden + kUpdCols - 1) / kUpdCols;
  const bool w1_x4 = has_w1 && a.n_w1 % 4 == 0 && aligned16(a.W1) && aligned16(a.gW1) &&
                     (!(a.momentum > 0.f) || aligned16(a.vW1));
  const std::size_t w1_work = has_w1 ? (w1_x4 ? a.n_w1 / 4 : a.n_w1) : 0;
  const std::size_t w1_blocks =
      std::min<std::size_t>((w1_work + kUpdThreads - 1) / kUpdThreads, kMaxW1Blocks);
  const unsigned blocks = static_cast<unsigned>(small_blocks + w1_blocks);
  fused_update_kernel<<<blocks, kUpdThreads, update_smem_bytes(a.classes), s>>>(a, small_blocks,
                                                                                w1_x4);
  CUDA_CHECK_LAST();
}

}  // namespace memstrat::kernels
