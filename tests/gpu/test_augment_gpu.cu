// --augment-device gpu: the kernel (gather_augment, augment_gpu.h) writes the bytes the host
// writes (write_rows, epoch_data.h), every byte, for every kind, both transfer formats and many
// (seed, epoch, row) keys, on synthetic images of two shapes and on the whole MNIST training set;
// and training with the augmentation on the GPU gives the same per-sample loss curve, bitwise, as
// with it on the host: resident in refresh (every launch form that replays or batches the epoch
// differently), and resident in stream (light, heavy) against pinned's host workers.
#include <cstring>
#include <iostream>
#include <sstream>
#include <vector>

#include "gpu_test_support.h"
#include "memory_strategies/augment_gpu.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/epoch_order.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

/// n images of rows x cols: random bytes, and digit-like strokes with soft edges (so that the
/// bilinear weights meet every kind of neighbourhood), labels i % 10.
HostDataset synthetic_set(std::int64_t n, int rows, int cols, std::uint64_t seed) {
  HostDataset d;
  d.rows = rows;
  d.cols = cols;
  d.train_images.resize(static_cast<std::size_t>(n) * rows * cols);
  d.train_labels.resize(static_cast<std::size_t>(n));
  std::uint64_t st = seed;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint8_t* im = d.train_images.data() + static_cast<std::size_t>(i) * rows * cols;
    const int cx = static_cast<int>(splitmix64(st) % cols), cy = static_cast<int>(splitmix64(st) % rows);
    const bool noise = i % 3 == 0;
    for (int y = 0; y < rows; ++y)
      for (int x = 0; x < cols; ++x) {
        const int d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
        im[y * cols + x] = noise ? static_cast<std::uint8_t>(splitmix64(st) >> 56)
                                 : static_cast<std::uint8_t>(d2 > 255 ? 0 : 255 - d2);
      }
    d.train_labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 10);
  }
  return d;
}

/// The data set on the device, uint8 in data-set order.
struct DeviceSet {
  DeviceBuffer<std::uint8_t> images;
  DeviceBuffer<std::int32_t> labels;
  GatherSource src;
  explicit DeviceSet(const HostDataset& d)
      : images(d.train_images.size()), labels(d.train_labels.size()) {
    CUDA_CHECK(cudaMemcpy(images.data(), d.train_images.data(), images.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(labels.data(), d.train_labels.data(), labels.bytes(), cudaMemcpyHostToDevice));
    src = {images.data(), labels.data(), d.n_train(), static_cast<std::size_t>(d.features())};
  }
};

/// "" when rows [first, first + count) of the epoch come out of the kernel with the bytes
/// write_rows gives them, else the first differing byte (and how many differ).
std::string compare_rows(const HostDataset& d, const DeviceSet& dev, Augment a, Transfer t,
                         std::uint64_t seed, int epoch, std::int64_t first, std::int64_t count,
                         bool epoch_on_device, cudaStream_t s) {
  const std::vector<std::int32_t> order = shuffled_order(d.n_train(), epoch_order_seed(seed, epoch));
  const std::size_t row_bytes = transfer_bytes_per_sample(d.features(), t);
  std::vector<std::uint8_t> want(row_bytes * count), got(row_bytes * count);
  std::vector<std::int32_t> want_labels(count), got_labels(count);
  std::vector<std::uint8_t> scratch(static_cast<std::size_t>(d.features()));
  write_rows({&d, order.data(), a, t, seed, epoch}, first, count, want.data(), want_labels.data(),
             scratch.data());

  DeviceBuffer<std::int32_t> index(static_cast<std::size_t>(count) + 1);
  std::vector<std::int32_t> staged(order.begin() + first, order.begin() + first + count);
  staged.push_back(epoch);
  CUDA_CHECK(cudaMemcpy(index.data(), staged.data(), index.bytes(), cudaMemcpyHostToDevice));
  DeviceBuffer<std::uint8_t> out(want.size());
  DeviceBuffer<std::int32_t> out_labels(static_cast<std::size_t>(count));
  CUDA_CHECK(cudaMemset(out.data(), 0xA5, out.bytes()));  // no byte is right by accident
  AugmentRows rows{a, seed, epoch_on_device ? -1 : epoch, first, d.rows, d.cols, t};
  if (epoch_on_device) rows.epoch_on_device = index.data() + count;
  gather_augment(dev.src, index.data(), static_cast<int>(count), rows, out.data(), out_labels.data(), s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaMemcpy(got.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_labels.data(), out_labels.data(), out_labels.bytes(), cudaMemcpyDeviceToHost));

  std::ostringstream why;
  if (got_labels != want_labels) why << "labels differ; ";
  std::size_t wrong = 0, first_wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && wrong++ == 0) first_wrong = i;
  if (wrong > 0)
    why << wrong << " of " << want.size() << " bytes differ, first at row "
        << first + static_cast<std::int64_t>(first_wrong / row_bytes) << " byte "
        << first_wrong % row_bytes << ": host " << int(want[first_wrong]) << ", gpu "
        << int(got[first_wrong]);
  return why.str();
}

