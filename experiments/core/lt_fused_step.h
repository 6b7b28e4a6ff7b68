// lt_fused_step.h: LtFusedStep, the cuBLASLt fused training step of the one-hidden-layer MLP
// (StepKind::LtFused): two cuBLASLt GEMMs and the fused kernels of kernels/lt_fused/, 4 launches
// per step (5 for a uint8 batch); see lt_fused_step.cu for the order.
#pragma once

#include <cuda_runtime.h>

#include "experiments/core/train_step.h"
#include "kernels/common/gemm.h"
#include "kernels/lt_fused/cublaslt_gemm.h"

namespace memstrat {

class LtFusedStep final : public TrainStep {
 public:
  /// Chooses every cuBLASLt algorithm now (never during a graph capture). gemm (cuBLAS, for row
  /// counts without a plan) and buf belong to the Mlp and outlive this step.
  LtFusedStep(const MlpConfig& cfg, const MlpBuffers& buf, const kernels::Gemm& gemm,
              cudaStream_t stream);
  StepKind kind() const override { return StepKind::LtFused; }
  void train(const BatchView& b, float* sample_loss, std::int32_t* sample_correct) override;
  void evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                std::int32_t* sample_correct) override;

 private:
  void forward(const float* x, int rows);  // H = act[1] = relu(X·W1 + b1)
  MlpConfig cfg_;
  MlpBuffers buf_;
  const kernels::Gemm& gemm_;
  cudaStream_t stream_;
  kernels::GemmLt lt_;
  int lt_min_rows_ = 1;  // row counts >= this (up to max_batch) run cuBLASLt
};

}  // namespace memstrat
