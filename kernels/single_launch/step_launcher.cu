// step_launcher.cu: the single-launch training step (see step_launcher.h).
//
// One cooperative kernel, 256-thread blocks (8 warps), a grid of 1-2 blocks per SM, three
// phases with cooperative_groups grid barriers between them. Work items are dealt out
// round-robin (item = first + k·stride), and what an item computes never depends on which
// warp or block runs it, so the grid size changes timing only.
//
//   A  Z = X·W1. Item = (warp tile, K chunk). A warp tile is (4·TR) rows × (128/TR) units, each
//      lane a 4×4 register tile (TR lanes down, 32/TR across; TR = 1, 2, 4, 8 by batch size so a
//      batch of 8 does not pad to 32 rows). Per K quad a lane loads 4 float4 of X (4 rows ×
//      4 k; a uint8 row as one 32-bit word, normalised on load) and 4 float4 of W1 (4 k × 4 units) and
//      does 64 fmaf, k ascending. K (= in) is cut into StepPlan::a_chunks chunks so that small
//      batches still spread over ~1000 warps; each chunk's partial goes to `partial`. Where the 8
//      warps of a block share their chunk and rows (TR = 8, hidden % 128 == 0) the block stages
//      that X slice in shared memory, normalised once, and the warps read X from there, and
//      where it also fits each warp's W1 slice, copied with cp.async (phase_a_block: same items,
//      same fmaf, same bits).
//   B  Per row (StepPlan::b_wpr warps per row): z = partial[0] + partial[1] + ... (chunk
//      order; up to 16 loads in flight) + b1, H = z < 0 ? 0 : z, logits summed lane-wise then
//      by a fixed reduce-scatter (lane 2c ends with class c), the warps of a row combined in
//      warp order through shared memory, + b2. Softmax cross-entropy with class c on lane c
//      (warp max / sum), loss, correct, dlogits, and dH = dlogits·W2^T ⊙ 1[H > 0] (W2 staged
//      in shared memory).
//   C  gW1 = X^T·dH in 32×16 tiles (lane: 4 inputs × 4 units, one float4 of X and of dH per
//      row; in launchers for kTallRows rows and more 32×32 tiles, lane 8 inputs × 4 units; X
//      and dH staged in shared memory, up to 256 rows a round in 64 KiB, the kernel's only use
//      of shared memory past 48 KiB, with phase A's staging), K = rows split over
//      StepPlan::c_split warps and combined in warp order through shared memory; the owning
//      lane applies the momentum-SGD step to its 4×4 (tall: 8×4) of W1 / vW1 at once (gW1
//      never goes to memory). Blocks of another kind sum dW2, db1 (16 units per block, 16 row
//      groups, fixed tree) and db2 and step W2, b1, b2.
// Phase A reads W1 and phase B reads W2 / b1 before the barrier after which phase C writes
// them, and data written in one phase is first read after a barrier, never before in the same
// launch.
#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "kernels/common/pixel_norm.h"
#include "kernels/common/sgd_step.cuh"
#include "kernels/single_launch/step_launcher.h"

namespace cg = cooperative_groups;

namespace memstrat::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kWarps = FusedStep::kThreads / kWarp;  // 8
constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxC = kStepMaxClasses;
static_assert(kMaxC <= kWarp, "lane c stores dlogits[c]");
// The most shared memory a block may take (opt-in past 48 KiB): two blocks fit on an SM of
// cc 9.0 and one on cc 8.x; step_unsupported_here says when a GPU gives a block less.
constexpr std::size_t kMaxSmemFloats = 96 * 1024 / sizeof(float);
constexpr int kTargetAItems = 2048;  // phase-A work items wanted per step
constexpr int kMaxChunks = 32;
constexpr int kCTileM = 32;  // phase-C warp tile: 32 inputs × c_tile_n(kTall) units
// A lane's part of a phase-C warp tile: 4 inputs × 4 units (warp tile 32 × 16), or with the tall
// tile (launchers for batches of kTallRows and more) 8 inputs × 4 units (32 × 32).
__host__ __device__ constexpr int c_tile_n(bool tall) { return tall ? 32 : 16; }
__host__ __device__ constexpr int c_lane_m(bool tall) { return tall ? 8 : 4; }
constexpr int kCStageFloats = 16384;       // phase C's staging area (64 KiB: batch 256 in one round)
constexpr int kCStageIters = 8;            // quads of X and of dH one thread stages per round
constexpr int kSmallUnits = 16;            // units per small-layer block (half a warp)
constexpr int kSmallGroups = FusedStep::kThreads / kSmallUnits;  // its row groups (16)
static_assert(kMaxC <= kSmallUnits, "lane c of a half-warp holds dlogits[row][c]");

// ---- loads ---------------------------------------------------------------------------------
// Every global load in the hot loops is unconditional (indices are clamped into the buffer,
// and what a clamped load brings is never stored): a load under a branch makes ptxas wait for
// it at the join, which serialised the loads and cost 3-5x (measured with step_bench).
//
// X is never written during a launch: the read-only path is safe for it. A uint8 X is loaded
// four pixels to a 32-bit word and normalised with pixel_norm (kernels/common/pixel_norm.h: the
// bits of v / 255.0f without a division or an int -> float conversion).
template <typename XT>
struct XLoad;
template <>
struct XLoad<float> {
  using Raw = float4;
  static __device__ __forceinline__ Raw load(const float* p) {
    return __ldg(reinterpret_cast<const float4*>(p));
  }
  static __device__ __forceinline__ float4 value(const Raw& r) { return r; }
};
template <>
struct XLoad<std::uint8_t> {
  using Raw = unsigned;  // 4 pixels
  static __device__ __forceinline__ Raw load(const std::uint8_t* p) {
    return __ldg(reinterpret_cast<const unsigned*>(p));
  }
  static __device__ __forceinline__ float4 value(const Raw& r) {
    return make_float4(pixel_norm(r, 0), pixel_norm(r, 1), pixel_norm(r, 2), pixel_norm(r, 3));
  }
};
// Buffers written by this kernel: plain (coherent) loads.
__device__ __forceinline__ float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ float comp(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ float& comp(float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <typename XT>
__device__ __forceinline__ const XT* x_of(const StepArgs& a);
template <>
__device__ __forceinline__ const float* x_of<float>(const StepArgs& a) {
  return a.x_f32;
}
template <>
__device__ __forceinline__ const std::uint8_t* x_of<std::uint8_t>(const StepArgs& a) {
  return a.x_u8;
}

// ---- phase A -------------------------------------------------------------------------------
// One quad pair of a phase-A lane's 4×4 register tile: W1 rows 4q .. 4q + 3 and 4qb .. 4qb + 3
// (4 units from w), then acc[i][jj] += x[i][k]·w[k][jj] for quad q, then quad qb, k ascending;
// x(h, i) gives row i's X quad of quad h; !second (qb == q, an odd chunk's last quad) zeroes
// the second quad's X: fmaf(0, w, acc) leaves acc as it is.
__device__ __forceinline__ void load_w_pair(float4 (&wb)[2][4], const float* w, int q, int qb, std::size_t ldw) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    wb[0][kk] = load4(w + static_cast<std::size_t>(4 * q + kk) * ldw);
    wb[1][kk] = load4(w + static_cast<std::size_t>(4 * qb + kk) * ldw);
  }
}
template <typename XGet>
__device__ __forceinline__ void fma_pair(float (&acc)[4][4], const float4 (&wb)[2][4], bool second, XGet x) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float4 xv = x(h, i);
      if (h == 1 && !second) xv = make_float4(0.f, 0.f, 0.f, 0.f);  // a select, no branch
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) acc[i][jj] = fmaf(comp(xv, kk), comp(wb[h][kk], jj), acc[i][jj]);
    }
  }
}

