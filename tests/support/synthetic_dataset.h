// synthetic_dataset.h: a HostDataset of random pixels and cycling labels for tests that need
// data but not MNIST (every byte differs between samples, so a wrong gather shows).
#pragma once

#include <cstdint>
#include <random>

#include "common/host_dataset.h"

namespace memstrat::testing {

inline HostDataset synthetic_dataset(int n, unsigned seed = 3, int side = 28) {
  HostDataset d;
  d.name = "synthetic";
  d.rows = d.cols = side;
  std::mt19937 rng(seed);
  d.train_images.resize(static_cast<std::size_t>(n) * side * side);
  for (auto& p : d.train_images) p = static_cast<std::uint8_t>(rng() & 0xFF);
  for (int i = 0; i < n; ++i) d.train_labels.push_back(i % 10);
  return d;
}

}  // namespace memstrat::testing
