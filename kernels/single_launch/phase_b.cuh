// phase_b.cuh: phase B of the single-launch step, the head.
//
// Per row (StepPlan::b_wpr warps per row): z = partial[0] + partial[1] + ... (chunk order; up to
// 16 loads in flight) + b1, H = z < 0 ? 0 : z, logits summed lane-wise then by a fixed
// reduce-scatter (lane 2c ends with class c), the warps of a row combined in warp order through
// shared memory, + b2. Softmax cross-entropy with class c on lane c (warp max / sum), loss,
// correct, dlogits, and dH = dlogits·W2^T ⊙ 1[H > 0] (W2 staged in shared memory).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

#include "kernels/single_launch/layout.h"
#include "kernels/single_launch/phase_helpers.cuh"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat::kernels::single_launch {
namespace {  // step_launcher.cu's translation unit only (internal linkage, as the kernels)

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

}  // namespace
}  // namespace memstrat::kernels::single_launch
