// phase_a.cuh: phase A of the single-launch step, the forward GEMM Z = X·W1.
//
// Item = (warp tile, K chunk). A warp tile is (4·TR) rows × (128/TR) units, each lane a 4×4
// register tile (TR lanes down, 32/TR across; TR = 1, 2, 4, 8 by batch size so a batch of 8
// does not pad to 32 rows). Per K quad a lane loads 4 float4 of X (4 rows × 4 k; a uint8 row as
// one 32-bit word, normalised on load) and 4 float4 of W1 (4 k × 4 units) and does 64 fmaf, k
// ascending. K (= in) is cut into StepPlan::a_chunks chunks so that small batches still spread
// over ~1000 warps; each chunk's partial goes to `partial` (summed in chunk order by phase B).
// Where the 8 warps of a block share their chunk and rows (TR = 8, hidden % 128 == 0) the block
// stages that X slice in shared memory, normalised once, and the warps read X from there, and
// where it also fits each warp's W1 slice, copied with cp.async (phase_a_block: same items,
// same fmaf, same bits).
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/single_launch/layout.h"
#include "kernels/single_launch/phase_helpers.cuh"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat::kernels::single_launch {
namespace {  // step_launcher.cu's translation unit only (internal linkage, as the kernels)

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
    for (int e0 = 0; e0 < WM * nq; e0 += 4 * StepLauncher::kThreads) {
      typename L::Raw raw[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = min(e0 + u * StepLauncher::kThreads + static_cast<int>(threadIdx.x), WM * nq - 1);
        const int row = min(rbase + e % WM, a.rows - 1);
        raw[u] = L::load(X + static_cast<std::size_t>(row) * a.in + 4 * (q0 + e / WM));
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = e0 + u * StepLauncher::kThreads + static_cast<int>(threadIdx.x);
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

}  // namespace
}  // namespace memstrat::kernels::single_launch