RunConfig refresh_run(Transfer t, std::vector<int> hidden, AugmentDevice where) {
  RunConfig c = short_run("resident");
  c.scenario = Scenario::Refresh;
  c.epochs = 3;  // an epoch graph is replayed twice
  c.transfer = t;
  c.hidden = std::move(hidden);
  c.augment_device = where;
  return c;
}

RunConfig stream_run(std::string_view strategy, Augment a, std::vector<int> hidden,
                     AugmentDevice where) {
  RunConfig c = short_run(strategy);
  c.scenario = Scenario::Stream;
  c.epochs = 3;
  c.augment = a;
  c.workers = 2;
  c.hidden = std::move(hidden);
  c.augment_device = where;
  return c;
}

const std::vector<std::vector<int>> kHiddenShapes = {{256}, {128, 64}};

}  // namespace

TEST(AugmentGpu, KernelWritesTheHostBytesForEveryKindFormatAndKey) {
  MEMSTRAT_REQUIRE_GPU();
  const Stream stream = Stream::create();
  int cases = 0;
  for (const auto& [rows, cols] : {std::pair{28, 28}, std::pair{17, 23}}) {
    const HostDataset d = synthetic_set(1500, rows, cols, 11 + rows);
    const DeviceSet dev(d);
    for (const Augment a : {Augment::None, Augment::Light, Augment::Heavy})
      for (const Transfer t : {Transfer::U8, Transfer::F32})
        for (const std::uint64_t seed : {1ull, 12345ull, 0xFEDCBA9876543210ull})
          for (const int epoch : {1, 2, 97})
            for (const auto& [first, count] : {std::pair<std::int64_t, std::int64_t>{0, 1500},
                                                {777, 300}}) {
              const bool on_device = (epoch + cases) % 2 == 0;
              EXPECT_EQ(compare_rows(d, dev, a, t, seed, epoch, first, count, on_device, stream.get()), "")
                  << rows << "x" << cols << " " << to_string(a) << " " << to_string(t) << " seed "
                  << seed << " epoch " << epoch << " rows " << first << "+" << count
                  << (on_device ? " (epoch on device)" : "");
              ++cases;
            }
  }
  EXPECT_EQ(cases, 2 * 3 * 2 * 3 * 3 * 2);
}

// The whole MNIST training set, every byte, as the refresh and stream scenarios write it.
TEST(AugmentGpu, KernelWritesTheHostBytesForAllOfMnist) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const HostDataset& d = mnist();
  const DeviceSet dev(d);
  const Stream stream = Stream::create();
  for (const Augment a : {Augment::Light, Augment::Heavy})
    for (const int epoch : {1, 5})
      EXPECT_EQ(compare_rows(d, dev, a, Transfer::U8, 1, epoch, 0, d.n_train(), epoch == 5, stream.get()), "")
          << to_string(a) << " epoch " << epoch;
  EXPECT_EQ(compare_rows(d, dev, Augment::Heavy, Transfer::F32, 3, 2, 0, d.n_train(), true, stream.get()), "");
}

