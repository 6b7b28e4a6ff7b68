// layout.h: the single-launch step's shapes and shared-memory layout, for the host (the shape
// rule and the launcher's shared-memory size) and the device (the phases), so both compute them
// from one definition. Included by the single-launch step's own files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/single_launch/step_launcher.h"

namespace memstrat::kernels::single_launch {

constexpr int kWarp = 32;
constexpr int kWarps = StepLauncher::kThreads / kWarp;  // 8
constexpr int kMaxC = kStepMaxClasses;
static_assert(kMaxC <= kWarp, "lane c stores dlogits[c]");
// The most shared memory a block may take (opt-in past 48 KiB): two blocks fit on an SM of
// cc 9.0 and one on cc 8.x; step_unsupported_here says when a GPU gives a block less.
constexpr std::size_t kMaxSmemFloats = 96 * 1024 / sizeof(float);
constexpr int kCTileM = 32;  // phase-C warp tile: 32 inputs × c_tile_n(kTall) units
// A lane's part of a phase-C warp tile: 4 inputs × 4 units (warp tile 32 × 16), or with the tall
// tile (launchers for batches of kTallRows and more) 8 inputs × 4 units (32 × 32).
__host__ __device__ constexpr int c_tile_n(bool tall) { return tall ? 32 : 16; }
__host__ __device__ constexpr int c_lane_m(bool tall) { return tall ? 8 : 4; }
constexpr int kCStageFloats = 16384;       // phase C's staging area (64 KiB: batch 256 in one round)
constexpr int kCStageIters = 8;            // quads of X and of dH one thread stages per round
constexpr int kSmallUnits = 16;            // units per small-layer block (half a warp)
constexpr int kSmallGroups = StepLauncher::kThreads / kSmallUnits;  // its row groups (16)
static_assert(kMaxC <= kSmallUnits, "lane c of a half-warp holds dlogits[row][c]");

// Phase A's block-level staging (phase_a_block, phase_a.cuh): float4 slots per staged row, odd.
__host__ __device__ inline int a_block_stride(int in, int chunks) {
  const int quads = in / 4;
  return ((quads + chunks - 1) / chunks) | 1;
}

// Rows of X and dH a phase-C block stages per round (phase_c_w1, phase_c.cuh): as many as fit in
// kCStageFloats and let every thread stage at most kCStageIters quads of each.
__host__ __device__ constexpr int c_stage_rows(int c_split, int tn) {
  const int tpb = kWarps / c_split;
  const int by_smem = kCStageFloats / (kCTileM + tn * tpb);
  // Quads per row: X kCTileM / 4, dH tn / 4 · tpb; the larger bounds the rows.
  const int qpr = kCTileM / 4 > tn / 4 * tpb ? kCTileM / 4 : tn / 4 * tpb;
  const int by_iters = kCStageIters * StepLauncher::kThreads / qpr;
  return (by_smem < by_iters ? by_smem : by_iters) / 8 * 8;
}
// Every c_split: a round's X and dH fit the staging area and kCStageIters quads per thread.
constexpr bool c_stage_fits() {
  for (int tn = c_tile_n(false); tn <= c_tile_n(true); tn *= 2)
    for (int s = 1; s <= kWarps; s *= 2) {
      const int tpb = kWarps / s, R = c_stage_rows(s, tn);
      if (R < 8 || R * (kCTileM + tn * tpb) > kCStageFloats) return false;
      if (R * (kCTileM / 4) > kCStageIters * StepLauncher::kThreads) return false;
      if (R * (tn / 4 * tpb) > kCStageIters * StepLauncher::kThreads) return false;
    }
  return true;
}
static_assert(c_stage_fits(), "phase C's staging round does not fit");

// Floats of shared memory the phases use (from offset 0).
__host__ __device__ inline std::size_t phase_smem_floats(int hidden, int classes) {
  const std::size_t b = static_cast<std::size_t>(classes) * static_cast<std::size_t>(hidden) +
                        static_cast<std::size_t>(hidden) + kMaxC + static_cast<std::size_t>(kWarps) * kMaxC;
  // The gW1 staging area, or the reduction over warps (kWarps × the tall lane tile's 32 × 32 lanes).
  constexpr std::size_t c_red = static_cast<std::size_t>(kWarps) * c_lane_m(true) * 4 * kWarp;
  const std::size_t c_w1 = c_red > kCStageFloats ? c_red : static_cast<std::size_t>(kCStageFloats);
  const std::size_t c_small = static_cast<std::size_t>(kSmallGroups) * (classes + 2) * kSmallUnits;
  return b > c_w1 ? (b > c_small ? b : c_small) : (c_w1 > c_small ? c_w1 : c_small);
}

// A gradients-only launch's `grads` (StepLauncher::run_gradients), Mlp's flat layout: W1 at 0,
// then b1, W2, b2 at these offsets.
__host__ __device__ inline std::size_t grad_b1_offset(int in, int hidden) {
  return static_cast<std::size_t>(in) * hidden;
}
__host__ __device__ inline std::size_t grad_w2_offset(int in, int hidden) {
  return grad_b1_offset(in, hidden) + static_cast<std::size_t>(hidden);
}
__host__ __device__ inline std::size_t grad_b2_offset(int in, int hidden, int classes) {
  return grad_w2_offset(in, hidden) + static_cast<std::size_t>(hidden) * classes;
}

constexpr int kBatchVec4 = static_cast<int>(sizeof(StepBatch) / 16);
static_assert(sizeof(StepBatch) % 16 == 0, "StepBatch travels as float4s");
// The two StepBatch slots of a multi-step launch follow the phases' shared memory, 16-byte
// aligned.
__host__ __device__ inline std::size_t batch_slot_offset(int hidden, int classes) {
  return (phase_smem_floats(hidden, classes) + 3) / 4 * 4;
}
/// Dynamic shared memory of the step kernels: the phases' and the two StepBatch slots.
inline std::size_t smem_floats(int hidden, int classes) {
  return batch_slot_offset(hidden, classes) + 2 * sizeof(StepBatch) / sizeof(float);
}

}  // namespace memstrat::kernels::single_launch
