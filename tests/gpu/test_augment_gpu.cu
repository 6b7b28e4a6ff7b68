// --augment-device gpu: the kernel (gather_augment, augment_gpu.h) writes the bytes the host
// writes (write_rows, epoch_data.h), every byte, for every kind, both transfer formats and many
// (seed, epoch, row) keys, on synthetic images of two shapes and on the whole MNIST training set;
// and training with the augmentation on the GPU gives the same per-sample loss curve, bitwise, as
// with it on the host: resident in refresh (every launch form that replays or batches the epoch
// differently), and resident in stream (light, heavy) against pinned's host workers. Every other
// strategy that takes it (zero-copy, the um family: StrategyEntry::gpu_augment) gives, in each
// scenario it takes it in, both transfer formats (and light and heavy in stream), its own
// host-augmented curve and resident's GPU-augmented one, bitwise, in every launch form it
// declares, with truthful byte figures (only the order, plus what the um family prefetches) and no
// producer figures; attached, it allows exactly its declared forms. The copying strategies
// (StrategyEntry::gpu_augment_after_copy) move the raw rows and augment each batch after its copy:
// the same curves, bitwise, with their host run's bytes plus the epoch number, and in stream their
// host workers' figures (they gather).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>
#include <vector>

#include "gpu_test_support.h"
#include "memory_strategies/augment_gpu.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/epoch_order.h"
#include "tests/support/synthetic_dataset.h"

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

/// The kernel under test: gather_augment from the device set, or augment_in_place on the raw
/// rows (write_rows without augmentation) copied to the device, as the copying strategies run it.
enum class Kernel { Gather, InPlace };

/// "" when rows [first, first + count) of the epoch come out of the kernel with the bytes
/// write_rows gives them, else the first differing byte (and how many differ).
std::string compare_rows(const HostDataset& d, const DeviceSet& dev, Augment a, Transfer t,
                         std::uint64_t seed, int epoch, std::int64_t first, std::int64_t count,
                         bool epoch_on_device, cudaStream_t s, Kernel k = Kernel::Gather) {
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
  CUDA_CHECK(cudaDeviceSynchronize());  // the fill and the index are in place before `s` runs
  AugmentRows rows{a, seed, epoch_on_device ? -1 : epoch, first, d.rows, d.cols, t};
  if (epoch_on_device) rows.epoch_on_device = index.data() + count;
  std::vector<std::uint8_t> raw(want.size());
  if (k == Kernel::Gather) {
    gather_augment(dev.src, index.data(), static_cast<int>(count), rows, out.data(), out_labels.data(), s);
  } else {
    write_rows({&d, order.data(), Augment::None, t, seed, epoch}, first, count, raw.data(),
               got_labels.data(), scratch.data());
    // on `s`, ahead of the kernel (the stream does not wait for the legacy default stream)
    CUDA_CHECK(cudaMemcpyAsync(out.data(), raw.data(), out.bytes(), cudaMemcpyHostToDevice, s));
    augment_in_place(out.data(), static_cast<int>(count), rows, s);
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  if (k == Kernel::Gather)
    CUDA_CHECK(cudaMemcpy(got_labels.data(), out_labels.data(), out_labels.bytes(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));

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

/// The registry's strategies that take --augment-device gpu in scenario `sc` and that this device
/// runs so (a waived one is printed with its reason).
std::vector<const StrategyEntry*> gpu_augment_takers(Scenario sc) {
  const DeviceCaps caps = DeviceCaps::query(0);
  std::vector<const StrategyEntry*> r;
  for (const StrategyEntry& e : strategy_registry()) {
    if (std::find(e.gpu_augment.begin(), e.gpu_augment.end(), sc) == e.gpu_augment.end()) continue;
    RunConfig c = short_run(e.name);
    c.scenario = sc;
    c.augment_device = AugmentDevice::Gpu;
    if (const std::string why = waiver_reason(e, strategy_options(c), caps); !why.empty()) {
      std::cout << "[ WAIVED ] " << e.name << " (" << to_string(sc) << ", gpu): " << why << "\n";
      continue;
    }
    r.push_back(&e);
  }
  return r;
}

/// Strategy `s`'s explicit host-to-device bytes in epoch `epoch` (1-based) of `samples` MNIST
/// samples with the augmentation on the GPU: the order (4 bytes a sample; `refresh`: and the
/// epoch number), plus the whole uint8 set and its labels where the um family prefetches it
/// (um-prefetch, um-advise: every epoch; um-prefetch-coarse: epoch 1, the set stays resident).
std::uint64_t gpu_augment_h2d(std::string_view s, int epoch, std::uint64_t samples, bool refresh) {
  const std::uint64_t order = 4 * (samples + (refresh ? 1 : 0));
  const std::uint64_t set = samples * (784 + 4);
  if (s == "um-prefetch" || s == "um-advise") return order + set;
  if (s == "um-prefetch-coarse") return order + (epoch == 1 ? set : 0);
  return order;  // resident, zero-copy, um
}

/// Strategy `e`'s explicit host-to-device bytes in an epoch with the augmentation on the GPU, where
/// `host_bytes` is what the same epoch moved with it on the host: a copying taker moves the raw
/// rows (as many bytes) and the epoch number; every other taker what gpu_augment_h2d says.
std::uint64_t gpu_augment_h2d(const StrategyEntry& e, int epoch, std::uint64_t samples,
                              bool refresh, std::uint64_t host_bytes) {
  return e.gpu_augment_after_copy ? host_bytes + 4
                                  : gpu_augment_h2d(e.name, epoch, samples, refresh);
}

/// The --launch-form value that names form `f`.
LaunchForm asking_for(EpochForm f) {
  for (const LaunchForm l :
       {LaunchForm::PerBatch, LaunchForm::Graph, LaunchForm::ChunkKernels, LaunchForm::Kernel})
    if (asked_form(l) == f) return l;
  throw std::logic_error("no --launch-form names " + std::string(to_string(f)));
}

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
                                                {777, 300}})
              for (const Kernel k : {Kernel::Gather, Kernel::InPlace}) {
                const bool on_device = (epoch + cases / 2) % 2 == 0;
                EXPECT_EQ(compare_rows(d, dev, a, t, seed, epoch, first, count, on_device,
                                       stream.get(), k),
                          "")
                    << rows << "x" << cols << " " << to_string(a) << " " << to_string(t)
                    << " seed " << seed << " epoch " << epoch << " rows " << first << "+" << count
                    << (on_device ? " (epoch on device)" : "")
                    << (k == Kernel::InPlace ? " (in place)" : "");
                ++cases;
              }
  }
  EXPECT_EQ(cases, 2 * 3 * 2 * 3 * 3 * 2 * 2);
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
  for (const Transfer t : {Transfer::U8, Transfer::F32})  // every pixel value read back from f32
    for (const Augment a : {Augment::Light, Augment::Heavy})
      EXPECT_EQ(compare_rows(d, dev, a, t, 7, 3, 0, d.n_train(), true, stream.get(), Kernel::InPlace), "")
          << to_string(a) << " " << to_string(t) << " in place";
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