template <int TR, typename XT>
__device__ __forceinline__ void phase_a_item(const StepArgs& a, const XT* __restrict__ X,
                                             int tile, int chunk, int chunks) {
  using L = XLoad<XT>;
  constexpr int TC = kWarp / TR;
  constexpr int WM = 4 * TR, WN = 4 * TC;
  const int lane = threadIdx.x % kWarp;
  const int tiles_n = (a.hidden + WN - 1) / WN;
  const int r0 = (tile / tiles_n) * WM + 4 * (lane / TC);
  const int j = (tile % tiles_n) * WN + 4 * (lane % TC);
  const bool jv = j < a.hidden;
  const int quads = a.in / 4;
  const int q0 = static_cast<int>(static_cast<long long>(chunk) * quads / chunks);
  const int q1 = static_cast<int>(static_cast<long long>(chunk + 1) * quads / chunks);
  const XT* xr[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    xr[i] = X + static_cast<std::size_t>(min(r0 + i, a.rows - 1)) * a.in;
  const std::size_t ldw = static_cast<std::size_t>(a.hidden);
  const float* w = a.W1 + (jv ? j : a.hidden - 4);
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) acc[i][jj] = 0.f;
  // Two K quads per iteration, all 16 loads issued before the 128 fmaf (when the chunk has an
  // odd number of quads the second load repeats the first quad and its X is replaced by zeros:
  // fmaf(0, w, acc) leaves acc as it is).
  for (int q = q0; q < q1; q += 2) {
    const int qb = q + 1 < q1 ? q + 1 : q;
    typename L::Raw xa[2][4];
    float4 wb[2][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      xa[0][i] = L::load(xr[i] + 4 * q);
      xa[1][i] = L::load(xr[i] + 4 * qb);
    }
    load_w_pair(wb, w, q, qb, ldw);
    fma_pair(acc, wb, qb != q, [&](int h, int i) { return L::value(xa[h][i]); });
  }
  if (!jv) return;
  float* out = a.partial + static_cast<std::size_t>(chunk) * a.rows * a.hidden;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (r0 + i < a.rows)
      *reinterpret_cast<float4*>(out + static_cast<std::size_t>(r0 + i) * a.hidden + j) =
          make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

template <typename XT>
__device__ void phase_a(const StepArgs& a, const XT* X, const StepPlan& p) {
  const int WM = 4 * p.a_tr, WN = 128 / p.a_tr;
  const int tiles = ((a.rows + WM - 1) / WM) * ((a.hidden + WN - 1) / WN);
  const int items = tiles * p.a_chunks;
  const int first = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x) / kWarp;
  const int stride = static_cast<int>(gridDim.x) * kWarps;
  // Item = chunk·tiles + tile: neighbouring warps share a K chunk (and X rows).
  for (int it = first; it < items; it += stride) {
    const int chunk = it / tiles, tile = it % tiles;
    switch (p.a_tr) {
      case 1:
        phase_a_item<1>(a, X, tile, chunk, p.a_chunks);
        break;
      case 2:
        phase_a_item<2>(a, X, tile, chunk, p.a_chunks);
        break;
      case 4:
        phase_a_item<4>(a, X, tile, chunk, p.a_chunks);
        break;
      default:
        phase_a_item<8>(a, X, tile, chunk, p.a_chunks);
        break;
    }
  }
}

// Block-level phase A (p.a_tr == 8 and hidden a multiple of 128, i.e. 16-unit warp tiles in
// rows of a multiple of 8 tiles): the 8 warps of a block take items 8g .. 8g + 7, which share
// their K chunk and their 32 rows, so the block stages that X slice once in shared memory
// (normalised once per block instead of once per lane per use), then each warp runs the same
// loop as phase_a_item with X from shared memory: the same items, fmaf for fmaf, so the same
// bits. Staged row r sits at slot (r % 4)·8 + r / 4 and a slot holds `stride` (odd) float4s, so
// that the 8 rows one LDS.128 of a warp reads (rows 4m + i, m = lane / 4) fall in 8 different
// bank quads. Why (ncu, H200, batch 256 u8): the per-lane loop issued 341 instructions per 128
// useful fmaf (pixel normalisation 4 per pixel, the zero selects, X addresses) and half of its
// warp samples were issue-bound (selected / not selected); per step 22.67 -> 21.23 µs.
// kWS (where it fits: batch 256 and 64 at hidden 256, not batch 1024): each warp also copies its
// W1 rows [4·q0, 4·q1) × 16 units to shared memory with cp.async, issued with the X loads, so the
// item waits for one global round trip instead of one per quad pair; per step 21.17 -> 20.24 µs.
// (W1 of the next pair prefetched into registers instead spilled and was slower: 21.73 µs.)
__host__ __device__ inline int a_block_stride(int in, int chunks) {
  const int quads = in / 4;
  return ((quads + chunks - 1) / chunks) | 1;
}

