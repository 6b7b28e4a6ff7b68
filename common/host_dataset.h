// host_dataset.h: HostDataset, the validated training and test sets in host memory
// (uint8 pixels, int32 labels), as loaded from IDX files by common/mnist.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memstrat {

struct HostDataset {
  std::string name;    // "mnist" or "fashion-mnist"
  std::string source;  // directory the files were read from
  int rows = 28;
  int cols = 28;
  int classes = 10;
  std::vector<std::uint8_t> train_images;  // n_train * features(), row-major
  std::vector<std::int32_t> train_labels;  // n_train, each in [0, classes)
  std::vector<std::uint8_t> test_images;
  std::vector<std::int32_t> test_labels;

  int features() const { return rows * cols; }
  std::int64_t n_train() const { return static_cast<std::int64_t>(train_labels.size()); }
  std::int64_t n_test() const { return static_cast<std::int64_t>(test_labels.size()); }
};

}  // namespace memstrat
