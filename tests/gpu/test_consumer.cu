// --consumer none: the stream scenario's input pipeline with no step behind it. touch_batch reads
// the batch's last element (checked against the host's sum of the same values), and a run with no
// consumer moves the same bytes per epoch as one that trains, through the same host producers,
// while it trains nothing: no loss, no accuracy.
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/cuda_raii.h"
#include "gpu_test_support.h"
#include "kernels/common/touch.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

double touched(const std::uint8_t* x_u8, const float* x_f32, const std::int32_t* y, int rows,
               int features, int launches) {
  DeviceBuffer<double> sink(1);
  CUDA_CHECK(cudaMemset(sink.data(), 0, sink.bytes()));
  for (int i = 0; i < launches; ++i) kernels::touch_batch(x_u8, x_f32, y, rows, features, sink.data(), nullptr);
  double got = 0;
  CUDA_CHECK(cudaMemcpy(&got, sink.data(), sizeof got, cudaMemcpyDeviceToHost));
  return got;
}

}  // namespace

TEST(Consumer, TouchBatchReadsTheLastElementOfTheBatch) {
  MEMSTRAT_REQUIRE_GPU();
  const int rows = 3, features = 5;
  std::vector<std::uint8_t> u8(rows * features);
  std::vector<float> f32(rows * features);
  for (int i = 0; i < rows * features; ++i) {
    u8[i] = static_cast<std::uint8_t>(10 + i);
    f32[i] = 0.5f * static_cast<float>(i);
  }
  const std::vector<std::int32_t> y = {4, 7, 9};
  DeviceBuffer<std::uint8_t> du8(u8.size());
  DeviceBuffer<float> df32(f32.size());
  DeviceBuffer<std::int32_t> dy(y.size());
  CUDA_CHECK(cudaMemcpy(du8.data(), u8.data(), du8.bytes(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(df32.data(), f32.data(), df32.bytes(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dy.data(), y.data(), dy.bytes(), cudaMemcpyHostToDevice));
  EXPECT_EQ(touched(du8.data(), nullptr, dy.data(), rows, features, 2), 2 * (24.0 + 9.0));
  EXPECT_EQ(touched(nullptr, df32.data(), dy.data(), rows, features, 1), 7.0 + 9.0);
  EXPECT_THROW(touched(du8.data(), nullptr, dy.data(), 0, features, 1), std::invalid_argument);
}

TEST(Consumer, NoneMovesWhatTrainingMovesAndTrainsNothing) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const char* strategy : {"pinned", "double-buffer"}) {
    for (const Transfer t : {Transfer::U8, Transfer::F32}) {
      RunConfig c = short_run(strategy);
      c.scenario = Scenario::Stream;
      c.augment = Augment::Light;
      c.workers = 3;
      c.transfer = t;
      const RunOutput trained = train_run(c);
      c.consumer = Consumer::None;
      const RunOutput piped = train_run(c);
      ASSERT_EQ(piped.epochs.size(), trained.epochs.size());
      for (std::size_t e = 0; e < piped.epochs.size(); ++e) {
        const EpochResult& p = piped.epochs[e];
        EXPECT_EQ(p.strategy.h2d_bytes, trained.epochs[e].strategy.h2d_bytes) << strategy;
        EXPECT_GT(p.strategy.h2d_bytes, 0u) << strategy;
        ASSERT_TRUE(p.strategy.producer.has_value()) << strategy << ": host producers ran";
        EXPECT_TRUE(std::isnan(p.train_loss) && std::isnan(p.train_acc)) << strategy;
        EXPECT_GT(p.wall_ms, 0.0);
      }
      EXPECT_TRUE(std::isnan(piped.test.acc) && std::isnan(piped.test.loss)) << strategy;
      EXPECT_EQ(piped.epoch_form, EpochForm::PerBatch) << strategy;
      EXPECT_FALSE(std::isnan(trained.test.acc));
    }
  }
}