template <typename XT, bool kWS>
__device__ void phase_a_block(const StepArgs& a, const XT* __restrict__ X, const StepPlan& p,
                              float4* sx) {
  using L = XLoad<XT>;
  constexpr int TC = 4, WM = 32, WN = 16;  // a_tr 8
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int tiles_n = a.hidden / WN;
  const int tiles = ((a.rows + WM - 1) / WM) * tiles_n;
  const int groups = tiles * p.a_chunks / kWarps;
  const int quads = a.in / 4;
  const int stride = a_block_stride(a.in, p.a_chunks);
  const std::size_t ldw = static_cast<std::size_t>(a.hidden);
  for (int g = blockIdx.x; g < groups; g += gridDim.x) {  // block-uniform
    const int it = g * kWarps + warp;
    const int chunk = it / tiles, tile = it % tiles;
    const int rbase = (tile / tiles_n) * WM;  // the same for the block's 8 warps
    const int q0 = static_cast<int>(static_cast<long long>(chunk) * quads / p.a_chunks);
    const int q1 = static_cast<int>(static_cast<long long>(chunk + 1) * quads / p.a_chunks);
    const int nq = q1 - q0;
    const int j0 = (tile % tiles_n) * WN;
    float4* sw = sx + WM * stride + warp * 16 * stride;  // kWS: this warp's W1 rows, [k][4]
    if constexpr (kWS) {
      for (int e = lane; e < 16 * nq; e += kWarp)
        __pipeline_memcpy_async(sw + e, a.W1 + static_cast<std::size_t>(4 * q0 + e / 4) * ldw + j0 + 4 * (e % 4), 16);
      __pipeline_commit();
    }
    // Stage rows rbase .. rbase + 31, quads q0 .. q1: element e = row + 32·qq, four loads in
    // flight per thread per pass (clamped into X; a clamped load is never stored).
    for (int e0 = 0; e0 < WM * nq; e0 += 4 * FusedStep::kThreads) {
      typename L::Raw raw[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = min(e0 + u * FusedStep::kThreads + static_cast<int>(threadIdx.x), WM * nq - 1);
        const int row = min(rbase + e % WM, a.rows - 1);
        raw[u] = L::load(X + static_cast<std::size_t>(row) * a.in + 4 * (q0 + e / WM));
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = e0 + u * FusedStep::kThreads + static_cast<int>(threadIdx.x);
        const int r = e % WM;
        if (e < WM * nq) sx[((r % 4) * 8 + r / 4) * stride + e / WM] = L::value(raw[u]);
      }
    }
    if constexpr (kWS) __pipeline_wait_prior(0);
    __syncthreads();
    const int r0 = rbase + 4 * (lane / TC);
    const int j = j0 + 4 * (lane % TC);  // < hidden: hidden % 16 == 0
    const float* w = a.W1 + j;
    const float4* xs = sx + (lane / TC) * stride;  // row 4m + i at slot i·8 + m
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) acc[i][jj] = 0.f;
    for (int q = q0; q < q1; q += 2) {  // as phase_a_item's 4-byte path
      const int qb = q + 1 < q1 ? q + 1 : q;
      float4 wb[2][4];
      if constexpr (kWS) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          wb[0][kk] = sw[(4 * (q - q0) + kk) * 4 + lane % TC];
          wb[1][kk] = sw[(4 * (qb - q0) + kk) * 4 + lane % TC];
        }
      } else {
        load_w_pair(wb, w, q, qb, ldw);
      }
      fma_pair(acc, wb, qb != q, [&](int h, int i) { return xs[i * 8 * stride + (h == 0 ? q : qb) - q0]; });
    }
    float* out = a.partial + static_cast<std::size_t>(chunk) * a.rows * a.hidden;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (r0 + i < a.rows)
        *reinterpret_cast<float4*>(out + static_cast<std::size_t>(r0 + i) * a.hidden + j) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    __syncthreads();  // the stage is rewritten by the next group
  }
}

// ---- phase B -------------------------------------------------------------------------------
// One level of phase B's reduce-scatter: a lane keeps values [0, Half) or [Half, 2·Half) of
// z[0, 2·Half) (by bit 2·Half of its lane), sends the other half to lane ^ 2·Half and adds what
// that lane sends; its kept values end in z[0, Half). The choice is a bit-mask blend, not
// `upper ? z[i] : z[Half + i]`, which the compiler turns into an indexed load from local memory.
template <int Half>
__device__ __forceinline__ void rs_level(float (&z)[kMaxC], int lane) {
  const unsigned m = (lane & (2 * Half)) != 0 ? 0xffffffffu : 0u;
#pragma unroll
  for (int i = 0; i < Half; ++i) {
    const unsigned lo_b = __float_as_uint(z[i]), hi_b = __float_as_uint(z[Half + i]);
    const float send = __uint_as_float((lo_b & m) | (hi_b & ~m));
    const float keep_v = __uint_as_float((hi_b & m) | (lo_b & ~m));
    z[i] = keep_v + __shfl_xor_sync(kFull, send, 2 * Half);
  }
}

// partial[0][j] + partial[1][j] + ... + partial[last][j] (stride cstride) in chunk order, W
// loads in flight per round: 16 when there are more than 8 chunks (one round at batch 256, not
// two), else 8 (clamped repeats of the last chunk would only add L1 traffic).
template <int W>
__device__ __forceinline__ float sum_partials(const float* zp, std::size_t cstride, int j, int last) {
  float s = 0.f;
  for (int k0 = 0; k0 <= last; k0 += W) {
    float v[W];
#pragma unroll
    for (int u = 0; u < W; ++u) v[u] = zp[static_cast<std::size_t>(min(k0 + u, last)) * cstride + j];
#pragma unroll
    for (int u = 0; u < W; ++u)
      if (k0 + u <= last) s = k0 + u == 0 ? v[u] : s + v[u];
  }
  return s;
}

