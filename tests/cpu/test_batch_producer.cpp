// BatchProducer on the CPU (release() hand-off; release_after is in tests/gpu): the bytes of
// every batch against the refresh scenario's EpochWriter and against other worker counts, the
// bounded ring, back-pressure and starvation figures, a stress run with one or two slots and
// random delays on both sides, errors surfacing on the consumer, and shutdown that never hangs.
// Thread sanitizer: configure a separate build with
//   -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread
// and run this executable; it is written to pass there (no data race is tolerated).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "memory_strategies/batch_producer.h"
#include "memory_strategies/epoch_data.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;
using memstrat::testing::synthetic_dataset;

namespace {

constexpr std::uint8_t kCanary = 0xC5;
constexpr std::size_t kGuard = 64;

/// K slots of ordinary memory, each with guard bytes on both sides to catch a write past it.
class Ring {
 public:
  Ring(int k, int batch, std::size_t bytes_per_sample)
      : image_bytes_(batch * bytes_per_sample), label_count_(static_cast<std::size_t>(batch)) {
    for (int s = 0; s < k; ++s) {
      images_.emplace_back(image_bytes_ + 2 * kGuard, kCanary);
      labels_.emplace_back(label_count_ + 2 * kGuard / 4, -7);
    }
  }
  std::vector<SlotMemory> memory() {
    std::vector<SlotMemory> m;
    for (std::size_t s = 0; s < images_.size(); ++s)
      m.push_back({images_[s].data() + kGuard, labels_[s].data() + kGuard / 4});
    return m;
  }
  bool guards_intact() const {
    for (std::size_t s = 0; s < images_.size(); ++s) {
      const auto& im = images_[s];
      for (std::size_t i = 0; i < kGuard; ++i)
        if (im[i] != kCanary || im[kGuard + image_bytes_ + i] != kCanary) return false;
      const auto& lb = labels_[s];
      for (std::size_t i = 0; i < kGuard / 4; ++i)
        if (lb[i] != -7 || lb[kGuard / 4 + label_count_ + i] != -7) return false;
    }
    return true;
  }

 private:
  std::size_t image_bytes_, label_count_;
  std::vector<std::vector<std::uint8_t>> images_;
  std::vector<std::vector<std::int32_t>> labels_;
};

struct Epoch {
  std::vector<std::uint8_t> images;
  std::vector<std::int32_t> labels;
};

/// Consumes one epoch: every batch copied out of its slot, then released (after `hold`).
Epoch consume(BatchProducer& p, int epoch, const std::function<void(int b)>& hold = nullptr) {
  p.begin_epoch(epoch);
  Epoch e;
  const std::size_t row = p.geometry().image_bytes_per_sample;
  for (int b = 0; b < p.batches(); ++b) {
    const int s = p.wait_ready(b);
    const SlotMemory m = p.slot(s);
    const auto* img = static_cast<const std::uint8_t*>(m.images);
    e.images.insert(e.images.end(), img, img + p.rows(b) * row);
    e.labels.insert(e.labels.end(), m.labels, m.labels + p.rows(b));
    if (hold) hold(b);
    p.release(s);
  }
  return e;
}

ProducerConfig config(int workers, int batch, Augment a, Transfer t = Transfer::U8) {
  ProducerConfig c;
  c.workers = workers;
  c.batch = batch;
  c.augment = a;
  c.transfer = t;
  c.seed = 11;
  return c;
}

}  // namespace

TEST(BatchProducer, LightBatchesAreTheRefreshEpochInBatches) {
  // batch 128 over 3000 samples: 23 full batches and a partial one of 56 rows.
  const HostDataset d = synthetic_dataset(3000);
  for (Transfer t : {Transfer::U8, Transfer::F32}) {
    StrategyOptions o;
    o.scenario = Scenario::Refresh;
    o.transfer = t;
    o.seed = 11;
    const EpochWriter w(d, o);
    Ring ring(3, 128, w.image_bytes_per_sample());
    BatchProducer p(d, config(2, 128, Augment::Light, t), ring.memory());
    ASSERT_EQ(p.batches(), 24);
    ASSERT_EQ(p.rows(23), 56);
    for (int epoch : {1, 2, 3}) {
      const Epoch got = consume(p, epoch);
      std::vector<std::uint8_t> img(w.image_bytes());
      std::vector<std::int32_t> lab(3000);
      w.write(epoch, img.data(), lab.data());
      EXPECT_EQ(got.images, img) << "epoch " << epoch;
      EXPECT_EQ(got.labels, lab) << "epoch " << epoch;
      const ProducerStats st = p.stats();
      EXPECT_EQ(st.batches, 24);
      EXPECT_EQ(st.samples, 3000);
    }
    EXPECT_TRUE(ring.guards_intact());
  }
}

