// step_body.cuh: one step of the single-launch kernels: phase A, a grid barrier, phase B, and
// (training, gradients only) a grid barrier and phase C, with the shared memory laid out for them.
#pragma once

#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/single_launch/layout.h"
#include "kernels/single_launch/phase_a.cuh"
#include "kernels/single_launch/phase_b.cuh"
#include "kernels/single_launch/phase_c.cuh"
#include "kernels/single_launch/phase_helpers.cuh"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat::kernels::single_launch {
namespace {  // step_launcher.cu's translation unit only (internal linkage, as the kernels)

namespace cg = cooperative_groups;

// One training (or evaluation) step, run by every block of the cooperative grid. The caller
// passes the shared memory and a grid barrier has to separate two calls (both kernels in
// step_launcher.cu).
// `prefetch` (may be nullptr): 16-byte-aligned global bytes copied to `prefetch_to` in shared
// memory by cp.async alongside W2 (complete at the first grid barrier), used to fetch the next
// step's StepBatch while this step runs.
// kGrads: gradients only (StepLauncher::run_gradients): phase C stores the gradients to `grads`
// (the flat layout) and steps nothing; `grads` is unused otherwise.
template <typename XT, bool kTall, bool kGrads>
__device__ __forceinline__ void step_body(const StepArgs& a, const StepPlan& p,
                                          cg::grid_group& grid, float* smem, const float4* prefetch,
                                          float4* prefetch_to, float* grads) {
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
      phase_c_small<kGrads>(a, item, work, grads);
    else
      phase_c_w1<XT, kTall, kGrads>(a, X, p, item - small, work, grads);
  }
  stamp(a, kStampEndC);
}

}  // namespace
}  // namespace memstrat::kernels::single_launch
