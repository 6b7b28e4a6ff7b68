// step_launcher.cu: the single-launch training step's kernels and their launcher, StepLauncher
// (see step_launcher.h).
//
// One cooperative kernel, 256-thread blocks (8 warps), a grid of 1-2 blocks per SM, three
// phases with cooperative_groups grid barriers between them. Work items are dealt out
// round-robin (item = first + k·stride), and what an item computes never depends on which
// warp or block runs it, so the grid size changes timing only.
//
//   A  the forward GEMM Z = X·W1 in K chunks (phase_a.cuh)
//   B  the head: H, logits, softmax cross-entropy, dlogits, dH (phase_b.cuh)
//   C  gW1 = X^T·dH with W1's SGD step in place, and the small layer's gradients and steps
//      (phase_c.cuh); in a gradients-only launch (run_gradients) the gradients are stored
//      instead of stepped, by a kernel of its own that takes the gradients' address as its own
//      argument: StepArgs and the training kernels are what they were without it
// step_body.cuh runs them in order with the grid barriers; layout.h holds the shapes and the
// shared-memory layout host and device share; step_plan.cpp the host-side plan.
// Phase A reads W1 and phase B reads W2 / b1 before the barrier after which phase C writes
// them, and data written in one phase is first read after a barrier, never before in the same
// launch.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "kernels/single_launch/layout.h"
#include "kernels/single_launch/step_body.cuh"
#include "kernels/single_launch/step_launcher.h"

namespace cg = cooperative_groups;

namespace memstrat::kernels {
namespace {

using single_launch::batch_slot_offset;
using single_launch::kBatchVec4;
using single_launch::smem_floats;
using single_launch::step_body;

// kStamped: a.stamps is honoured; the kernel for training and evaluation is built without.
// kTall: phase C's tall lane tile (StepLauncher::tall_c); the plan must have been made for it.
template <typename XT, bool kStamped, bool kTall>
__global__ void __launch_bounds__(StepLauncher::kThreads, 2)
    fused_step_kernel(StepArgs a, StepPlan p) {
  extern __shared__ float smem[];
  cg::grid_group grid = cg::this_grid();
  if (!kStamped) a.stamps = nullptr;
  step_body<XT, kTall, false>(a, p, grid, smem, nullptr, nullptr, nullptr);
}

// The gradients-only step (StepLauncher::run_gradients): phases A, B and C, phase C storing the
// gradients to `grads` (the flat layout, step_grad_floats) instead of stepping the parameters.
// Never stamped.
template <typename XT, bool kTall>
__global__ void __launch_bounds__(StepLauncher::kThreads, 2)
    grads_step_kernel(StepArgs a, StepPlan p, float* grads) {
  extern __shared__ float smem[];
  cg::grid_group grid = cg::this_grid();
  a.stamps = nullptr;
  step_body<XT, kTall, true>(a, p, grid, smem, nullptr, nullptr, grads);
}

// Steps 0..n-1 in order, a grid barrier between two steps (which orders step s's parameter
// update before step s+1 reads the parameters, exactly as two launches would). The StepBatch of
// step s+1 travels to shared memory (two slots, alternating) during step s.
// kStamped: base.stamps is honoured (for step base.stamp_step); the training kernel is built
// without, so that the stamps cost it no registers.
template <typename XT, bool kStamped, bool kTall>
__global__ void __launch_bounds__(StepLauncher::kThreads, 2)
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
    step_body<XT, kTall, false>(a, p, grid, smem,
                                more ? reinterpret_cast<const float4*>(batches + s + 1) : nullptr,
                                reinterpret_cast<float4*>(slots + (s + 1) % 2), nullptr);
    if (more) grid.sync();
  }
}

bool aligned(const void* p, std::size_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; }

using StepKernel = void (*)(StepArgs, StepPlan);
using StepsKernel = void (*)(StepArgs, const StepBatch*, int);
using GradsKernel = void (*)(StepArgs, StepPlan, float*);
template <typename XT>
StepKernel step_kernel(bool stamped, bool tall) {
  return stamped ? (tall ? fused_step_kernel<XT, true, true> : fused_step_kernel<XT, true, false>)
                 : (tall ? fused_step_kernel<XT, false, true> : fused_step_kernel<XT, false, false>);
}
template <typename XT>
GradsKernel grads_kernel(bool tall) {
  return tall ? grads_step_kernel<XT, true> : grads_step_kernel<XT, false>;
}
template <typename XT>
StepsKernel steps_kernel(bool stamped, bool tall) {
  return stamped ? (tall ? fused_steps_kernel<XT, true, true> : fused_steps_kernel<XT, true, false>)
                 : (tall ? fused_steps_kernel<XT, false, true> : fused_steps_kernel<XT, false, false>);
}

}  // namespace

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

