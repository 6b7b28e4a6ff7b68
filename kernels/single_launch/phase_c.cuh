// phase_c.cuh: phase C of the single-launch step, the gradients and the SGD update.
//
// gW1 = X^T·dH in 32×16 tiles (lane: 4 inputs × 4 units, one float4 of X and of dH per row; in
// launchers for kTallRows rows and more 32×32 tiles, lane 8 inputs × 4 units; X and dH staged in
// shared memory, up to 256 rows a round in 64 KiB, the kernel's only use of shared memory past
// 48 KiB, with phase A's staging), K = rows split over StepPlan::c_split warps and combined in
// warp order through shared memory; the owning lane applies the momentum-SGD step to its 4×4
// (tall: 8×4) of W1 / vW1 at once (gW1 never goes to memory). Blocks of another kind sum dW2,
// db1 (16 units per block, 16 row groups, fixed tree) and db2 and step W2, b1, b2.
// kGrads (a gradients-only launch, StepLauncher::run_gradients): the same sums in the same order,
// and where the SGD step would take a gradient it is stored to `grads` instead (Mlp's flat
// layout, layout.h grad_*_offset); no parameter or velocity is read or written. A template flag,
// so the training kernels (kGrads false, `grads` unused) are the code they were without it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/common/sgd_step.cuh"
#include "kernels/single_launch/layout.h"
#include "kernels/single_launch/phase_helpers.cuh"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat::kernels::single_launch {
namespace {  // step_launcher.cu's translation unit only (internal linkage, as the kernels)

// gW1 tiles of one tile row: the block's tpb tiles are neighbours in one row of 32 inputs, so
// they share X's columns. Per round the block stages R = c_stage_rows rows of X (normalised
// once, as floats) and of dH (the block's tpb·TN units) in shared memory, every thread's
// loads issued together (one global round trip per round); then warp kp of a tile accumulates
// its share of the round's rows from shared memory (16 fmaf per two LDS.128; kTall: 32 fmaf
// per three, which is what bounds this loop when both blocks of an SM run it at big batches).
template <typename XT, bool kTall, bool kGrads>
__device__ void phase_c_w1(const StepArgs& a, const XT* __restrict__ X, const StepPlan& p, int item,
                           float* smem, float* grads) {
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
      const int e = static_cast<int>(threadIdx.x) + it * StepLauncher::kThreads;
      const int xrow = min(e / XQ, n - 1), xcol = min(f0 + 4 * (e % XQ), a.in - 4);
      xr[it] = L::load(X + static_cast<std::size_t>(r0 + xrow) * a.in + xcol);
      const int drow = min(e / DQ, n - 1), dcol = min(u0 + 4 * (e % DQ), a.hidden - 4);
      dr[it] = load4(a.dH + static_cast<std::size_t>(r0 + drow) * a.hidden + dcol);
    }
#pragma unroll
    for (int it = 0; it < kCStageIters; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * StepLauncher::kThreads;
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
  if constexpr (kGrads) {
    // The lane's LM × 4 of gW1, as the SGD step below takes them; scalar stores (a data-parallel
    // gather slot is 4-byte aligned only), a warp's lanes still write whole 64-byte row pieces.
#pragma unroll
    for (int h = 0; h < LM / 4; ++h) {  // a quad of inputs at a time, as below
      if (f + 4 * h >= a.in) break;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float* g = grads + static_cast<std::size_t>(f + 4 * h + i) * a.hidden + j;
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) g[jj] = acc[4 * h + i][jj];
      }
    }
    return;
  }
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

// dW2 / db1 for units [kSmallUnits·si, +kSmallUnits) and (si == 0) db2, then their SGD steps
// (kGrads: their stores to `grads`).
// Thread (u = lane % 16, g = 2·warp + lane / 16): unit u, row group g of kSmallGroups.
template <bool kGrads>
__device__ void phase_c_small(const StepArgs& a, int si, float* red, float* grads) {
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
  const int nj = a.hidden - j0 < kSmallUnits ? a.hidden - j0 : kSmallUnits;
  if constexpr (kGrads) {  // the values the SGD steps below take, at the parameters' places
    float* gW2 = grads + grad_w2_offset(a.in, a.hidden);
    float* gb1 = grads + grad_b1_offset(a.in, a.hidden);
    float* gb2 = grads + grad_b2_offset(a.in, a.hidden, C);
    for (int e = threadIdx.x; e < nj * C; e += blockDim.x) {  // W2 rows j0.. are contiguous
      const int jl = e / C, c = e - jl * C;
      gW2[static_cast<std::size_t>(j0) * C + e] = red[c * kSmallUnits + jl];
    }
    if (static_cast<int>(threadIdx.x) < nj)
      gb1[j0 + threadIdx.x] = red[C * kSmallUnits + threadIdx.x];
    if (si == 0 && static_cast<int>(threadIdx.x) < C)
      gb2[threadIdx.x] = red[(C + 1) * kSmallUnits + threadIdx.x];
    __syncthreads();  // red is rewritten by the next item
    return;
  }
  const bool use_v = a.momentum > 0.f;
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

}  // namespace
}  // namespace memstrat::kernels::single_launch