// sW[j * classes + c] = W2[j][c] (W2's own layout); part: kWarps × kMaxC logit partials.
__device__ void phase_b(const StepArgs& a, const StepPlan& p, const float* sW, const float* sb1,
                        const float* sb2, float* part) {
  const int C = a.classes, Hd = a.hidden;
  const int wpr = p.b_wpr, rpb = kWarps / wpr;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int rloc = warp / wpr, pw = warp % wpr;
  const int items = (a.rows + rpb - 1) / rpb;
  const std::size_t cstride = static_cast<std::size_t>(a.rows) * Hd;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {  // block-uniform
    const int row = item * rpb + rloc;
    const bool valid = row < a.rows;  // warp-uniform
    const int label = a.labels[valid ? row : 0];  // issued early: used after the sums
    float z[kMaxC];
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) z[c] = 0.f;
    float* h = a.H + static_cast<std::size_t>(valid ? row : 0) * Hd;
    constexpr int kKeep = 4;  // this lane's first H values stay in registers for dH
    float keep[kKeep];
    if (valid) {
      const float* zp = a.partial + static_cast<std::size_t>(row) * Hd;
      const int last = p.a_chunks - 1;
      int t = 0;
      for (int j = pw * kWarp + lane; j < Hd; j += kWarp * wpr, ++t) {
        // partial[0] + partial[1] + ... in chunk order, in rounds of independent loads.
        float s = last < 8 ? sum_partials<8>(zp, cstride, j, last) : sum_partials<16>(zp, cstride, j, last);
        s = s + sb1[j];
        const float hv = s < 0.f ? 0.f : s;
        h[j] = hv;
#pragma unroll
        for (int k = 0; k < kKeep; ++k)
          if (k == t) keep[k] = hv;
#pragma unroll
        for (int c = 0; c < kMaxC; ++c) z[c] = fmaf(hv, sW[j * C + min(c, C - 1)], z[c]);
      }
    }
    // Reduce-scatter of the 16 class sums over the warp: at each level a lane keeps half of its
    // values and adds the partner's copy of that half (xor 16, 8, 4, 2), then xor 1 completes
    // the sum; lane l ends with class l >> 1 (a fixed order: deterministic). 16 shuffles
    // instead of a butterfly of all 16 classes (80); phase B is short enough that its code
    // size, not its arithmetic, set its time (ncu: instruction-fetch stalls).
    static_assert(kMaxC == 16, "the reduce-scatter below splits 16 classes over 32 lanes");
    rs_level<8>(z, lane);
    rs_level<4>(z, lane);
    rs_level<2>(z, lane);
    rs_level<1>(z, lane);
    z[0] += __shfl_xor_sync(kFull, z[0], 1);
    if ((lane & 1) == 0 && (lane >> 1) < C) part[warp * kMaxC + (lane >> 1)] = z[0];
    __syncthreads();
    if (valid) {
      // Softmax cross-entropy with class c on lane c (every warp of the row computes it: the
      // dH below needs all dlogits). Same expressions as fused_head; the max and the sum
      // are warp reductions (first maximum wins; bad label -> NaN, 0).
      const bool cv = lane < C;
      float lg = -INFINITY;
      if (cv) {
        float s = part[(rloc * wpr) * kMaxC + lane];
        for (int q = 1; q < wpr; ++q) s += part[(rloc * wpr + q) * kMaxC + lane];
        lg = s + sb2[lane];
      }
      float mx = lg;
      int arg = lane;
#pragma unroll
      for (int off = kWarp / 2; off > 0; off /= 2) {
        const float om = __shfl_xor_sync(kFull, mx, off);
        const int oa = __shfl_xor_sync(kFull, arg, off);
        const bool take = om > mx || (om == mx && oa < arg);
        mx = take ? om : mx;
        arg = take ? oa : arg;
      }
      const float e = cv ? expf(lg - mx) : 0.f;
      float sum = e;
#pragma unroll
      for (int off = kWarp / 2; off > 0; off /= 2) sum += __shfl_xor_sync(kFull, sum, off);
      const bool lab_ok = label >= 0 && label < C;
      const float z_label = __shfl_sync(kFull, lg, lab_ok ? label : 0);
      if (pw == 0 && lane == 0) {
        if (a.sample_loss != nullptr) a.sample_loss[row] = lab_ok ? logf(sum) - (z_label - mx) : NAN;
        if (a.sample_correct != nullptr) a.sample_correct[row] = (lab_ok && arg == label) ? 1 : 0;
      }
      if (a.train) {
        const float pr = e / sum;
        const float d = cv ? (lane == label ? pr - 1.f : pr) * a.grad_scale : 0.f;
        if (pw == 0 && cv) a.dlogits[static_cast<std::size_t>(row) * C + lane] = d;
        float dd[kMaxC];
#pragma unroll
        for (int c = 0; c < kMaxC; ++c) dd[c] = __shfl_sync(kFull, d, c);
        float* dh = a.dH + static_cast<std::size_t>(row) * Hd;
        int t = 0;
        for (int j = pw * kWarp + lane; j < Hd; j += kWarp * wpr, ++t) {
          float s = 0.f;
#pragma unroll
          for (int c = 0; c < kMaxC; ++c) {
            const float t = fmaf(dd[c], sW[j * C + min(c, C - 1)], s);
            s = c < C ? t : s;
          }
          float hv = 0.f;
#pragma unroll
          for (int k = 0; k < kKeep; ++k)
            if (k == t) hv = keep[k];
          if (t >= kKeep) hv = h[j];  // written by this lane above
          dh[j] = hv > 0.f ? s : 0.f;
        }
      }
    }
    __syncthreads();  // part is rewritten by the next item
  }
}

__device__ __forceinline__ void stamp(const StepArgs& a, int point) {
  if (a.stamps == nullptr) return;  // grid-uniform
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    a.stamps[static_cast<std::size_t>(point) * gridDim.x + blockIdx.x] = t;
  }
}

// ---- phase C -------------------------------------------------------------------------------
// Rows of X and dH a phase-C block stages per round (see phase_c_w1): as many as fit in
// kCStageFloats and let every thread stage at most kCStageIters quads of each.
__host__ __device__ constexpr int c_stage_rows(int c_split, int tn) {
  const int tpb = kWarps / c_split;
  const int by_smem = kCStageFloats / (kCTileM + tn * tpb);
  // Quads per row: X kCTileM / 4, dH tn / 4 · tpb; the larger bounds the rows.
  const int qpr = kCTileM / 4 > tn / 4 * tpb ? kCTileM / 4 : tn / 4 * tpb;
  const int by_iters = kCStageIters * FusedStep::kThreads / qpr;
  return (by_smem < by_iters ? by_smem : by_iters) / 8 * 8;
}
// Every c_split: a round's X and dH fit the staging area and kCStageIters quads per thread.
constexpr bool c_stage_fits() {
  for (int tn = c_tile_n(false); tn <= c_tile_n(true); tn *= 2)
    for (int s = 1; s <= kWarps; s *= 2) {
      const int tpb = kWarps / s, R = c_stage_rows(s, tn);
      if (R < 8 || R * (kCTileM + tn * tpb) > kCStageFloats) return false;
      if (R * (kCTileM / 4) > kCStageIters * FusedStep::kThreads) return false;
      if (R * (tn / 4 * tpb) > kCStageIters * FusedStep::kThreads) return false;
    }
  return true;
}
static_assert(c_stage_fits(), "phase C's staging round does not fit");