TEST(BatchProducer, SameBytesForOneThreeOrEightWorkers) {
  const HostDataset d = synthetic_dataset(1500);
  for (Augment a : {Augment::None, Augment::Heavy}) {
    std::vector<Epoch> reference;
    for (int workers : {1, 3, 8}) {
      for (int k : {1, 4}) {
        Ring ring(k, 100, 784);
        BatchProducer p(d, config(workers, 100, a), ring.memory());
        for (int epoch = 1; epoch <= 2; ++epoch) {
          Epoch e = consume(p, epoch);
          if (reference.size() < 2) {
            reference.push_back(std::move(e));
          } else {
            EXPECT_EQ(e.images, reference[epoch - 1].images)
                << to_string(a) << " workers " << workers << " K " << k << " epoch " << epoch;
            EXPECT_EQ(e.labels, reference[epoch - 1].labels);
          }
        }
        EXPECT_TRUE(ring.guards_intact());
      }
    }
    EXPECT_NE(reference[0].images, reference[1].images) << "a fresh permutation per epoch";
  }
}

TEST(BatchProducer, NeverMoreThanKBatchesAheadOfTheConsumer) {
  const HostDataset d = synthetic_dataset(2000);
  for (int k : {1, 2, 5}) {
    std::atomic<int> released{0};
    std::atomic<int> violations{0};
    ProducerConfig c = config(6, 50, Augment::Light);
    c.after_fill = [&](int, int b) {
      // Batch b may only exist once batch b - K has been handed back.
      if (b - k >= released.load()) violations.fetch_add(1);
    };
    Ring ring(k, 50, 784);
    BatchProducer p(d, c, ring.memory());
    for (int epoch = 1; epoch <= 2; ++epoch) {
      released = 0;
      consume(p, epoch, [&](int b) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        released = b + 1;  // release() follows right after this
      });
    }
    EXPECT_EQ(violations.load(), 0) << "K " << k;
  }
}

TEST(BatchProducer, StressTinyRingRandomDelaysBothSides) {
  const HostDataset d = synthetic_dataset(700);
  // Reference bytes straight from write_rows, without any producer.
  auto reference = [&](int epoch) {
    EpochOrder order(700, 11);
    order.set_epoch(epoch);
    Epoch e;
    e.images.resize(700 * 784);
    e.labels.resize(700);
    std::vector<std::uint8_t> scratch(784);
    write_rows({&d, order.order(), Augment::Heavy, Transfer::U8, 11, epoch}, 0, 700,
               e.images.data(), e.labels.data(), scratch.data());
    return e;
  };
  for (int k : {1, 2}) {
    ProducerConfig c = config(8, 7, Augment::Heavy);  // 100 batches of 7 rows
    c.after_fill = [](int worker, int b) {
      thread_local std::mt19937 rng(static_cast<unsigned>(worker * 7919 + b));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    };
    Ring ring(k, 7, 784);
    BatchProducer p(d, c, ring.memory());
    std::mt19937 consumer_rng(5);
    for (int epoch = 1; epoch <= 4; ++epoch) {
      const Epoch got = consume(p, epoch, [&](int) {
        std::this_thread::sleep_for(std::chrono::microseconds(consumer_rng() % 300));
      });
      const Epoch want = reference(epoch);
      ASSERT_EQ(got.images, want.images) << "K " << k << " epoch " << epoch;
      ASSERT_EQ(got.labels, want.labels);
    }
    EXPECT_TRUE(ring.guards_intact());
  }
}