// Every strategy that takes it in refresh: the GPU writes each epoch from the uint8 set kept in
// the strategy's memory (resident: device, zero-copy: mapped, the um family: managed) into the
// strategy's epoch storage, and the steps read the bytes the host would have written there: the
// strategy's host-augmented curve and resident's GPU-augmented one, bitwise, with the same step.
TEST(AugmentDeviceGpu, RefreshOnEveryTakerIsItsHostCurveAndResidents) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const std::vector<const StrategyEntry*> takers = gpu_augment_takers(Scenario::Refresh);
  EXPECT_GE(takers.size(), 5u)
      << "resident, pageable, pinned, double-buffer and zero-copy run on any GPU that maps host memory";
  const std::uint64_t n = static_cast<std::uint64_t>(mnist().n_train());
  for (const Transfer t : {Transfer::U8, Transfer::F32}) {
    ResidentReference resident(refresh_run(t, {256}, AugmentDevice::Gpu));
    for (const StrategyEntry* e : takers) {
      const std::string what = std::string(e->name) + " " + std::string(to_string(t));
      RunConfig host_cfg = refresh_run(t, {256}, AugmentDevice::Host);
      host_cfg.strategy = e;
      const RunOutput host = train_run(host_cfg);
      RunConfig gpu_cfg = refresh_run(t, {256}, AugmentDevice::Gpu);
      gpu_cfg.strategy = e;
      gpu_cfg.fused = fused_mode_for(host.step);
      const RunOutput gpu = train_run(gpu_cfg);
      EXPECT_EQ(gpu.step, host.step) << what;
      EXPECT_EQ(gpu.epoch_form, host.epoch_form) << what << ": the same forms, the same choice";
      EXPECT_EQ(first_difference(host, gpu), "") << what << " (gpu vs host)";
      EXPECT_EQ(first_difference(resident.for_step_of(gpu), gpu), "") << what << " (vs resident)";
      EXPECT_EQ(gpu.test.acc, host.test.acc) << what;
      ASSERT_EQ(gpu.epochs.size(), 3u) << what;
      ASSERT_EQ(host.epochs.size(), 3u) << what;
      for (std::size_t i = 0; i < gpu.epochs.size(); ++i) {
        const EpochResult& r = gpu.epochs[i];
        EXPECT_EQ(r.strategy.h2d_bytes,
                  gpu_augment_h2d(*e, r.epoch, n, true, host.epochs[i].strategy.h2d_bytes))
            << what << " epoch " << r.epoch;
        EXPECT_FALSE(r.strategy.producer.has_value()) << what;
      }
    }
  }
}