// gW1 tiles of one tile row: the block's tpb tiles are neighbours in one row of 32 inputs, so
// they share X's columns. Per round the block stages R = c_stage_rows rows of X (normalised
// once, as floats) and of dH (the block's tpb·TN units) in shared memory, every thread's
// loads issued together (one global round trip per round); then warp kp of a tile accumulates
// its share of the round's rows from shared memory (16 fmaf per two LDS.128; kTall: 32 fmaf
// per three, which is what bounds this loop when both blocks of an SM run it at big batches).
template <typename XT, bool kTall>
__device__ void phase_c_w1(const StepArgs& a, const XT* __restrict__ X, const StepPlan& p,
                           int item, float* smem) {
  using L = XLoad<XT>;
  const int S = p.c_split, tpb = kWarps / S;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  constexpr int TN = c_tile_n(kTall), LM = c_lane_m(kTall), LN = 4;
  constexpr int kLanesN = TN / LN;  // lanes across a tile's units (4, tall 8)
  const int tiles_n = (a.hidden + TN - 1) / TN;
  const int groups = (tiles_n + tpb - 1) / tpb;
  const int f0 = (item / groups) * kCTileM;           // the block's 32 inputs
  const int u0 = (item % groups) * tpb * TN;          // its first unit
  const int UW = tpb * TN;                            // units it stages
  const int tcol = (item % groups) * tpb + warp / S, kp = warp % S;
  const bool tv = tcol < tiles_n;  // warp-uniform
  const int f = f0 + LM * (lane / kLanesN);
  const int j = tcol * TN + LN * (lane % kLanesN);
  const bool jv = tv && j < a.hidden;
  const int R = c_stage_rows(S, TN);
  float* sX = smem;                                    // [R][kCTileM]
  float* sD = smem + static_cast<std::size_t>(R) * kCTileM;  // [R][UW]
  float acc[LM][LN];
#pragma unroll
  for (int i = 0; i < LM; ++i)
#pragma unroll
    for (int jj = 0; jj < LN; ++jj) acc[i][jj] = 0.f;
  constexpr int XQ = kCTileM / 4;  // quads of X per row
  const int DQ = UW / 4;           // quads of dH per row
  for (int r0 = 0; r0 < a.rows; r0 += R) {  // block-uniform
    const int n = min(R, a.rows - r0);
    // Stage: every load first (clamped into the buffers; a clamped load is never stored).
    typename L::Raw xr[kCStageIters];
    float4 dr[kCStageIters];
#pragma unroll
    for (int it = 0; it < kCStageIters; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * FusedStep::kThreads;
      const int xrow = min(e / XQ, n - 1), xcol = min(f0 + 4 * (e % XQ), a.in - 4);
      xr[it] = L::load(X + static_cast<std::size_t>(r0 + xrow) * a.in + xcol);
      const int drow = min(e / DQ, n - 1), dcol = min(u0 + 4 * (e % DQ), a.hidden - 4);
      dr[it] = load4(a.dH + static_cast<std::size_t>(r0 + drow) * a.hidden + dcol);
    }
#pragma unroll
    for (int it = 0; it < kCStageIters; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * FusedStep::kThreads;
      if (e < n * XQ) *reinterpret_cast<float4*>(sX + static_cast<std::size_t>(e) * 4) = L::value(xr[it]);
      if (e < n * DQ) *reinterpret_cast<float4*>(sD + static_cast<std::size_t>(e) * 4) = dr[it];
    }
    __syncthreads();
    if (tv) {
      const int k0 = kp * n / S, k1 = (kp + 1) * n / S;
      const float* xs = sX + LM * (lane / kLanesN);
      const float* ds = sD + (warp / S) * TN + LN * (lane % kLanesN);
#pragma unroll 4
      for (int r = k0; r < k1; ++r) {
        float4 xv[LM / 4];
#pragma unroll
        for (int h = 0; h < LM / 4; ++h)
          xv[h] = *reinterpret_cast<const float4*>(xs + static_cast<std::size_t>(r) * kCTileM + 4 * h);
        const float4 dv = *reinterpret_cast<const float4*>(ds + static_cast<std::size_t>(r) * UW);
#pragma unroll
        for (int i = 0; i < LM; ++i)
#pragma unroll
          for (int jj = 0; jj < LN; ++jj) acc[i][jj] = fmaf(comp(xv[i / 4], i % 4), comp(dv, jj), acc[i][jj]);
      }
    }
    __syncthreads();  // the stage is rewritten by the next round (or reused as `red`)
  }
  stamp(a, kStampGradC);
  float* red = smem;
  constexpr int kAcc = LM * LN;
  if (S > 1) {  // block-uniform
#pragma unroll
    for (int e = 0; e < kAcc; ++e) red[(warp * kAcc + e) * kWarp + lane] = acc[e / LN][e % LN];
    __syncthreads();
    if (tv && kp == 0) {
      for (int s = 1; s < S; ++s)
#pragma unroll
        for (int e = 0; e < kAcc; ++e) acc[e / LN][e % LN] += red[((warp + s) * kAcc + e) * kWarp + lane];
    }
    __syncthreads();  // red is rewritten by the next item
  }
  if (!(kp == 0 && jv)) return;
  const bool use_v = a.momentum > 0.f;
#pragma unroll
  for (int h = 0; h < LM / 4; ++h) {  // the lane's inputs, a quad at a time (in % 4 == 0)
    if (f + 4 * h >= a.in) break;
    float4 w[4], v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::size_t idx = static_cast<std::size_t>(f + 4 * h + i) * a.hidden + j;
      w[i] = load4(a.W1 + idx);
      v[i] = load4((use_v ? a.vW1 : a.W1) + idx);  // unconditional (unused without momentum)
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::size_t idx = static_cast<std::size_t>(f + 4 * h + i) * a.hidden + j;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {  // sgd_step's expressions (sgd_step.cuh), on registers
        float& pw = comp(w[i], jj);
        float& vw = comp(v[i], jj);
        const float g = acc[4 * h + i][jj];
        if (use_v) {
          vw = fmaf(a.momentum, vw, g);
          pw = fmaf(-a.lr, vw, pw);
        } else {
          pw = fmaf(-a.lr, g, pw);
        }
      }
      if (use_v) *reinterpret_cast<float4*>(a.vW1 + idx) = v[i];
      *reinterpret_cast<float4*>(a.W1 + idx) = w[i];
    }
  }
}

