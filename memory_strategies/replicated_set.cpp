#include "memory_strategies/replicated_set.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace memstrat {

namespace {
constexpr std::uint64_t kGiB = 1ull << 30;

std::string gib(std::uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  return s;
}
}  // namespace

std::uint64_t replicated_host_bytes(std::int64_t n, int features, int k,
                                    std::size_t transfer_bytes_per_sample) {
  const std::uint64_t samples = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(k);
  const std::uint64_t label = sizeof(std::int32_t);
  return samples * (static_cast<std::uint64_t>(features) + label) +
         samples * (transfer_bytes_per_sample + label);
}

std::string host_memory_refusal(std::uint64_t need, std::optional<std::uint64_t> available) {
  if (!available) return "";  // nothing to judge by (no /proc/meminfo): the allocation decides
  const std::uint64_t headroom = std::max<std::uint64_t>(kGiB, *available / 10);
  if (*available > headroom && need <= *available - headroom) return "";
  return "needs " + gib(need) + " of host memory (the replicated set and one copy of it in the "
         "transfer format), and the host has " + gib(*available) +
         " available (MemAvailable), of which " + gib(headroom) +
         " (a tenth, at least 1 GiB) is left to everything else";
}

void replicate_training_set(HostDataset& data, int k, std::uint64_t seed, int threads,
                            std::ostream* progress) {
  if (k < 1 || k > kMaxReplicate)
    throw std::invalid_argument("--replicate " + std::to_string(k) + " is outside 1.." +
                                std::to_string(kMaxReplicate));
  const std::int64_t n = data.n_train();
  if (n * k > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument("--replicate " + std::to_string(k) + " makes " +
                                std::to_string(n * k) +
                                " samples, more than a sample order indexes (2^31 - 1)");
  if (k == 1) return;
  const std::size_t F = static_cast<std::size_t>(data.features());
  data.train_images.resize(static_cast<std::size_t>(n * k) * F);
  data.train_labels.resize(static_cast<std::size_t>(n * k));
  const std::uint8_t* src = data.train_images.data();  // copy 0, after the resize
  // Work items are blocks of samples of copies 1..K-1; each sample's bytes depend only on its
  // key and source, so any split over any number of threads writes the same set.
  const std::int64_t total = n * (k - 1);
  constexpr std::int64_t kBlock = 1024;
  std::atomic<std::int64_t> next{0}, done{0};
  auto work = [&] {
    for (std::int64_t lo; (lo = next.fetch_add(kBlock)) < total;) {
      const std::int64_t hi = std::min(total, lo + kBlock);
      for (std::int64_t w = lo; w < hi; ++w) {
        const int copy = static_cast<int>(w / n) + 1;
        const std::int64_t i = w % n;
        const std::size_t row = static_cast<std::size_t>(copy) * static_cast<std::size_t>(n) +
                                static_cast<std::size_t>(i);
        augment_image(Augment::Heavy, src + static_cast<std::size_t>(i) * F, data.rows, data.cols,
                      replica_key(seed, copy, i), data.train_images.data() + row * F);
        data.train_labels[row] = data.train_labels[static_cast<std::size_t>(i)];
      }
      done.fetch_add(hi - lo);
    }
  };
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const int t = threads > 0 ? threads : static_cast<int>(hw);
  std::vector<std::thread> pool;
  for (int w = 0; w < t; ++w) pool.emplace_back(work);
  const auto t0 = std::chrono::steady_clock::now();
  // A line a second while it runs, so a short one prints nothing.
  auto last = t0;
  while (progress != nullptr && done.load() < total) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1)) continue;
    last = now;
    *progress << "memstrat: --replicate " << k << ": " << done.load() << " of " << total
              << " samples augmented ("
              << static_cast<int>(std::chrono::duration<double>(now - t0).count()) << " s)\n"
              << std::flush;
  }
  for (std::thread& th : pool) th.join();
}

}  // namespace memstrat
