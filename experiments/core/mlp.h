// mlp.h: Mlp, the multilayer perceptron every strategy trains: configurable hidden layers
// (default 784-256-10), ReLU, softmax cross-entropy, SGD with optional momentum. All parameters,
// gradients and workspaces are allocated once in the constructor; a training step only enqueues
// kernels on the given stream (no allocation, no synchronisation).
//
// Two implementations of the same step:
//  * the layer-by-layer path (any depth, either GEMM backend): per layer a GEMM + bias/ReLU,
//    softmax_xent, per layer GEMMs + bias_grad + relu_backward, one sgd_update; 13 launches
//    for one hidden layer on cuBLAS (plus cuBLAS's split-K reductions).
//  * the single-launch path (MlpConfig::fused and single_launch, one hidden layer, cuBLAS
//    backend, no TF32, a shape kernels/fused_step.h takes): the whole step, forward, backward
//    and SGD update, in ONE cooperative kernel launch (evaluation too);
//  * the cuBLASLt fused path (MlpConfig::fused, the single-launch path off or not applicable):
//    4 launches (5 for a uint8 batch), see Mlp::train_step_fused in mlp.cu.
// Both compute the same function (same model, loss, SGD with momentum and initialisation);
// they differ only in fp32 summation order. Each is deterministic and independent of where the
// batch lives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "kernels/fused_step.h"
#include "kernels/gemm.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

namespace kernels {
class GemmLt;
}

/// Largest max_batch·hidden for which `--fused on` picks the single-launch step.
inline constexpr long long kSingleLaunchMaxWork = 262144;

struct MlpConfig {
  std::vector<int> layers = {784, 256, 10};  // input, hidden..., classes
  int max_batch = 256;
  kernels::GemmBackend gemm = kernels::GemmBackend::Cublas;
  bool tf32 = false;
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;
  /// Use the fused one-hidden-layer step when it applies (layers.size() == 3, cuBLAS backend,
  /// a shape the fused kernels take); false always runs the layer-by-layer path.
  bool fused = true;
  /// With fused: prefer the single-launch step (kernels/fused_step.h) where it applies (fp32
  /// only, so not with tf32) and is the faster one: max_batch·hidden <= kSingleLaunchMaxWork
  /// (measured on an H200: faster than cuBLASLt up to batch 1024 × hidden 256 and batch 256 ×
  /// hidden 1024, slower at batch 1024 × hidden 1024). false: the cuBLASLt fused path.
  bool single_launch = true;
  /// With single_launch: use it at any size the kernel takes (--fused single).
  bool single_launch_any_size = false;
};

class Mlp {
 public:
  Mlp(const MlpConfig& cfg, cudaStream_t stream);
  ~Mlp();
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  /// Forward, backward and SGD update on one batch. Writes each row's loss and correctness to
  /// sample_loss[first_sample + r] / sample_correct[first_sample + r] (device arrays).
  void train_step(const BatchView& b, float* sample_loss, std::int32_t* sample_correct);
  /// Several steps in ONE kernel launch, in order: bitwise the same as train_step on each view
  /// in turn. Only on the single-launch path (multi_step()); reserve_steps(n) first (it
  /// allocates), then at most n views per call. The views' per-step table is uploaded when it
  /// changes (a stream synchronisation, then one copy); the same views again cost nothing.
  bool multi_step() const { return step_ != nullptr; }
  void reserve_steps(int n);
  void train_steps(const std::vector<BatchView>& views, float* sample_loss,
                   std::int32_t* sample_correct);
  /// Forward only on device-resident floats; per-row loss and correctness as above (offset 0).
  void evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                std::int32_t* sample_correct);

  const MlpConfig& config() const { return cfg_; }
  /// True when train_step / evaluate run a fused one-hidden-layer path (single-launch or
  /// cuBLASLt).
  bool fused() const { return lt_ != nullptr || step_ != nullptr; }
  /// Which implementation runs a step: "single-launch", "cublaslt-fused" or "layer-by-layer".
  std::string step_kind() const;
  /// Why the single-launch step is not used ("" when it is).
  const std::string& single_off_reason() const { return single_off_reason_; }
  /// Why the fused path is not used ("" when it is): off in the config, depth, backend, shape.
  const std::string& fused_off_reason() const { return fused_off_reason_; }
  std::size_t parameter_count() const { return params_.size(); }
  /// Offsets of W_l and b_l in the flat parameter vector (W_l is [in x out], row-major).
  std::size_t weight_offset(int l) const { return w_off_[l]; }
  std::size_t bias_offset(int l) const { return b_off_[l]; }
  int layer_count() const { return static_cast<int>(cfg_.layers.size()) - 1; }
  std::vector<float> parameters() const;  // synchronises the stream
  void set_parameters(const std::vector<float>& p);
  /// FLOPs of one training step per sample (forward + weight/input gradients), for floors.
  double train_flops_per_sample() const;

 private:
  void forward(const float* x, int rows);
  void train_step_fused(const BatchView& b, float* sample_loss, std::int32_t* sample_correct);
  void forward_fused(const float* x, int rows);
  MlpConfig cfg_;
  cudaStream_t stream_;
  kernels::Gemm gemm_;
  std::unique_ptr<kernels::FusedStep> step_;  // only on the single-launch path
  DeviceBuffer<float> partial_;               // its phase-A partial sums
  std::string single_off_reason_;
  void train_step_single(const BatchView& b, float* sample_loss, std::int32_t* sample_correct);
  kernels::StepArgs single_args(int rows);
  kernels::StepArgs single_train_args(int rows);
  DeviceBuffer<kernels::StepBatch> steps_dev_;  // train_steps' per-step table
  PinnedBuffer<kernels::StepBatch> steps_pinned_;
  std::vector<kernels::StepBatch> steps_host_;  // what steps_dev_ holds
  std::unique_ptr<kernels::GemmLt> lt_;  // only on the cuBLASLt fused path
  int lt_min_rows_ = 1;                  // row counts >= this (up to max_batch) run cuBLASLt
  std::string fused_off_reason_;
  std::vector<std::size_t> w_off_, b_off_;
  DeviceBuffer<float> params_, grads_, velocity_;
  DeviceBuffer<float> xbuf_;              // normalised input when the batch arrives as uint8
  std::vector<DeviceBuffer<float>> act_;  // act_[l] = output of layer l (post-ReLU; logits last)
  std::vector<DeviceBuffer<float>> dz_;   // dz_[l] = dLoss/dz of layer l
                                          // (fused path: dz_[1] = dH, dz_[2] = dlogits; only
                                          // W1's part of grads_ is used)
};

/// "256" or "512,256" -> {512, 256}; throws std::invalid_argument on anything else.
std::vector<int> parse_hidden(const std::string& s);

}  // namespace memstrat
