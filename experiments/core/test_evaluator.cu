#include "experiments/core/test_evaluator.h"

#include <algorithm>
#include <vector>

#include "common/nvtx.h"
#include "kernels/common/pixel_norm.h"

namespace memstrat {

TestEvaluator::TestEvaluator(Mlp& mlp, const HostDataset& data, int batch, cudaStream_t stream)
    : mlp_(mlp), stream_(stream), batch_(batch), n_test_(data.n_test()) {
  if (n_test_ == 0) return;
  std::vector<float> tx(data.test_images.size());
  for (std::size_t i = 0; i < tx.size(); ++i) tx[i] = kernels::normalize_pixel(data.test_images[i]);
  test_x_ = DeviceBuffer<float>(tx.size());
  test_y_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(n_test_));
  test_loss_ = DeviceBuffer<float>(static_cast<std::size_t>(n_test_));
  test_correct_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(n_test_));
  host_test_loss_ = PinnedBuffer<float>(static_cast<std::size_t>(n_test_));
  host_test_correct_ = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(n_test_));
  CUDA_CHECK(cudaMemcpyAsync(test_x_.data(), tx.data(), test_x_.bytes(), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(test_y_.data(), data.test_labels.data(), test_y_.bytes(),
                             cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

EvalResult TestEvaluator::evaluate() {
  EvalResult e;
  if (n_test_ == 0) return e;
  NvtxRange r(Phase::Eval, "eval");
  const int F = mlp_.config().layers.front();
  for (std::int64_t off = 0; off < n_test_; off += batch_) {
    const int rows = static_cast<int>(std::min<std::int64_t>(batch_, n_test_ - off));
    mlp_.evaluate(test_x_.data() + off * F, test_y_.data() + off, rows, test_loss_.data() + off,
                  test_correct_.data() + off);
  }
  CUDA_CHECK(cudaMemcpyAsync(host_test_loss_.data(), test_loss_.data(), test_loss_.bytes(),
                             cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(host_test_correct_.data(), test_correct_.data(), test_correct_.bytes(),
                             cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  double loss = 0, correct = 0;
  for (std::int64_t i = 0; i < n_test_; ++i) {
    loss += host_test_loss_[i];
    correct += host_test_correct_[i];
  }
  e.loss = loss / static_cast<double>(n_test_);
  e.acc = correct / static_cast<double>(n_test_);
  return e;
}

}  // namespace memstrat