// Every form each taker declares for refresh, asked for by name (the single-launch step
// everywhere): the epoch the GPU writes at acquire(0) is captured in the epoch graph and replayed
// with each epoch's uploaded order, and read by the one-launch forms, bitwise as per batch and as
// the host's augmentation per batch.
TEST(AugmentDeviceGpu, RefreshEveryDeclaredFormOfEveryTakerIsTheHostCurve) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  HostDataset data = mnist();
  truncate_dataset(data, 12000, 1000);  // 46 full batches and a ragged one of 224
  for (const Transfer t : {Transfer::U8, Transfer::F32})
    for (const StrategyEntry* e : gpu_augment_takers(Scenario::Refresh)) {
      RunConfig base = refresh_run(t, {256}, AugmentDevice::Host);
      base.strategy = e;
      base.fused = FusedMode::Single;
      base.copy_chunk_mib = 2;  // kernel-per-chunk: several launches of several batches
      base.launch_form = LaunchForm::PerBatch;
      const RunOutput host = train_run_on(data, base);
      ASSERT_EQ(host.step, "single-launch") << e->name;
      for (const EpochForm f : e->launch_forms.in(Scenario::Refresh).forms()) {
        RunConfig c = base;
        c.augment_device = AugmentDevice::Gpu;
        c.launch_form = asking_for(f);
        const RunOutput gpu = train_run_on(data, c);
        const std::string what = std::string(e->name) + " " + std::string(to_string(t)) + " " +
                                 std::string(to_string(f));
        EXPECT_EQ(gpu.epoch_form, f) << what;
        EXPECT_EQ(first_difference(host, gpu), "") << what;
        ASSERT_EQ(gpu.epochs.size(), host.epochs.size()) << what;
        for (std::size_t i = 0; i < gpu.epochs.size(); ++i)
          EXPECT_EQ(gpu.epochs[i].strategy.h2d_bytes,
                    gpu_augment_h2d(*e, gpu.epochs[i].epoch,
                                    static_cast<std::uint64_t>(data.n_train()), true,
                                    host.epochs[i].strategy.h2d_bytes))
              << what << " epoch " << gpu.epochs[i].epoch << " (also after a graph replay)";
      }
    }
}

// Attached with the augmentation on the GPU, a taker allows exactly the forms it declares: in
// refresh those of the host's refresh (the epoch is written whole before the first batch), in
// stream per batch (one gathered batch buffer).
TEST(AugmentDeviceGpu, AttachedTakersAllowTheirDeclaredForms) {
  MEMSTRAT_REQUIRE_GPU();
  const HostDataset data = synthetic_dataset(3001);
  for (const Scenario sc : {Scenario::Refresh, Scenario::Stream})
    for (const StrategyEntry* e : gpu_augment_takers(sc))
      for (const Transfer t : {Transfer::U8, Transfer::F32}) {
        StrategyOptions o;
        o.scenario = sc;
        o.transfer = t;
        if (sc == Scenario::Stream) o.augment = Augment::Heavy;  // refresh: its light shift
        o.augment_device = AugmentDevice::Gpu;
        Stream compute = Stream::create();
        auto st = e->make();
        st->attach(data, o, compute);
        const std::string what = std::string(e->name) + " " + std::string(to_string(sc)) + " " +
                                 std::string(to_string(t));
        EXPECT_EQ(forms_of(st->launch_forms()), e->launch_forms.in(sc))
            << what << ": allows " << forms_of(st->launch_forms()).to_string();
        if (sc == Scenario::Stream) {
          EXPECT_FALSE(st->acquire_ahead()) << what;
          EXPECT_FALSE(st->epoch_capturable()) << what;
        }
      }
}

