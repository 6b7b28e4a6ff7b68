// mnist_test_data.h: where the tests find the real MNIST files (never part of the repository):
// $MEMSTRAT_DATA when set, else the checkout's data/mnist; and the training set loaded once per
// test executable. Tests that need it skip without it (CI sets MEMSTRAT_DATA).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/mnist.h"

namespace memstrat::testing {

/// The MNIST directory, or "" when none is there.
inline std::string mnist_dir() {
  std::string candidates[2] = {"", std::string(MEMSTRAT_SOURCE_DIR) + "/data/mnist"};
  if (const char* env = std::getenv(kDataEnvVar); env != nullptr) candidates[0] = env;
  for (const std::string& d : candidates)
    if (!d.empty() && (std::filesystem::exists(d + "/train-images-idx3-ubyte.gz") ||
                       std::filesystem::exists(d + "/train-images-idx3-ubyte")))
      return d;
  return "";
}

/// Loaded on first use; call only after mnist_dir() returned a directory.
inline const HostDataset& mnist() {
  static const HostDataset d = load_mnist(mnist_dir());
  return d;
}

/// The first `samples` training samples of mnist() (the test set whole), made once per size.
inline const HostDataset& mnist_first(std::int64_t samples) {
  static std::mutex m;
  static std::map<std::int64_t, HostDataset> made;
  const std::lock_guard<std::mutex> lock(m);
  auto it = made.find(samples);
  if (it == made.end()) {
    HostDataset s = mnist();
    s.train_images.resize(static_cast<std::size_t>(samples) * s.features());
    s.train_labels.resize(static_cast<std::size_t>(samples));
    it = made.emplace(samples, std::move(s)).first;
  }
  return it->second;
}

}  // namespace memstrat::testing

#define MEMSTRAT_REQUIRE_MNIST()                                                        \
  do {                                                                                  \
    if (::memstrat::testing::mnist_dir().empty())                                       \
      GTEST_SKIP() << "MNIST not found: set MEMSTRAT_DATA to the MNIST directory";      \
  } while (0)