// A wrong kernel would change the curve: the test above compares bytes, this one what the step
// reads, in each launch form (per batch, one epoch graph replayed with the epoch it uploaded,
// one kernel for the epoch), both transfer formats, two hidden shapes.
TEST(AugmentDeviceGpu, RefreshLossCurveIsTheHostAugmentations) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const Transfer t : {Transfer::U8, Transfer::F32})
    for (const std::vector<int>& hidden : kHiddenShapes) {
      RunRecord host_record, gpu_record;
      const RunOutput host =
          train_run_on(mnist(), refresh_run(t, hidden, AugmentDevice::Host), &host_record);
      for (const LaunchForm form : {LaunchForm::Auto, LaunchForm::PerBatch, LaunchForm::Graph}) {
        RunConfig c = refresh_run(t, hidden, AugmentDevice::Gpu);
        c.launch_form = form;
        c.fused = fused_mode_for(host.step);
        const RunOutput gpu = train_run_on(mnist(), c, &gpu_record);
        EXPECT_EQ(first_difference(host, gpu), "")
            << to_string(t) << " hidden " << hidden_string(hidden) << " " << to_string(form);
        EXPECT_EQ(gpu.test.acc, host.test.acc);
        // Only the order (and the epoch) crosses the bus each epoch.
        for (const EpochResult& e : gpu.epochs)
          EXPECT_EQ(e.strategy.h2d_bytes, 4u * (mnist().n_train() + 1)) << "epoch " << e.epoch;
      }
      for (const EpochResult& e : host.epochs)
        EXPECT_GT(e.strategy.h2d_bytes, 784u * mnist().n_train()) << "the host epoch is uploaded";
    }
  // The curves depend on the augmentation: another seed's differs (the test can fail).
  RunConfig other = refresh_run(Transfer::U8, {256}, AugmentDevice::Gpu);
  other.seed = 2;
  EXPECT_NE(first_difference(train_run(refresh_run(Transfer::U8, {256}, AugmentDevice::Host)),
                             train_run(other)),
            "");
}

// Stream: resident gathers and augments each batch on the GPU; pinned's host workers augment the
// same (seed, epoch, row) keys.
TEST(AugmentDeviceGpu, StreamLossCurveIsTheHostAugmentations) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  for (const Augment a : {Augment::Light, Augment::Heavy})
    for (const Transfer t : {Transfer::U8, Transfer::F32})
      for (const std::vector<int>& hidden : kHiddenShapes) {
        RunConfig host_cfg = stream_run("pinned", a, hidden, AugmentDevice::Host);
        host_cfg.transfer = t;
        ResidentReference host(host_cfg, "pinned");  // with the step resident runs
        RunConfig c = stream_run("resident", a, hidden, AugmentDevice::Gpu);
        c.transfer = t;
        const RunOutput gpu = train_run(c);
        EXPECT_EQ(first_difference(host.for_step_of(gpu), gpu), "")
            << to_string(a) << " " << to_string(t) << " hidden " << hidden_string(hidden);
        for (const EpochResult& e : gpu.epochs)
          EXPECT_EQ(e.strategy.h2d_bytes, 4u * mnist().n_train()) << "only the order crosses";
      }
}

// The run record says where the samples were augmented.
TEST(AugmentDeviceGpu, RecordSaysWhereTheSamplesWereAugmented) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  RunConfig c = refresh_run(Transfer::U8, {256}, AugmentDevice::Gpu);
  c.epochs = 1;
  const RunRecord r = run_session(c);
  EXPECT_EQ(r.to_json()["config"]["augment_device"], "gpu");
}
