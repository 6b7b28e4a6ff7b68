// mlp.h: Mlp, the multilayer perceptron every strategy trains: configurable hidden layers
// (default 784-256-10), ReLU, softmax cross-entropy, SGD with optional momentum. It owns the
// parameters, gradients, velocities and per-layer workspaces, allocated once in the
// constructor, and exactly one TrainStep (train_step.h), chosen there from MlpConfig::step by
// choose_step (step_choice.h): the single-launch, cuBLASLt fused or layer-by-layer step. A
// training step only enqueues kernels on the given stream (no allocation, no synchronisation).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "experiments/core/mlp_config.h"
#include "experiments/core/step_choice.h"
#include "experiments/core/train_step.h"
#include "kernels/common/gemm.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

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
  /// in turn. Only on the single-launch step (multi_step()); reserve_steps(n) first (it
  /// allocates a per-step table of n rows), then the views go to rows [first, first + size)
  /// of it (first + size <= n). Rows are uploaded when they change (a stream synchronisation,
  /// then one copy); the same views in the same rows again cost nothing, so an epoch run as
  /// several launches gives each launch its own rows.
  bool multi_step() const { return step_->multi_step(); }
  void reserve_steps(int n) { step_->reserve_steps(n); }
  void train_steps(const std::vector<BatchView>& views, float* sample_loss,
                   std::int32_t* sample_correct, int first = 0) {
    step_->train_steps(views, sample_loss, sample_correct, first);
  }
  /// Data-parallel training (the single-launch and layer-by-layer steps, else std::logic_error:
  /// choose_gradient_step picks one of them): forward and backward of one shard (1 <= rows <=
  /// max_batch), its loss gradient scaled by grad_scale (1 / the global batch's rows), the
  /// gradients written to `grads` (parameter_count() floats, the flat layout of weight_offset /
  /// bias_offset); per-row outputs as train_step. No update.
  void shard_gradients(const BatchView& b, float grad_scale, float* grads, float* sample_loss,
                       std::int32_t* sample_correct);
  /// The SGD update (with momentum) from the combined gradients `grads` (the flat layout).
  void apply_gradients(const float* grads) { step_->update(grads); }
  /// The Mlp's own gradient buffer (parameter_count() floats): where a ring reduction sums.
  float* gradient_buffer() { return grads_.data(); }
  /// Forward only on device-resident floats; per-row loss and correctness as above (offset 0).
  void evaluate(const float* x, const std::int32_t* y, int rows, float* sample_loss,
                std::int32_t* sample_correct);

  const MlpConfig& config() const { return cfg_; }
  /// The implementation that runs a step: SingleLaunch, LtFused or Layerwise.
  StepKind step() const { return step_->kind(); }
  /// True when train_step / evaluate run a fused one-hidden-layer step (single-launch or
  /// cuBLASLt).
  bool fused() const { return step() != StepKind::Layerwise; }
  /// Which implementation runs a step: "single-launch", "cublaslt-fused" or "layer-by-layer".
  std::string step_kind() const { return std::string(to_string(step())); }
  /// Why the single-launch step is not used ("" when it is).
  const std::string& single_off_reason() const { return choice_.single_off_reason; }
  /// Why no fused step is used ("" when one is): off in the config, depth, backend, shape.
  const std::string& fused_off_reason() const { return choice_.fused_off_reason; }
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
  void check_rows(int rows, const char* who) const;
  MlpBuffers buffers() const;
  MlpConfig cfg_;
  cudaStream_t stream_;
  // The cuBLAS (or tiled) GEMMs of the layer-by-layer step, and of the cuBLASLt step for row
  // counts it has no plan for; built for every configuration.
  kernels::Gemm gemm_;
  std::vector<std::size_t> w_off_, b_off_;
  DeviceBuffer<float> params_, grads_, velocity_;
  DeviceBuffer<float> xbuf_;              // normalised input when the batch arrives as uint8
  std::vector<DeviceBuffer<float>> act_;  // act_[l] = output of layer l (post-ReLU; logits last)
  std::vector<DeviceBuffer<float>> dz_;   // dz_[l] = dLoss/dz of layer l (the fused steps use
                                          // dz_[1] = dH, dz_[2] = dlogits)
  StepChoice choice_;
  std::unique_ptr<TrainStep> step_;  // last: built from, and destroyed before, the buffers
};

/// "256" or "512,256" -> {512, 256}; throws std::invalid_argument on anything else.
std::vector<int> parse_hidden(const std::string& s);
/// The largest hidden layer parse_hidden accepts (each layer: 1..kMaxHiddenSize).
inline constexpr int kMaxHiddenSize = 65536;

}  // namespace memstrat
