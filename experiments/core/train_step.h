// train_step.h: TrainStep, one implementation of the MLP's training step, and MlpBuffers, the
// model it works on. An Mlp holds exactly one TrainStep, chosen once when it is built
// (choose_step, step_choice.h):
//   SingleLaunchStep  single_launch_step.h  the whole step in ONE cooperative kernel launch
//   LtFusedStep       lt_fused_step.h       cuBLASLt GEMMs + fused kernels, 4-5 launches
//   LayerwiseStep     layerwise_step.h      layer by layer, any depth, cuBLAS or tiled GEMMs
// All compute the same function (model, loss, SGD with momentum) and differ only in fp32
// summation order; each is deterministic and independent of where the batch lives. A step only
// enqueues work on the Mlp's stream: no allocation, no synchronisation (reserve_steps and a
// changed train_steps table excepted, see there).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "experiments/core/mlp_config.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// The model a step trains: device buffers the Mlp allocates once and that outlive its step.
/// Parameters, gradients and velocities are one flat buffer each, W_0, b_0, W_1, b_1, ...
/// (W_l row-major [layers[l] × layers[l + 1]]).
struct MlpBuffers {
  float* params = nullptr;
  float* grads = nullptr;
  float* velocity = nullptr;
  std::size_t count = 0;                  // floats in each of the three
  std::vector<std::size_t> w_off, b_off;  // offsets of W_l and b_l
  float* x = nullptr;         // [max_batch × layers[0]]: a uint8 batch, normalised
  std::vector<float*> act;    // act[l], l >= 1: layer l's output [max_batch × layers[l]]
                              // (post-ReLU; logits last); act[0] unused (the batch itself)
  std::vector<float*> dz;     // dz[l]: dLoss/dz of layer l, as act[l]

  float* w(int l) const { return params + w_off[l]; }
  float* b(int l) const { return params + b_off[l]; }
};

class TrainStep {
 public:
  virtual ~TrainStep() = default;
  /// SingleLaunch, LtFused or Layerwise (to_string gives the record's name).
  virtual StepKind kind() const = 0;
  /// Forward, backward and SGD update on one batch (0 <= rows <= max_batch, checked by the
  /// Mlp). Writes each row's loss and correctness to sample_loss[first_sample + r] /
  /// sample_correct[first_sample + r] (device arrays).
  virtual void train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) = 0;
  /// Forward only on device-resident floats; per-row loss and correctness from offset 0.
  virtual void evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                        std::int32_t* sample_correct) = 0;

  /// Data-parallel training: forward and backward of one shard, its loss gradient scaled by
  /// grad_scale (1 / the global batch's rows), the parameter gradients written to `grads`
  /// (MlpBuffers::count floats, the flat layout); no update. Per-row outputs as train().
  /// Throws std::logic_error unless the step computes gradients apart from its update (the
  /// layer-by-layer step, and the single-launch step in its gradients-only launch; the cuBLASLt
  /// fused step computes its last gradients inside its update kernel).
  virtual void gradients(const BatchView& b, float grad_scale, float* grads, float* sample_loss,
                         std::int32_t* sample_correct);
  /// The SGD update (with momentum) of the parameters from `grads` (the flat layout): the steps
  /// with gradients() run update_parameters. Throws std::logic_error as gradients().
  virtual void update(const float* grads);

  /// Whether train_steps runs several steps in ONE kernel launch (the single-launch step).
  virtual bool multi_step() const { return false; }
  /// Room for train_steps calls of up to n views (allocates). Throws std::logic_error unless
  /// multi_step().
  virtual void reserve_steps(int n);
  /// The views' steps in ONE launch, in order: bitwise the same as train() on each in turn.
  /// Throws std::logic_error unless multi_step().
  virtual void train_steps(const std::vector<BatchView>& views, float* sample_loss,
                           std::int32_t* sample_correct, int first);
};

/// The momentum-SGD update of every parameter from `grads` (the flat layout) on `stream`:
/// kernels::sgd_update over the whole buffer, the update of every step with gradients() (one
/// update for all of them: the same fmaf expressions as the fused steps' own SGD steps, so
/// gradients() then update() give train()'s parameters where the gradients are the same bits).
void update_parameters(const MlpConfig& cfg, const MlpBuffers& buf, const float* grads,
                       cudaStream_t stream);

}  // namespace memstrat