StepLauncher::StepLauncher(int in, int hidden, int classes, int max_batch, int blocks_per_sm,
                           int free_blocks)
    : in_(in), hidden_(hidden), classes_(classes), max_batch_(max_batch), tall_(max_batch >= kTallRows) {
  if (const std::string why = step_unsupported(in, hidden, classes); !why.empty())
    throw std::invalid_argument("StepLauncher: " + why);
  if (max_batch <= 0) throw std::invalid_argument("StepLauncher: max_batch must be > 0");
  if (blocks_per_sm < 0) throw std::invalid_argument("StepLauncher: blocks_per_sm must be >= 0");
  if (free_blocks < 0) throw std::invalid_argument("StepLauncher: free_blocks must be >= 0");
  if (const std::string why = step_unsupported_here(hidden, classes); !why.empty())
    throw std::runtime_error("StepLauncher: " + why);
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
  fit(reinterpret_cast<const void*>(grads_kernel<float>(tall_)));
  fit(reinterpret_cast<const void*>(grads_kernel<std::uint8_t>(tall_)));
  if (occ < 1) throw std::runtime_error("StepLauncher: the kernel does not fit on an SM");
  if (blocks_per_sm > occ)
    throw std::invalid_argument("StepLauncher: " + std::to_string(blocks_per_sm) +
                                " blocks per SM requested, " + std::to_string(occ) + " fit");
  const int full = sms * (blocks_per_sm > 0 ? blocks_per_sm : std::min(occ, 2));
  if (free_blocks >= full)
    throw std::invalid_argument("StepLauncher: " + std::to_string(free_blocks) +
                                " block slots left free of a grid of " + std::to_string(full) +
                                " leave none for the step");
  grid_ = full - free_blocks;
}

namespace {
[[noreturn]] void bad_arg(const char* where, const std::string& m) {
  throw std::invalid_argument(std::string(where) + ": " + m);
}
}  // namespace

void StepLauncher::check_shared(const StepArgs& a, bool steps) const {
  const auto bad = [](const std::string& m) { bad_arg("StepLauncher", m); };
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
    if (steps && a.momentum > 0.f && (!a.vW1 || !a.vb1 || !a.vW2 || !a.vb2))
      bad("momentum > 0 needs every velocity");
    if (steps && a.momentum > 0.f && !aligned(a.vW1, 16)) bad("vW1 must be 16-byte aligned");
  }
}

cudaLaunchConfig_t StepLauncher::config(cudaStream_t s, cudaLaunchAttribute* attr) const {
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

void StepLauncher::check_one(const StepArgs& a, const char* where, bool steps) const {
  const auto bad = [where](const std::string& m) { bad_arg(where, m); };
  check_shared(a, steps);
  if (a.rows < 0 || a.rows > max_batch_)
    bad(std::to_string(a.rows) + " rows (max_batch is " + std::to_string(max_batch_) + ")");
  if (a.x_f32 && !aligned(a.x_f32, 16)) bad("a float X must be 16-byte aligned");
  if (a.x_u8 && !aligned(a.x_u8, 4)) bad("a uint8 X must be 4-byte aligned");
  if (!a.labels) bad("labels are required");
}

void StepLauncher::run(const StepArgs& a, cudaStream_t s) const {
  check_one(a, "StepLauncher::run", true);
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

void StepLauncher::run_gradients(const StepArgs& a, float* grads, cudaStream_t s) const {
  const auto bad = [](const std::string& m) { bad_arg("StepLauncher::run_gradients", m); };
  if (!a.train) bad("gradients need the training step's backward pass (train true)");
  if (a.stamps != nullptr) bad("a gradients-only launch is not stamped (stamps time training)");
  if (grads == nullptr || !aligned(grads, 4)) bad("grads must be a 4-byte-aligned device array");
  check_one(a, "StepLauncher::run_gradients", false);
  if (a.rows == 0) return;
  const StepPlan plan = plan_step(a.rows, a.in, a.hidden, tall_);
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = config(s, attr);
  if (a.x_u8)
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, grads_kernel<std::uint8_t>(tall_), a, plan, grads));
  else
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, grads_kernel<float>(tall_), a, plan, grads));
}

StepBatch StepLauncher::batch(const void* x, bool x_u8, const std::int32_t* labels,
                           float* sample_loss, std::int32_t* sample_correct, int rows) const {
  const auto bad = [](const std::string& m) { bad_arg("StepLauncher::batch", m); };
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

void StepLauncher::run_steps(const StepArgs& base, const StepBatch* batches, int n,
                          cudaStream_t s) const {
  const auto bad = [](const std::string& m) { bad_arg("StepLauncher::run_steps", m); };
  check_shared(base, true);
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
