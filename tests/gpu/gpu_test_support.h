// gpu_test_support.h: what the GPU tests share: skip without a device or MNIST, the MNIST
// data set loaded once, and a helper that trains with one strategy and returns the per-sample
// loss curve of every epoch.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "common/mnist.h"
#include "experiments/core/mlp.h"
#include "experiments/core/trainer.h"
#include "memory_strategies/registry.h"

namespace memstrat::testing {

inline std::string mnist_dir() {
  for (const std::string& d : {std::string(MEMSTRAT_SOURCE_DIR) + "/data/mnist",
                              std::string(MEMSTRAT_SOURCE_DIR) + "/../shared/data/mnist"})
    if (std::filesystem::exists(d + "/train-images-idx3-ubyte.gz") ||
        std::filesystem::exists(d + "/train-images-idx3-ubyte"))
      return d;
  return "";
}

inline const HostDataset& mnist() {
  static const HostDataset d = load_mnist(mnist_dir());
  return d;
}

#define MEMSTRAT_REQUIRE_GPU_AND_MNIST()                                              \
  do {                                                                                \
    std::string why_;                                                                 \
    if (!::memstrat::cuda_device_available(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
    if (::memstrat::testing::mnist_dir().empty())                                     \
      GTEST_SKIP() << "MNIST not found in data/mnist or ../shared/data/mnist";        \
  } while (0)

struct RunSpec {
  std::string strategy = "resident";
  Transfer transfer = Transfer::U8;
  Scenario scenario = Scenario::Static;
  int epochs = 2;
  int batch = 256;
  bool graphs = true;
  bool epoch_launch = true;  // as the CLI's default (it applies to resident only)
  int depth = 2;
  int copy_streams = 1;
  kernels::GemmBackend gemm = kernels::GemmBackend::Cublas;
};

struct RunOutput {
  std::vector<std::vector<float>> sample_loss;  // per epoch, per sample
  std::vector<EpochResult> epochs;
  EvalResult test;
  bool epoch_launch = false;  // whether the trainer ran each epoch in one launch
};

inline RunOutput train_run(const RunSpec& r) {
  const HostDataset& data = mnist();
  Stream compute = Stream::create();
  MlpConfig m;
  m.layers = {data.features(), 256, data.classes};
  m.max_batch = r.batch;
  m.gemm = r.gemm;
  Mlp mlp(m, compute);
  StrategyOptions so;
  so.batch = r.batch;
  so.transfer = r.transfer;
  so.scenario = r.scenario;
  so.depth = r.depth;
  so.copy_streams = r.copy_streams;
  so.seed = 1;
  auto st = find_strategy(r.strategy)->make();
  st->attach(data, so, compute);
  Trainer tr(mlp, *st, data, r.batch, r.graphs, compute, r.epoch_launch);
  RunOutput out;
  out.epoch_launch = tr.epoch_launch();
  for (int e = 1; e <= r.epochs; ++e) {
    out.epochs.push_back(tr.run_epoch(e));
    out.sample_loss.push_back(tr.last_sample_losses());
  }
  out.test = tr.evaluate();
  return out;
}

/// "" when bitwise equal, else where they first differ.
inline std::string first_difference(const RunOutput& a, const RunOutput& b) {
  if (a.sample_loss.size() != b.sample_loss.size()) return "different epoch counts";
  for (std::size_t e = 0; e < a.sample_loss.size(); ++e) {
    const auto &x = a.sample_loss[e], &y = b.sample_loss[e];
    if (x.size() != y.size()) return "different sample counts";
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0)
        return "epoch " + std::to_string(e + 1) + " sample " + std::to_string(i) + ": " +
               std::to_string(x[i]) + " vs " + std::to_string(y[i]);
  }
  return "";
}

}  // namespace memstrat::testing
