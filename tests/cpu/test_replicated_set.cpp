// --replicate K (memory_strategies/replicated_set.h): copy 0 is the set as loaded, copy j >= 1
// each sample heavy-augmented under its own key, labels copied; the bytes depend only on the set,
// K and the seed (not on the thread count); the host-memory check refuses what MemAvailable cannot
// hold with its headroom. No GPU needed.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <vector>

#include "common/host_info.h"
#include "memory_strategies/replicated_set.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
HostDataset replicated(int n, int k, std::uint64_t seed, int threads) {
  HostDataset d = synthetic_dataset(n);
  replicate_training_set(d, k, seed, threads);
  return d;
}
}  // namespace

TEST(ReplicatedSet, OneCopyIsTheSetAsLoaded) {
  const HostDataset original = synthetic_dataset(300);
  const HostDataset one = replicated(300, 1, 7, 2);
  EXPECT_EQ(one.train_images, original.train_images);
  EXPECT_EQ(one.train_labels, original.train_labels);
}

TEST(ReplicatedSet, CopyZeroIsTheOriginalAndLaterCopiesAreItsHeavyAugmentations) {
  const int n = 257, k = 3;
  const HostDataset original = synthetic_dataset(n);
  const HostDataset d = replicated(n, k, 11, 2);
  ASSERT_EQ(d.n_train(), n * k);
  ASSERT_EQ(d.train_images.size(), original.train_images.size() * k);
  const std::size_t F = static_cast<std::size_t>(d.features());
  EXPECT_EQ(0, std::memcmp(d.train_images.data(), original.train_images.data(), n * F));
  std::vector<std::uint8_t> want(F);
  for (int j = 1; j < k; ++j)
    for (int i = 0; i < n; ++i) {
      augment_image(Augment::Heavy, original.train_images.data() + i * F, d.rows, d.cols,
                    AugmentKey{11, -j, i}, want.data());
      const std::size_t row = static_cast<std::size_t>(j) * n + i;
      ASSERT_EQ(0, std::memcmp(d.train_images.data() + row * F, want.data(), F))
          << "copy " << j << " sample " << i;
      ASSERT_EQ(d.train_labels[row], original.train_labels[i]);
    }
  // The copies differ from the original and from each other (the warp moves pixels).
  EXPECT_NE(0, std::memcmp(d.train_images.data(), d.train_images.data() + n * F, n * F));
  EXPECT_NE(0, std::memcmp(d.train_images.data() + n * F, d.train_images.data() + 2 * n * F, n * F));
  EXPECT_EQ(d.test_images, original.test_images);  // the test set is never replicated
}

TEST(ReplicatedSet, BytesDependOnTheSeedOnlyNotOnTheThreadCount) {
  const HostDataset one = replicated(3001, 4, 5, 1);
  for (const int threads : {2, 3, 7, 16}) {
    const HostDataset many = replicated(3001, 4, 5, threads);
    EXPECT_EQ(many.train_images, one.train_images) << threads << " threads";
    EXPECT_EQ(many.train_labels, one.train_labels) << threads << " threads";
  }
  EXPECT_EQ(replicated(3001, 4, 5, 0).train_images, one.train_images) << "the hardware's threads";
  EXPECT_NE(replicated(3001, 4, 6, 3).train_images, one.train_images) << "another seed";
}

// The per-epoch augmentations (refresh, stream) key by epoch >= 1; a copy's key never equals one.
TEST(ReplicatedSet, KeysAreApartFromEveryEpochKey) {
  for (int j = 1; j <= kMaxReplicate; j += 511) {
    const AugmentKey k = replica_key(9, j, 42);
    EXPECT_LT(k.epoch, 1);
    EXPECT_EQ(k.seed, 9u);
    EXPECT_EQ(k.index, 42);
  }
  // Different draws from the epoch key of the same (seed, index).
  const AffineParams a = heavy_params(replica_key(9, 1, 42)), b = heavy_params({9, 1, 42});
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
}

TEST(ReplicatedSet, RefusesKOutsideItsRange) {
  HostDataset d = synthetic_dataset(10);
  EXPECT_THROW(replicate_training_set(d, 0, 1), std::invalid_argument);
  EXPECT_THROW(replicate_training_set(d, kMaxReplicate + 1, 1), std::invalid_argument);
  EXPECT_EQ(d.n_train(), 10);
}

TEST(ReplicatedSet, HostBytesCountTheSetAndOneCopyInTheTransferFormat) {
  // 60000 x 3 samples: 784 + 4 bytes as loaded, 784 + 4 (u8) or 3136 + 4 (f32) in the copy.
  EXPECT_EQ(replicated_host_bytes(60000, 784, 3, 784), 180000ull * 788 * 2);
  EXPECT_EQ(replicated_host_bytes(60000, 784, 3, 3136), 180000ull * (788 + 3140));
}

TEST(ReplicatedSet, HostMemoryRefusalLeavesATenthAndAtLeastOneGiB) {
  const std::uint64_t G = 1ull << 30;
  EXPECT_EQ(host_memory_refusal(89 * G, 100 * G), "");      // 100 - 10 = 90 GiB usable
  EXPECT_EQ(host_memory_refusal(90 * G, 100 * G), "");
  const std::string no = host_memory_refusal(90 * G + 1, 100 * G);
  EXPECT_NE(no.find("needs 90.00 GiB"), std::string::npos) << no;
  EXPECT_NE(no.find("has 100.00 GiB available (MemAvailable)"), std::string::npos) << no;
  EXPECT_EQ(host_memory_refusal(3 * G, 4 * G), "");  // a tenth is less than 1 GiB: 1 GiB is kept
  EXPECT_NE(host_memory_refusal(3 * G + 1, 4 * G), "");
  EXPECT_NE(host_memory_refusal(1, G / 2), "");  // less than the headroom itself
  EXPECT_EQ(host_memory_refusal(1000 * G, std::nullopt), "") << "no /proc/meminfo: not judged";
}

TEST(ReplicatedSet, MemAvailableFromMeminfo) {
  std::istringstream m("MemTotal:       131072000 kB\nMemFree:         1000 kB\n"
                       "MemAvailable:   65536000 kB\nBuffers: 1 kB\n");
  EXPECT_EQ(mem_available_from_meminfo(m), 65536000ull * 1024);
  std::istringstream none("MemTotal: 1 kB\n");
  EXPECT_EQ(mem_available_from_meminfo(none), std::nullopt);
  std::istringstream odd("MemAvailable: lots\n");
  EXPECT_EQ(mem_available_from_meminfo(odd), std::nullopt);
  EXPECT_TRUE(available_memory_bytes().has_value()) << "this Linux host has /proc/meminfo";
}