// dW2 / db1 for units [kSmallUnits·si, +kSmallUnits) and (si == 0) db2, then their SGD steps.
// Thread (u = lane % 16, g = 2·warp + lane / 16): unit u, row group g of kSmallGroups.
__device__ void phase_c_small(const StepArgs& a, int si, float* red) {
  constexpr int U = 4;  // rows per round
  const int C = a.classes;
  const int F = C + 2;  // f < C: dW2[j][f]; f == C: db1[j]; f == C + 1: db2[u]
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int tx = lane % kSmallUnits;
  const int ty = (static_cast<int>(threadIdx.x) / kWarp) * (kWarp / kSmallUnits) + lane / kSmallUnits;
  const int j0 = si * kSmallUnits;
  const int j = j0 + tx;
  const bool has_j = j < a.hidden;
  const int jc = has_j ? j : a.hidden - 1;
  const int cl = min(tx, C - 1);  // the dlogit this thread loads for db2 / the broadcast
  float gw[kMaxC];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c) gw[c] = 0.f;
  float gb1 = 0.f, gb2 = 0.f;
  // Rows ty, ty + 16, ... in order; the loop is warp-uniform (both half-warps run every round)
  // because the shuffles below need the whole warp.
  for (int r0 = 0; r0 < a.rows; r0 += U * kSmallGroups) {
    const int r = r0 + ty;
    float hv[U], dhv[U], dlv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::size_t rr = static_cast<std::size_t>(min(r + u * kSmallGroups, a.rows - 1));
      hv[u] = a.H[rr * a.hidden + jc];
      dhv[u] = a.dH[rr * a.hidden + jc];
      dlv[u] = a.dlogits[rr * C + cl];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool ok = r + u * kSmallGroups < a.rows;  // differs between the half-warps
      gb1 += ok ? dhv[u] : 0.f;
      gb2 += ok ? dlv[u] : 0.f;
#pragma unroll
      for (int c = 0; c < kMaxC; ++c) {
        // dlogits[row][c] from lane c of this half-warp (its row is this thread's row).
        const float dc = __shfl_sync(kFull, dlv[u], (lane & ~(kSmallUnits - 1)) + min(c, C - 1));
        gw[c] = ok ? fmaf(hv[u], dc, gw[c]) : gw[c];
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    if (c < C) red[(ty * F + c) * kSmallUnits + tx] = gw[c];
  red[(ty * F + C) * kSmallUnits + tx] = gb1;
  red[(ty * F + C + 1) * kSmallUnits + tx] = gb2;
  __syncthreads();
#pragma unroll
  for (int half = kSmallGroups / 2; half > 0; half /= 2) {
    if (ty < half)
      for (int f = 0; f < F; ++f)
        red[(ty * F + f) * kSmallUnits + tx] += red[((ty + half) * F + f) * kSmallUnits + tx];
    __syncthreads();
  }
  const bool use_v = a.momentum > 0.f;
  const int nj = a.hidden - j0 < kSmallUnits ? a.hidden - j0 : kSmallUnits;
  for (int e = threadIdx.x; e < nj * C; e += blockDim.x) {  // W2 rows j0.. are contiguous
    const int jl = e / C, c = e - jl * C;
    const std::size_t idx = static_cast<std::size_t>(j0) * C + e;
    sgd_step(a.W2 + idx, red[c * kSmallUnits + jl], use_v ? a.vW2 + idx : nullptr, a.lr, a.momentum);
  }
  if (static_cast<int>(threadIdx.x) < nj) {
    const int jj = j0 + static_cast<int>(threadIdx.x);
    sgd_step(a.b1 + jj, red[C * kSmallUnits + threadIdx.x], use_v ? a.vb1 + jj : nullptr, a.lr,
             a.momentum);
  }
  if (si == 0 && static_cast<int>(threadIdx.x) < C) {
    const int c = static_cast<int>(threadIdx.x);
    sgd_step(a.b2 + c, red[(C + 1) * kSmallUnits + c], use_v ? a.vb2 + c : nullptr, a.lr, a.momentum);
  }
  __syncthreads();  // red is rewritten by the next item
}

// Floats of shared memory the phases use (from offset 0).
__host__ __device__ std::size_t phase_smem_floats(int hidden, int classes) {
  const std::size_t b = static_cast<std::size_t>(classes) * static_cast<std::size_t>(hidden) +
                        static_cast<std::size_t>(hidden) + kMaxC + static_cast<std::size_t>(kWarps) * kMaxC;
  // The gW1 staging area, or the reduction over warps (kWarps × the tall lane tile's 32 × 32 lanes).
  constexpr std::size_t c_red = static_cast<std::size_t>(kWarps) * c_lane_m(true) * 4 * kWarp;
  const std::size_t c_w1 = c_red > kCStageFloats ? c_red : static_cast<std::size_t>(kCStageFloats);
  const std::size_t c_small = static_cast<std::size_t>(kSmallGroups) * (classes + 2) * kSmallUnits;
  return b > c_w1 ? (b > c_small ? b : c_small) : (c_w1 > c_small ? c_w1 : c_small);
}

constexpr int kBatchVec4 = static_cast<int>(sizeof(StepBatch) / 16);
static_assert(sizeof(StepBatch) % 16 == 0, "StepBatch travels as float4s");
// The two StepBatch slots of a multi-step launch follow the phases' shared memory, 16-byte
// aligned.
__host__ __device__ std::size_t batch_slot_offset(int hidden, int classes) {
  return (phase_smem_floats(hidden, classes) + 3) / 4 * 4;
}
std::size_t smem_floats(int hidden, int classes) {
  return batch_slot_offset(hidden, classes) + 2 * sizeof(StepBatch) / sizeof(float);
}

// One training (or evaluation) step, run by every block of the cooperative grid. The caller
// passes the shared memory and a grid barrier has to separate two calls (both kernels below).
// `prefetch` (may be nullptr): 16-byte-aligned global bytes copied to `prefetch_to` in shared
// memory by cp.async alongside W2 (complete at the first grid barrier), used to fetch the next
// step's StepBatch while this step runs.
template <typename XT, bool kTall>
__device__ __forceinline__ void step_body(const StepArgs& a, const StepPlan& p, cg::grid_group& grid,
                                          float* smem, const float4* prefetch, float4* prefetch_to) {
  const XT* X = x_of<XT>(a);
  stamp(a, kStampStart);
  const int C = a.classes;
  // Shared memory: sW (W2), sb1, sb2 and the logit partials for phases A-B; phase C reuses it
  // from offset 0 for its reduction buffers. W2, b1 and b2 are copied with cp.async while
  // phase A runs (waited for before the first grid barrier).
  float* work = smem;
  float* sW = work;
  float* sb1 = sW + static_cast<std::size_t>(C) * a.hidden;
  float* sb2 = sb1 + a.hidden;
  float* part = sb2 + kMaxC;
  {
    const int nw = a.hidden * C;
    for (int i = threadIdx.x; i < nw; i += blockDim.x) __pipeline_memcpy_async(sW + i, a.W2 + i, 4);
    for (int i = threadIdx.x; i < a.hidden; i += blockDim.x)
      __pipeline_memcpy_async(sb1 + i, a.b1 + i, 4);
    if (static_cast<int>(threadIdx.x) < C) __pipeline_memcpy_async(sb2 + threadIdx.x, a.b2 + threadIdx.x, 4);
    if (prefetch != nullptr && static_cast<int>(threadIdx.x) < kBatchVec4)
      __pipeline_memcpy_async(prefetch_to + threadIdx.x, prefetch + threadIdx.x, 16);
    __pipeline_commit();
  }
  {
    // Phase A's staging area (block-level path): after the logit partials, up to the end of the
    // phases' shared memory.
    const std::size_t off = (static_cast<std::size_t>(part - smem) + kWarps * kMaxC + 3) / 4 * 4;
    const std::size_t room = phase_smem_floats(a.hidden, C) - off;
    const std::size_t st = static_cast<std::size_t>(a_block_stride(a.in, p.a_chunks));
    if (p.a_tr == 8 && a.hidden % 128 == 0 && (32 + 16 * kWarps) * st * 4 <= room)
      phase_a_block<XT, true>(a, X, p, reinterpret_cast<float4*>(smem + off));
    else if (p.a_tr == 8 && a.hidden % 128 == 0 && 32 * st * 4 <= room)
      phase_a_block<XT, false>(a, X, p, reinterpret_cast<float4*>(smem + off));
    else
      phase_a(a, X, p);
  }
  __pipeline_wait_prior(0);
  stamp(a, kStampEndA);
  grid.sync();  // also a block barrier: sW is complete
  stamp(a, kStampStartB);
  phase_b(a, p, sW, sb1, sb2, part);
  stamp(a, kStampEndB);
  if (!a.train) return;
  grid.sync();
  stamp(a, kStampStartC);
  stamp(a, kStampGradC);  // moved on by a W1 item
  const int small = (a.hidden + kSmallUnits - 1) / kSmallUnits;
  const int tpb = kWarps / p.c_split;
  constexpr int TN = c_tile_n(kTall);
  const int items = small + ((a.in + kCTileM - 1) / kCTileM) * (((a.hidden + TN - 1) / TN + tpb - 1) / tpb);
  for (int item = blockIdx.x; item < items; item += gridDim.x) {  // block-uniform
    if (item < small)
      phase_c_small(a, item, work);
    else
      phase_c_w1<XT, kTall>(a, X, p, item - small, work);
  }
  stamp(a, kStampEndC);
}

// kStamped: a.stamps is honoured; the kernel for training and evaluation is built without.
// kTall: phase C's tall lane tile (FusedStep::tall_c); the plan must have been made for it.
template <typename XT, bool kStamped, bool kTall>
__global__ void __launch_bounds__(FusedStep::kThreads, 2)
    fused_step_kernel(StepArgs a, StepPlan p) {
  extern __shared__ float smem[];
  cg::grid_group grid = cg::this_grid();
  if (!kStamped) a.stamps = nullptr;
  step_body<XT, kTall>(a, p, grid, smem, nullptr, nullptr);
}

// Steps 0..n-1 in order, a grid barrier between two steps (which orders step s's parameter
// update before step s+1 reads the parameters, exactly as two launches would). The StepBatch of
// step s+1 travels to shared memory (two slots, alternating) during step s.
// kStamped: base.stamps is honoured (for step base.stamp_step); the training kernel is built
// without, so that the stamps cost it no registers.
template <typename XT, bool kStamped, bool kTall>
__global__ void __launch_bounds__(FusedStep::kThreads, 2)
    fused_steps_kernel(StepArgs base, const StepBatch* __restrict__ batches, int n) {
  extern __shared__ float smem[];
  cg::grid_group grid = cg::this_grid();
  auto* slots = reinterpret_cast<StepBatch*>(smem + batch_slot_offset(base.hidden, base.classes));
  if (static_cast<int>(threadIdx.x) < kBatchVec4)
    reinterpret_cast<float4*>(slots)[threadIdx.x] = reinterpret_cast<const float4*>(batches)[threadIdx.x];
  __syncthreads();
  for (int s = 0; s < n; ++s) {
    const StepBatch& bt = slots[s % 2];
    StepArgs a = base;
    if (!kStamped || s != base.stamp_step) a.stamps = nullptr;
    if (a.x_u8 != nullptr)
      a.x_u8 = static_cast<const std::uint8_t*>(bt.x);
    else
      a.x_f32 = static_cast<const float*>(bt.x);
    a.labels = bt.labels;
    a.sample_loss = bt.sample_loss;
    a.sample_correct = bt.sample_correct;
    a.rows = bt.rows;
    a.grad_scale = bt.grad_scale;
    const StepPlan p = bt.plan;
    const bool more = s + 1 < n;
    step_body<XT, kTall>(a, p, grid, smem,
                  more ? reinterpret_cast<const float4*>(batches + s + 1) : nullptr,
                  reinterpret_cast<float4*>(slots + (s + 1) % 2));
    if (more) grid.sync();
  }
}

bool aligned(const void* p, std::size_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; }

using StepKernel = void (*)(StepArgs, StepPlan);
using StepsKernel = void (*)(StepArgs, const StepBatch*, int);
template <typename XT>
StepKernel step_kernel(bool stamped, bool tall) {
  return stamped ? (tall ? fused_step_kernel<XT, true, true> : fused_step_kernel<XT, true, false>)
                 : (tall ? fused_step_kernel<XT, false, true> : fused_step_kernel<XT, false, false>);
}
template <typename XT>
StepsKernel steps_kernel(bool stamped, bool tall) {
  return stamped ? (tall ? fused_steps_kernel<XT, true, true> : fused_steps_kernel<XT, true, false>)
                 : (tall ? fused_steps_kernel<XT, false, true> : fused_steps_kernel<XT, false, false>);
}

}  // namespace

