// augment_bench: the host cost of the stream scenario's input pipeline, without a GPU.
//
//   build/augment_bench [--data DIR] [--batch N] [--batches B] [--reps R] [--workers 1,2,4]
//
// Part 1, one thread: µs per sample of write_rows (gather + augment + format) for every
// augmentation (none, light, heavy) and transfer format (u8, f32), the median (min-max) of R
// timings of B batches each, after one untimed pass. Part 2: a BatchProducer with W workers
// and a ring of 2·W slots in ordinary memory, drained by a consumer that does nothing else
// (release at once), over one epoch: samples/s delivered, per-worker rate while busy, and how
// long the consumer waited. Uses MNIST where memstrat finds it (--data, $MEMSTRAT_DATA, then
// data/mnist). Exit codes as memstrat's: 2 for a bad option or data set, 1 for a failure.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/mnist.h"
#include "memory_strategies/batch_producer.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/epoch_order.h"

using namespace memstrat;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void single_thread(const HostDataset& data, int batch, int batches, int reps) {
  std::printf("one thread, %d batches of %d rows per timing, median (min-max) of %d:\n", batches,
              batch, reps);
  EpochOrder order(data.n_train(), 1);
  order.set_epoch(1);
  const std::int64_t rows =
      std::min<std::int64_t>(static_cast<std::int64_t>(batch) * batches, data.n_train());
  for (Augment a : {Augment::None, Augment::Light, Augment::Heavy})
    for (Transfer t : {Transfer::U8, Transfer::F32}) {
      std::vector<std::uint8_t> images(transfer_bytes_per_sample(data.features(), t) * batch);
      std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
      std::vector<std::uint8_t> scratch(static_cast<std::size_t>(data.features()));
      const EpochRows spec{&data, order.order(), a, t, 1, 1};
      auto pass = [&] {
        for (std::int64_t first = 0; first < rows; first += batch)
          write_rows(spec, first, std::min<std::int64_t>(batch, rows - first), images.data(),
                     labels.data(), scratch.data());
      };
      pass();
      std::vector<double> us;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        pass();
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            static_cast<double>(rows));
      }
      std::printf("  %-5s %-3s %8.3f us/sample (%.3f-%.3f)\n", std::string(to_string(a)).c_str(),
                  std::string(to_string(t)).c_str(), median(us),
                  *std::min_element(us.begin(), us.end()), *std::max_element(us.begin(), us.end()));
    }
}

void producer(const HostDataset& data, int batch, int workers, Augment a) {
  const std::size_t row = transfer_bytes_per_sample(data.features(), Transfer::U8);
  const int k = 2 * workers;
  std::vector<std::vector<std::uint8_t>> images(k, std::vector<std::uint8_t>(row * batch));
  std::vector<std::vector<std::int32_t>> labels(k, std::vector<std::int32_t>(batch));
  std::vector<SlotMemory> slots;
  for (int s = 0; s < k; ++s) slots.push_back({images[s].data(), labels[s].data()});
  ProducerConfig cfg;
  cfg.workers = workers;
  cfg.batch = batch;
  cfg.augment = a;
  BatchProducer p(data, cfg, slots);
  p.begin_epoch(1);
  for (int b = 0; b < p.batches(); ++b) p.release(p.wait_ready(b));
  const ProducerStats s = p.stats();
  std::printf(
      "  %-5s workers %2d, %2d slots: %10.0f samples/s, %9.0f per busy worker, consumer "
      "waited %.1f ms of %.1f ms\n",
      std::string(to_string(a)).c_str(), workers, k, s.samples_per_s(), s.worker_samples_per_s(),
      s.consumer_wait_ms, s.span_ms);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the host side of the stream scenario: augmentation per sample, producers"};
  std::string data_dir;
  int batch = 256, batches = 40, reps = 5;
  std::vector<int> workers = {1, 2};
  app.add_option("--data", data_dir, "MNIST directory (default: $MEMSTRAT_DATA, then data/mnist)");
  app.add_option("--batch", batch, "rows per batch")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--batches", batches, "batches per single-thread timing")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--reps", reps, "single-thread timings")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--workers", workers, "producer worker counts to run, comma separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  HostDataset data;
  try {
    data = load_mnist(resolve_data_dir(data_dir));
  } catch (const DataError& e) {
    std::fprintf(stderr, "augment_bench: %s\n", e.what());
    return 2;
  }
  try {
    single_thread(data, batch, batches, reps);
    std::printf("producers, one epoch of %lld samples, u8, batch %d:\n",
                static_cast<long long>(data.n_train()), batch);
    for (Augment a : {Augment::Light, Augment::Heavy})
      for (int w : workers) producer(data, batch, w, a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "augment_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