// Several GPUs: the producer of shard r of N serves the whole epoch's batches g·N + r as its
// batches g, byte for byte (the whole epoch's order and augmentation keys), and the shards'
// batches together are the whole epoch's, at every epoch (each reshuffled). Heavy and light, u8
// and f32; 700 rows in batches of 64 leave a partial last batch in one shard.
TEST(BatchProducer, AShardServesTheWholeEpochsBatchesOfItsRank) {
  const HostDataset d = synthetic_dataset(700);
  const int batch = 64;  // 11 batches: 10 of 64 and one of 60
  for (const Augment a : {Augment::Light, Augment::Heavy})
    for (const Transfer t : {Transfer::U8, Transfer::F32})
      for (const int shards : {2, 3}) {
        SCOPED_TRACE(std::to_string(shards) + " shards");
        Ring whole_ring(2, batch, 784 * (t == Transfer::F32 ? 4 : 1));
        BatchProducer whole(d, config(3, batch, a, t), whole_ring.memory());
        std::vector<std::unique_ptr<Ring>> rings;
        std::vector<std::unique_ptr<BatchProducer>> mine;
        for (int r = 0; r < shards; ++r) {
          ProducerConfig c = config(2, batch, a, t);
          c.shard = r;
          c.shards = shards;
          rings.push_back(std::make_unique<Ring>(3, batch, 784 * (t == Transfer::F32 ? 4 : 1)));
          mine.push_back(std::make_unique<BatchProducer>(d, c, rings.back()->memory()));
        }
        const std::size_t row = whole.geometry().image_bytes_per_sample;
        for (int epoch = 1; epoch <= 2; ++epoch) {
          const Epoch w = consume(whole, epoch);
          std::int64_t rows = 0;
          for (int r = 0; r < shards; ++r) {
            BatchProducer& p = *mine[static_cast<std::size_t>(r)];
            const Epoch got = consume(p, epoch);
            rows += p.geometry().samples;
            ASSERT_EQ(p.batches(), (whole.batches() - r + shards - 1) / shards) << r;
            std::int64_t at = 0;
            for (int g = 0; g < p.batches(); ++g) {
              const int b = g * shards + r;
              ASSERT_EQ(p.rows(g), whole.rows(b)) << r << " " << g;
              const std::int64_t first = whole.geometry().first(b);
              EXPECT_TRUE(std::equal(got.images.begin() + at * static_cast<std::int64_t>(row),
                                     got.images.begin() + (at + p.rows(g)) * static_cast<std::int64_t>(row),
                                     w.images.begin() + first * static_cast<std::int64_t>(row)))
                  << "shard " << r << " batch " << g << " epoch " << epoch;
              EXPECT_TRUE(std::equal(got.labels.begin() + at, got.labels.begin() + at + p.rows(g),
                                     w.labels.begin() + first));
              at += p.rows(g);
            }
          }
          EXPECT_EQ(rows, 700);
        }
        for (const auto& ring : rings) EXPECT_TRUE(ring->guards_intact());
      }
  ProducerConfig bad = config(1, batch, Augment::Light);
  bad.shard = 2;
  bad.shards = 2;
  Ring ring(1, batch, 784);
  EXPECT_THROW(BatchProducer(d, bad, ring.memory()), std::invalid_argument);
}

// Batch b of every epoch lives in slot b mod K, also when K does not divide the batches of an
// epoch (the numbers up to the next multiple of K are skipped), and when the consumer still holds
// the last slot of an epoch while the next one begins: a strategy whose kernels read slots in
// place hands out the same address for batch b every epoch.
TEST(BatchProducer, BatchBIsInSlotBModKInEveryEpoch) {
  const HostDataset d = synthetic_dataset(1000);  // 10 batches of 100
  for (const int k : {1, 3, 4, 7, 10, 16}) {
    Ring ring(k, 100, 784);
    BatchProducer p(d, config(3, 100, Augment::Light), ring.memory());
    int held = -1;
    for (int epoch = 1; epoch <= 4; ++epoch) {
      p.begin_epoch(epoch);
      if (held >= 0) p.release(held);  // handed back only after the next epoch began
      held = -1;
      for (int b = 0; b < p.batches(); ++b) {
        const int s = p.wait_ready(b);
        ASSERT_EQ(s, b % k) << "K " << k << " epoch " << epoch << " batch " << b;
        if (b + 1 == p.batches() && k > 1)
          held = s;
        else
          p.release(s);
      }
    }
    if (held >= 0) p.release(held);
    EXPECT_TRUE(ring.guards_intact());
  }
}