std::string step_unsupported(int in, int hidden, int classes) {
  if (in <= 0 || hidden <= 0 || classes <= 0) return "input, hidden and classes must be > 0";
  if (in % 4 != 0) return "input size " + std::to_string(in) + " is not a multiple of 4";
  if (hidden % 4 != 0) return "hidden size " + std::to_string(hidden) + " is not a multiple of 4";
  if (classes > kStepMaxClasses)
    return std::to_string(classes) + " classes (the single-launch step takes at most " +
           std::to_string(kStepMaxClasses) + ")";
  if (smem_floats(hidden, classes) > kMaxSmemFloats)
    return "W2 (" + std::to_string(hidden) + "×" + std::to_string(classes) + ") does not fit in " +
           std::to_string(kMaxSmemFloats * sizeof(float) / 1024) + " KiB of shared memory";
  return "";
}

std::string step_unsupported_here(int hidden, int classes) {
  int dev = 0, coop = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  if (!coop) return "this GPU does not support cooperative launches";
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const std::size_t need = smem_floats(hidden, classes) * sizeof(float);
  if (static_cast<std::size_t>(optin) < need)
    return "the single-launch step needs " + std::to_string(need / 1024) +
           " KiB of shared memory per block, this GPU gives at most " + std::to_string(optin / 1024);
  return "";
}

StepPlan plan_step(int rows, int in, int hidden) { return plan_step(rows, in, hidden, false); }

StepPlan plan_step(int rows, int in, int hidden, bool tall_c) {
  StepPlan p;
  p.rows = rows;
  p.a_tr = rows <= 4 ? 1 : rows <= 8 ? 2 : rows <= 16 ? 4 : 8;
  const int WM = 4 * p.a_tr, WN = 128 / p.a_tr;
  const long long tiles = static_cast<long long>((rows + WM - 1) / WM) * ((hidden + WN - 1) / WN);
  long long chunks = tiles > 0 ? kTargetAItems / tiles : 1;
  chunks = std::min<long long>(chunks, std::min(kMaxChunks, std::max(in / 4, 1)));
  p.a_chunks = static_cast<int>(std::max<long long>(chunks, 1));
  p.b_wpr = rows <= 256 ? 8 : rows <= 512 ? 4 : rows <= 1024 ? 2 : 1;
  // <= 64-128 rows a warp; the tall tile has half as many tiles, so it splits K one step further
  p.c_split = tall_c ? (rows >= 256 ? 8 : rows >= 128 ? 4 : 2)
                     : (rows >= 512 ? 8 : rows >= 256 ? 4 : rows >= 128 ? 2 : 1);
  return p;
}

