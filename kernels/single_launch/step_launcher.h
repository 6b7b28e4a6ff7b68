// step_launcher.h: the whole training step of the one-hidden-layer MLP in ONE kernel launch
// (Mlp's single-launch path, the default where it applies). A cooperative kernel runs three
// phases separated by grid-wide barriers:
//   A  forward GEMM   Z = X·W1, split over (warp tile × K chunk) work items, fp32 partials
//   B  head           H = relu(sum of the partials + b1), logits = H·W2 + b2, softmax
//                     cross-entropy (loss, correct), dlogits, dH = (dlogits·W2^T) ⊙ 1[H > 0]
//   C  update         gW1 = X^T·dH tile by tile with W1's momentum-SGD step applied in place,
//                     and dW2 / db2 / db1 with the SGD step of W2, b2, b1
// A uint8 batch is normalised on load (the expression of normalize_u8). Evaluation runs A and
// B only. Gradients only (run_gradients: data-parallel training, which combines the shards'
// gradients before one update) runs A, B and C with phase C writing the gradients it would have
// stepped with to a flat buffer instead, the parameters untouched; a kernel of its own (a
// template flag, the buffer its own argument), so StepArgs and the training kernels are the
// same as without it. Everything is fp32 on CUDA cores (no TF32).
//
// Determinism: how the work is split (StepPlan) depends only on rows / in / hidden, never on
// the grid size or the GPU; every sum has a fixed order; no atomics. So results are bitwise
// the same run after run, for every strategy's batch pointer, and for any grid size (a GPU
// test checks 1 and 2 blocks per SM).
//
// Supported shapes (step_unsupported says why not): in % 4 == 0, hidden % 4 == 0,
// 1 <= classes <= kStepMaxClasses, and W2 fits in 96 KiB of shared memory. X must be 16-byte
// (f32) / 4-byte (u8) aligned: every strategy's batches are when in % 4 == 0; run() refuses a
// pointer that is not rather than read it misaligned.
//
// Files of kernels/single_launch/:
//   step_launcher.{h,cu}  this interface; the kernels (one step, several steps) and StepLauncher
//   step_plan.{h,cpp}     host-side plan: shape rule, work split (StepPlan), phase-A workspace
//   layout.h              shapes and shared-memory layout shared by host and device
//   step_body.cuh         one step: the phases in order, with the grid barriers
//   phase_a.cuh           A, the forward GEMM
//   phase_b.cuh           B, the head
//   phase_c.cuh           C, the gradients and the SGD update (or, gradients only, their store)
//   phase_helpers.cuh     device helpers of every phase (loads, normalise on load, stamps)
// It also uses kernels/common/pixel_norm.h (pixel_norm) and sgd_step.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/single_launch/step_plan.h"