// Every strategy that takes it in stream gathers and augments each batch on the GPU from the set it
// keeps (uint8) where the GPU reads it: light and heavy, both transfer formats, its host workers'
// curve (the same (seed, epoch, row) keys) and resident's GPU-gathered one, bitwise, with the same
// step; no producer, and only the order (plus the um family's prefetches of the set) crosses
// explicitly.
TEST(AugmentDeviceGpu, StreamOnEveryTakerIsItsHostCurveAndResidents) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  const DeviceCaps caps = DeviceCaps::query(0);
  const std::vector<const StrategyEntry*> takers = gpu_augment_takers(Scenario::Stream);
  EXPECT_GE(takers.size(), 5u)
      << "resident, pageable, pinned, double-buffer and zero-copy run on any GPU that maps host memory";
  const std::uint64_t n = static_cast<std::uint64_t>(mnist().n_train());
  for (const Augment a : {Augment::Light, Augment::Heavy})
    for (const Transfer t : {Transfer::U8, Transfer::F32}) {
      RunConfig resident_cfg = stream_run("resident", a, {256}, AugmentDevice::Gpu);
      resident_cfg.transfer = t;
      resident_cfg.epochs = 2;
      ResidentReference resident(resident_cfg);
      for (const StrategyEntry* e : takers) {
        const std::string what = std::string(e->name) + " " + std::string(to_string(a)) + " " +
                                 std::string(to_string(t));
        RunConfig gpu_cfg = resident_cfg;
        gpu_cfg.strategy = e;
        const RunOutput gpu = train_run(gpu_cfg);
        EXPECT_EQ(gpu.epoch_form, EpochForm::PerBatch) << what;
        EXPECT_EQ(first_difference(resident.for_step_of(gpu), gpu), "") << what << " (vs resident)";
        if (!e->gpu_augment_after_copy)
          for (const EpochResult& r : gpu.epochs) {
            EXPECT_EQ(r.strategy.h2d_bytes, gpu_augment_h2d(e->name, r.epoch, n, false))
                << what << " epoch " << r.epoch;
            EXPECT_FALSE(r.strategy.producer.has_value()) << what << ": no host worker";
          }
        // Its own host workers (resident has none: it refuses host augmentation in stream).
        RunConfig host_cfg = gpu_cfg;
        host_cfg.augment_device = AugmentDevice::Host;
        host_cfg.fused = fused_mode_for(gpu.step);
        if (const std::string why = waiver_reason(*e, strategy_options(host_cfg), caps);
            !why.empty()) {
          std::cout << "[ SKIPPED ] " << what << " with host workers: " << why << "\n";
          continue;
        }
        const RunOutput host = train_run(host_cfg);
        EXPECT_EQ(first_difference(host, gpu), "") << what << " (gpu vs host workers)";
        ASSERT_FALSE(host.epochs.empty());
        ASSERT_TRUE(host.epochs.back().strategy.producer.has_value()) << what;
        EXPECT_EQ(host.epochs.back().strategy.producer->samples, mnist().n_train()) << what;
        if (!e->gpu_augment_after_copy) continue;
        // A copying taker's workers gather (the GPU augments after the copy): its raw rows are
        // as many bytes as the host's augmented ones, plus the epoch number.
        ASSERT_EQ(gpu.epochs.size(), host.epochs.size()) << what;
        for (std::size_t i = 0; i < gpu.epochs.size(); ++i) {
          const EpochResult& r = gpu.epochs[i];
          EXPECT_EQ(r.strategy.h2d_bytes,
                    gpu_augment_h2d(*e, r.epoch, n, false, host.epochs[i].strategy.h2d_bytes))
              << what << " epoch " << r.epoch;
          ASSERT_TRUE(r.strategy.producer.has_value()) << what << ": its host workers gather";
          EXPECT_EQ(r.strategy.producer->samples, mnist().n_train()) << what;
        }
      }
    }
}

// The um family's prefetches move the set the GPU reads, not its transfer format: with f32
// batches the set is uint8, and um-prefetch's per-row prefetches and um-prefetch-coarse's chunks
// stay inside it (a range past the allocation would fail the run), on a set whose last batch is
// ragged, in both scenarios.
TEST(AugmentDeviceGpu, UnifiedMemoryPrefetchesTheUint8SetWithF32Batches) {
  MEMSTRAT_REQUIRE_GPU_AND_MNIST();
  HostDataset data = mnist();
  truncate_dataset(data, 12000, 1000);
  const std::uint64_t n = static_cast<std::uint64_t>(data.n_train());
  for (const Scenario sc : {Scenario::Refresh, Scenario::Stream})
    for (const StrategyEntry* e : gpu_augment_takers(sc)) {
      if (e->name != "um-prefetch" && e->name != "um-advise" && e->name != "um-prefetch-coarse")
        continue;
      RunConfig c = sc == Scenario::Refresh
                        ? refresh_run(Transfer::F32, {256}, AugmentDevice::Gpu)
                        : stream_run(e->name, Augment::Heavy, {256}, AugmentDevice::Gpu);
      c.strategy = e;
      c.transfer = Transfer::F32;
      c.prefetch_chunk_mib = 1;  // several chunks of uint8 rows
      const RunOutput o = train_run_on(data, c);
      for (const EpochResult& r : o.epochs)
        EXPECT_EQ(r.strategy.h2d_bytes,
                  gpu_augment_h2d(e->name, r.epoch, n, sc == Scenario::Refresh))
            << e->name << " " << to_string(sc) << " epoch " << r.epoch;
    }
}
