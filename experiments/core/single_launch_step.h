// single_launch_step.h: SingleLaunchStep, the whole training step of the one-hidden-layer MLP in
// ONE cooperative kernel launch (StepKind::SingleLaunch; kernels/single_launch/): forward,
// backward and SGD update, evaluation too; for a strategy that hands out every batch up front,
// all of an epoch's steps in one launch (train_steps); and, for data-parallel training, one
// shard's gradients in one launch (gradients: the kernel's gradients-only launch) with the
// shared update apart (update_parameters).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "common/cuda_raii.h"
#include "experiments/core/train_step.h"
#include "kernels/single_launch/step_launcher.h"

namespace memstrat {

class SingleLaunchStep final : public TrainStep {
 public:
  /// Sizes the cooperative grid now (an occupancy query: never during a graph capture) and
  /// allocates phase A's partial sums. buf belongs to the Mlp and outlives this step.
  SingleLaunchStep(const MlpConfig& cfg, const MlpBuffers& buf, cudaStream_t stream);
  StepKind kind() const override { return StepKind::SingleLaunch; }
  void train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) override;
  void evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                std::int32_t* sample_correct) override;
  /// ONE launch: train()'s launch with phase C storing the gradients to `grads` instead of
  /// stepping the parameters, the loss gradient scaled by grad_scale. With grad_scale 1 / rows,
  /// gradients() then update() give train()'s parameters bit for bit (the same gradient bits,
  /// the same fmaf expressions of the SGD step). 0 rows: zeros.
  void gradients(const BatchView& b, float grad_scale, float* grads, float* sample_loss,
                 std::int32_t* sample_correct) override;
  /// update_parameters (train_step.h): the layer-by-layer step's update.
  void update(const float* grads) override;
  bool multi_step() const override { return true; }
  void reserve_steps(int n) override;
  /// The views' rows [first, first + size) of the per-step table are uploaded when they change
  /// (a stream synchronisation, then one copy); the same views again cost nothing.
  void train_steps(const std::vector<BatchView>& views, float* sample_loss,
                   std::int32_t* sample_correct, int first) override;

 private:
  kernels::StepArgs args(int rows) const;        // what training and evaluation share
  kernels::StepArgs train_args(int rows) const;  // + velocities, gradient workspaces, lr
  // train() (grads == nullptr) and gradients(): one launch on b's rows.
  void launch(const BatchView& b, float grad_scale, float* grads, float* sample_loss,
              std::int32_t* sample_correct);
  MlpConfig cfg_;
  MlpBuffers buf_;
  cudaStream_t stream_;
  kernels::StepLauncher launcher_;
  DeviceBuffer<float> partial_;                  // phase A's partial sums
  DeviceBuffer<kernels::StepBatch> steps_dev_;   // train_steps' per-step table
  PinnedBuffer<kernels::StepBatch> steps_pinned_;
  std::vector<kernels::StepBatch> steps_host_;   // what steps_dev_ holds (x == nullptr: nothing)
};

}  // namespace memstrat