namespace memstrat::kernels {

inline constexpr int kStepMaxClasses = 16;

/// "" when the current device can run the single-launch step for this shape (cooperative
/// launch, the step's shared memory per block, 64 KiB and more), else the reason it cannot.
std::string step_unsupported_here(int hidden, int classes);

/// Floats of a gradients-only launch's `grads` (StepLauncher::run_gradients): W1, b1, W2, b2.
inline std::size_t step_grad_floats(int in, int hidden, int classes) {
  return static_cast<std::size_t>(in) * hidden + static_cast<std::size_t>(hidden) +
         static_cast<std::size_t>(hidden) * classes + static_cast<std::size_t>(classes);
}

/// Everything one launch reads and writes. Exactly one of x_f32 / x_u8 is set.
struct StepArgs {
  const float* x_f32 = nullptr;         // [rows × in]
  const std::uint8_t* x_u8 = nullptr;   // [rows × in], normalised as normalize_u8 does
  const std::int32_t* labels = nullptr; // [rows]
  int rows = 0, in = 0, hidden = 0, classes = 0;
  float* W1 = nullptr;  // [in × hidden]     parameters, updated in place when train
  float* b1 = nullptr;  // [hidden]
  float* W2 = nullptr;  // [hidden × classes]
  float* b2 = nullptr;  // [classes]
  float* vW1 = nullptr; // momentum velocities (unused when momentum == 0)
  float* vb1 = nullptr;
  float* vW2 = nullptr;
  float* vb2 = nullptr;
  float* H = nullptr;        // [rows × hidden] workspace (post-ReLU activations)
  float* dH = nullptr;       // [rows × hidden] workspace (train only)
  float* dlogits = nullptr;  // [rows × classes] workspace (train only)
  float* partial = nullptr;  // step_partial_floats(...) workspace
  float* sample_loss = nullptr;            // [rows], may be nullptr
  std::int32_t* sample_correct = nullptr;  // [rows], may be nullptr
  float grad_scale = 1.f;  // dlogits factor (1/rows: the mean loss; data-parallel 1/global rows)
  float lr = 0.f, momentum = 0.f;
  bool train = true;  // false: forward, loss and correct only (phases A and B)
  /// Profiling only (nullptr in training): kStepStamps × grid_blocks() %globaltimer readings,
  /// stamps[k * grid + block] = when `block` passed point k (see StepStamp) in run()'s step, or
  /// in step stamp_step of a run_steps launch. Runs a kernel built with the stamps (the one for
  /// untimed launches has none) that costs a block barrier per point, so the timed launch is
  /// slightly slower than an untimed one. Training and evaluation only (not run_gradients).
  unsigned long long* stamps = nullptr;
  int stamp_step = 0;
};

/// What changes from one step to the next when several steps run in one launch
/// (StepLauncher::run_steps). Build it with StepLauncher::batch, which checks it.
struct alignas(16) StepBatch {
  const void* x = nullptr;  // [rows × in], uint8 or float as the launch's StepArgs says
  const std::int32_t* labels = nullptr;
  float* sample_loss = nullptr;            // may be nullptr
  std::int32_t* sample_correct = nullptr;  // may be nullptr
  int rows = 0;
  float grad_scale = 1.f;
  StepPlan plan;
};

/// The points stamped by StepArgs::stamps. kStampStart: the step starts (in run_steps, when the
/// barrier after the previous step released the block); kStampGradC: the block's last W1 item
/// has its gW1 tile (before the reduction over warps and the update; at kStampStartC for a
/// block without W1 items).
enum StepStamp { kStampStart, kStampEndA, kStampStartB, kStampEndB, kStampStartC, kStampEndC, kStampGradC };
inline constexpr int kStepStamps = 7;

/// The launcher: sizes the cooperative grid once (occupancy query at construction, never
/// inside a graph capture) and checks every call's arguments.
class StepLauncher {
 public:
  /// blocks_per_sm == 0: as many as fit, at most 2. The grid is blocks_per_sm blocks on every
  /// SM less free_blocks: block slots left to a kernel that runs beside every step (at 2 blocks
  /// per SM the step holds all of an SM's registers, so each slot left free is room for up to
  /// four 256-thread blocks of SmCopy on that SM); at least one block stays with the step.
  StepLauncher(int in, int hidden, int classes, int max_batch, int blocks_per_sm = 0,
               int free_blocks = 0);
  /// One training (a.train) or evaluation step; rows == 0 launches nothing.
  void run(const StepArgs& a, cudaStream_t s) const;
  /// One gradients-only step: `a` as for a training run() (train true; velocities, lr and
  /// momentum unused, stamps refused), phase C storing each parameter's gradient, exactly the
  /// value the training step would have stepped it with (the loss gradient scaled by
  /// a.grad_scale), to `grads` instead of stepping it: Mlp's flat layout, W1 [in × hidden], b1
  /// [hidden], W2 [hidden × classes], b2 [classes], one after another (step_grad_floats), 4-byte
  /// alignment enough (a data-parallel gather slot has no more). Parameters and velocities are
  /// left as they are; loss and correct as run(). rows == 0 launches nothing (grads untouched).
  void run_gradients(const StepArgs& a, float* grads, cudaStream_t s) const;
  /// One training step's per-batch part, checked (rows in 1..max_batch, alignment, non-null x
  /// and labels); grad_scale = 1/rows (the mean loss), plan = plan_step(rows, ..., tall_c()).
  StepBatch batch(const void* x, bool x_u8, const std::int32_t* labels, float* sample_loss,
                  std::int32_t* sample_correct, int rows) const;
  /// Steps 0..n-1 in ONE launch, in order, with a grid barrier between two steps: the same
  /// arithmetic in the same order as n run() calls (bitwise the same parameters and losses).
  /// `base` holds what every step shares (parameters, workspaces, lr, momentum; train must be
  /// true, x_u8 or x_f32 set to any non-null pointer of the steps' input type, rows, labels and
  /// sample_* are ignored; stamps, if set, records step stamp_step, in 0..n-1, with a kernel
  /// built for it); `batches` is a device array of n StepBatch made by batch() with the same
  /// input type.
  void run_steps(const StepArgs& base, const StepBatch* batches, int n, cudaStream_t s) const;
  int grid_blocks() const { return grid_; }
  /// Phase C's gW1 warp tiles are 32 inputs × 32 units, a lane 8 × 4 (half the shared-memory
  /// reads per fmaf of the 32 × 16 tile, 4 × 4 a lane), in launchers for batches of kTallRows
  /// and more: there it wins (batch 1024: -10 µs per step), at batch 256 it lost. Fixed per
  /// launcher, so every step of one launcher (its last partial batch too) sums in the same way.
  bool tall_c() const { return tall_; }
  static constexpr int kTallRows = 512;
  static constexpr int kThreads = 256;

 private:
  // Everything but the per-batch fields; steps: the parameters are stepped (velocities needed).
  void check_shared(const StepArgs& a, bool steps) const;
  void check_one(const StepArgs& a, const char* where, bool steps) const;  // + the batch's
  cudaLaunchConfig_t config(cudaStream_t s, cudaLaunchAttribute* attr) const;
  int in_, hidden_, classes_, max_batch_;
  bool tall_ = false;
  int grid_ = 0;
  std::size_t smem_ = 0;
};

}  // namespace memstrat::kernels
