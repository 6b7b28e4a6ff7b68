// test_evaluator.h: TestEvaluator, the test-set loss and accuracy of an Mlp: the test set
// normalised once on the host and resident on the Mlp's device, evaluated forward-only in
// batches, outside every timed region. Trainer and DataParallelTrainer (on rank 0's replica;
// every replica holds the same parameters) share it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "experiments/core/mlp.h"

namespace memstrat {

struct EvalResult {
  double loss = 0;
  double acc = 0;
};

class TestEvaluator {
 public:
  /// Uploads data's test set on `stream` (the Mlp's) and waits for it. Evaluates `batch` rows
  /// at a time.
  TestEvaluator(Mlp& mlp, const HostDataset& data, int batch, cudaStream_t stream);
  /// Test-set loss and accuracy; zero when the set is empty.
  EvalResult evaluate();

 private:
  Mlp& mlp_;
  cudaStream_t stream_;
  int batch_;
  std::int64_t n_test_;
  DeviceBuffer<float> test_x_;
  DeviceBuffer<std::int32_t> test_y_;
  DeviceBuffer<float> test_loss_;
  DeviceBuffer<std::int32_t> test_correct_;
  PinnedBuffer<float> host_test_loss_;
  PinnedBuffer<std::int32_t> host_test_correct_;
};

}  // namespace memstrat
