// layerwise_step.h: LayerwiseStep, the layer-by-layer training step (StepKind::Layerwise): any
// depth, either GEMM backend. Per layer a GEMM + bias/ReLU, softmax_xent, per layer the weight
// GEMM + bias_grad (+ the input-gradient GEMM masked by the ReLU), one sgd_update over all
// parameters: 13 launches for one hidden layer on cuBLAS (plus cuBLAS's split-K reductions).
// Kernels: kernels/layerwise/ and kernels/common/.
#pragma once

#include <cuda_runtime.h>

#include "experiments/core/train_step.h"
#include "kernels/common/gemm.h"

namespace memstrat {

class LayerwiseStep final : public TrainStep {
 public:
  /// gemm and buf belong to the Mlp and outlive this step.
  LayerwiseStep(const MlpConfig& cfg, const MlpBuffers& buf, const kernels::Gemm& gemm,
                cudaStream_t stream);
  StepKind kind() const override { return StepKind::Layerwise; }
  void train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) override;
  void evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                std::int32_t* sample_correct) override;
  /// train() is gradients(b, 1 / b.rows, the Mlp's own gradients, ...) then update() of them.
  void gradients(const BatchView& b, float grad_scale, float* grads, float* sample_loss,
                 std::int32_t* sample_correct) override;
  void update(const float* grads) override;

 private:
  void forward(const float* x, int rows);  // act[1..L] = the layers' outputs
  MlpConfig cfg_;
  MlpBuffers buf_;
  const kernels::Gemm& gemm_;
  cudaStream_t stream_;
};

}  // namespace memstrat