TEST(BatchProducer, StarvationAndBackPressureAreMeasured) {
  const HostDataset d = synthetic_dataset(400);
  {  // slow producers, eager consumer: the consumer waits, the producers never do
    ProducerConfig c = config(1, 100, Augment::None);
    c.after_fill = [](int, int) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
    Ring ring(4, 100, 784);
    BatchProducer p(d, c, ring.memory());
    consume(p, 1);
    const ProducerStats s = p.stats();
    EXPECT_EQ(s.consumer_waits, 4);
    EXPECT_GE(s.consumer_wait_ms, 4 * 20 * 0.9);
    EXPECT_GE(s.first_wait_ms, 20 * 0.9);
    EXPECT_LT(s.slot_wait_ms, 20.0);
    EXPECT_GE(s.busy_ms, 4 * 20 * 0.9);
    EXPECT_GE(s.span_ms, 4 * 20 * 0.9);
    EXPECT_GT(s.samples_per_s(), 0.0);
    EXPECT_GT(s.worker_samples_per_s(), 0.0);
  }
  {  // fast producers, slow consumer, one slot: the producers wait for it
    Ring ring(1, 100, 784);
    BatchProducer p(d, config(2, 100, Augment::None), ring.memory());
    consume(p, 1, [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    const ProducerStats s = p.stats();
    EXPECT_GE(s.slot_wait_ms, 3 * 20 * 0.9);  // batches 1..3 each waited for the slot
    EXPECT_EQ(s.workers, 2);
    EXPECT_EQ(s.slots, 1);
  }
}

TEST(BatchProducer, WorkerExceptionSurfacesOnTheConsumer) {
  const HostDataset d = synthetic_dataset(1000);
  for (int failing_batch : {0, 5}) {
    ProducerConfig c = config(4, 50, Augment::Heavy);
    c.after_fill = [failing_batch](int, int b) {
      if (b == failing_batch) throw std::runtime_error("augmentation failed on purpose");
    };
    Ring ring(2, 50, 784);
    BatchProducer p(d, c, ring.memory());
    p.begin_epoch(1);
    try {
      for (int b = 0; b < p.batches(); ++b) p.release(p.wait_ready(b));
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "augmentation failed on purpose");
    }
    EXPECT_THROW(p.begin_epoch(2), std::runtime_error);  // it stays failed
  }                                                      // and the destructor returns
}

TEST(BatchProducer, MisuseThatWouldHangThrowsInstead) {
  const HostDataset d = synthetic_dataset(500);
  Ring ring(1, 100, 784);
  BatchProducer p(d, config(2, 100, Augment::None), ring.memory());
  EXPECT_THROW(p.wait_ready(0), std::logic_error);  // before begin_epoch
  p.begin_epoch(1);
  EXPECT_THROW(p.wait_ready(1), std::logic_error);  // out of order
  const int s = p.wait_ready(0);
  EXPECT_THROW(p.wait_ready(1), std::logic_error);              // its only slot is still held
  EXPECT_THROW(p.release_after(s, nullptr), std::logic_error);  // no gpu_release
  EXPECT_THROW(p.release(s + 1), std::logic_error);
  p.release(s);
  EXPECT_THROW(p.release(s), std::logic_error);      // twice
  EXPECT_THROW(p.begin_epoch(2), std::logic_error);  // batches 1..4 not taken
  for (int b = 1; b < 5; ++b) p.release(p.wait_ready(b));
  EXPECT_THROW(p.wait_ready(5), std::logic_error);  // past the end
  p.begin_epoch(2);
  p.release(p.wait_ready(0));
}

TEST(BatchProducer, RejectsBadConfigurations) {
  const HostDataset d = synthetic_dataset(10);
  Ring ring(1, 4, 784);
  EXPECT_THROW((void)BatchProducer(d, config(0, 4, Augment::None), ring.memory()),
               std::invalid_argument);
  EXPECT_THROW((void)BatchProducer(d, config(1, 0, Augment::None), ring.memory()),
               std::invalid_argument);
  EXPECT_THROW((void)BatchProducer(d, config(1, 4, Augment::None), {}), std::invalid_argument);
  EXPECT_THROW((void)BatchProducer(d, config(1, 4, Augment::None), {SlotMemory{}}),
               std::invalid_argument);
}

TEST(BatchProducer, DestructionNeverHangs) {
  const HostDataset d = synthetic_dataset(2000);
  {  // never started
    Ring ring(2, 100, 784);
    BatchProducer p(d, config(3, 100, Augment::Heavy), ring.memory());
  }
  {  // ring full, consumer holding a slot, workers blocked on free slots
    Ring ring(2, 100, 784);
    BatchProducer p(d, config(8, 100, Augment::Heavy), ring.memory());
    p.begin_epoch(1);
    (void)p.wait_ready(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {  // mid-epoch with slow workers still filling
    ProducerConfig c = config(4, 100, Augment::Heavy);
    c.after_fill = [](int, int) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
    Ring ring(3, 100, 784);
    BatchProducer p(d, c, ring.memory());
    p.begin_epoch(1);
    p.release(p.wait_ready(0));
  }
}
