// synthetic_dataset.h: a seeded HostDataset of n random side x side uint8 images and random
// labels 0-9, for tests that need data (of a given shape) but not MNIST: samples differ in
// almost every byte, so a wrong gather, offset or stride shows.
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
  for (int i = 0; i < n; ++i) d.train_labels.push_back(static_cast<std::int32_t>(rng() % 10));
  return d;
}

}  // namespace memstrat::testing