std::size_t step_partial_floats(int max_batch, int in, int hidden) {
  std::size_t most = 0;
  for (int rows = 1; rows <= max_batch; ++rows)
    most = std::max(most, static_cast<std::size_t>(plan_step(rows, in, hidden).a_chunks) * rows *
                              static_cast<std::size_t>(hidden));
  return most;
}

FusedStep::FusedStep(int in, int hidden, int classes, int max_batch, int blocks_per_sm)
    : in_(in), hidden_(hidden), classes_(classes), max_batch_(max_batch), tall_(max_batch >= kTallRows) {
  if (const std::string why = step_unsupported(in, hidden, classes); !why.empty())
    throw std::invalid_argument("FusedStep: " + why);
  if (max_batch <= 0) throw std::invalid_argument("FusedStep: max_batch must be > 0");
  if (blocks_per_sm < 0) throw std::invalid_argument("FusedStep: blocks_per_sm must be >= 0");
  if (const std::string why = step_unsupported_here(hidden, classes); !why.empty())
    throw std::runtime_error("FusedStep: " + why);
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  smem_ = smem_floats(hidden, classes) * sizeof(float);
  // Both kernels (one step / several steps) for both input types must fit co-resident.
  int occ = 1 << 30;
  const auto fit = [&](const void* k) {
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_)));
    int o = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, k, kThreads, smem_));
    occ = std::min(occ, o);
  };
  for (const bool stamped : {false, true}) {  // the kernels of this launcher's phase-C kind
    fit(reinterpret_cast<const void*>(step_kernel<float>(stamped, tall_)));
    fit(reinterpret_cast<const void*>(step_kernel<std::uint8_t>(stamped, tall_)));
    fit(reinterpret_cast<const void*>(steps_kernel<float>(stamped, tall_)));
    fit(reinterpret_cast<const void*>(steps_kernel<std::uint8_t>(stamped, tall_)));
  }
  if (occ < 1) throw std::runtime_error("FusedStep: the kernel does not fit on an SM");
  if (blocks_per_sm > occ)
    throw std::invalid_argument("FusedStep: " + std::to_string(blocks_per_sm) +
                                " blocks per SM requested, " + std::to_string(occ) + " fit");
  grid_ = sms * (blocks_per_sm > 0 ? blocks_per_sm : std::min(occ, 2));
}

namespace {
[[noreturn]] void bad_arg(const char* where, const std::string& m) {
  throw std::invalid_argument(std::string(where) + ": " + m);
}
}  // namespace

void FusedStep::check_shared(const StepArgs& a) const {
  const auto bad = [](const std::string& m) { bad_arg("FusedStep", m); };
  if (a.in != in_ || a.hidden != hidden_ || a.classes != classes_)
    bad("shape differs from the one the launcher was built for");
  if ((a.x_f32 == nullptr) == (a.x_u8 == nullptr)) bad("exactly one of x_f32 / x_u8 must be set");
  if (!a.W1 || !a.b1 || !a.W2 || !a.b2 || !a.H || !a.partial)
    bad("W1, b1, W2, b2, H and partial are required");
  if (!aligned(a.W1, 16) || !aligned(a.H, 16) || !aligned(a.partial, 16))
    bad("W1, H and partial must be 16-byte aligned");
  if (a.train) {
    if (!a.dH || !a.dlogits) bad("training needs dH and dlogits");
    if (!aligned(a.dH, 16)) bad("dH must be 16-byte aligned");
    if (!(a.momentum >= 0.f)) bad("momentum must be >= 0");
    if (a.momentum > 0.f && (!a.vW1 || !a.vb1 || !a.vW2 || !a.vb2))
      bad("momentum > 0 needs every velocity");
    if (a.momentum > 0.f && !aligned(a.vW1, 16)) bad("vW1 must be 16-byte aligned");
  }
}

cudaLaunchConfig_t FusedStep::config(cudaStream_t s, cudaLaunchAttribute* attr) const {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid_));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem_;
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

void FusedStep::run(const StepArgs& a, cudaStream_t s) const {
  const auto bad = [](const std::string& m) { bad_arg("FusedStep::run", m); };
  check_shared(a);
  if (a.rows < 0 || a.rows > max_batch_)
    bad(std::to_string(a.rows) + " rows (max_batch is " + std::to_string(max_batch_) + ")");
  if (a.x_f32 && !aligned(a.x_f32, 16)) bad("a float X must be 16-byte aligned");
  if (a.x_u8 && !aligned(a.x_u8, 4)) bad("a uint8 X must be 4-byte aligned");
  if (!a.labels) bad("labels are required");
  if (a.rows == 0) return;
  const StepPlan plan = plan_step(a.rows, a.in, a.hidden, tall_);
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = config(s, attr);
  const bool stamped = a.stamps != nullptr;
  if (a.x_u8)
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, step_kernel<std::uint8_t>(stamped, tall_), a, plan));
  else
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, step_kernel<float>(stamped, tall_), a, plan));
}

StepBatch FusedStep::batch(const void* x, bool x_u8, const std::int32_t* labels,
                           float* sample_loss, std::int32_t* sample_correct, int rows) const {
  const auto bad = [](const std::string& m) { bad_arg("FusedStep::batch", m); };
  if (rows < 1 || rows > max_batch_)
    bad(std::to_string(rows) + " rows (1.." + std::to_string(max_batch_) + " allowed)");
  if (x == nullptr || labels == nullptr) bad("x and labels are required");
  if (!aligned(x, x_u8 ? 4 : 16)) bad(x_u8 ? "a uint8 X must be 4-byte aligned" : "a float X must be 16-byte aligned");
  StepBatch b;
  b.x = x;
  b.labels = labels;
  b.sample_loss = sample_loss;
  b.sample_correct = sample_correct;
  b.rows = rows;
  b.grad_scale = 1.0f / static_cast<float>(rows);
  b.plan = plan_step(rows, in_, hidden_, tall_);
  return b;
}

void FusedStep::run_steps(const StepArgs& base, const StepBatch* batches, int n,
                          cudaStream_t s) const {
  const auto bad = [](const std::string& m) { bad_arg("FusedStep::run_steps", m); };
  check_shared(base);
  if (!base.train) bad("a multi-step launch trains (evaluation is one run() per batch)");
  if (n < 0) bad("negative step count");
  if (base.stamps != nullptr && (base.stamp_step < 0 || base.stamp_step >= n))
    bad("stamp_step " + std::to_string(base.stamp_step) + " is not one of the " + std::to_string(n) +
        " steps");
  if (n > 0 && (batches == nullptr || !aligned(batches, 16)))
    bad("batches must be a 16-byte-aligned device array");
  if (n == 0) return;
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = config(s, attr);
  const bool stamped = base.stamps != nullptr;
  if (base.x_u8)
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, steps_kernel<std::uint8_t>(stamped, tall_), base, batches, n));
  else
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, steps_kernel<float>(stamped, tall_), base, batches, n));
}

}  // namespace memstrat::kernels
