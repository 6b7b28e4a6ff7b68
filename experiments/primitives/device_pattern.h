// device_pattern.h: the pattern of pattern.h written and checked on the GPU, for data that ends
// in device-readable memory (device, managed, mapped): a 256 MiB check is a fraction of a
// millisecond, so every sample can be verified.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/cuda_raii.h"

namespace memstrat {

/// Write the pattern of `seed` into words [0, words) of p, enqueued on `stream`.
void fill_pattern_device(std::uint32_t* p, std::size_t words, std::uint32_t seed,
                         cudaStream_t stream);

/// Checks device-readable memory against the pattern. Owns its small result buffers.
class DevicePatternCheck {
 public:
  DevicePatternCheck() = default;
  static DevicePatternCheck create();
  /// Enqueues the check of words [0, bytes / 4) of p on `stream` and waits for it: "" when p
  /// holds the pattern of `seed`, else where it first differs and how many words are wrong.
  std::string run(const std::uint32_t* p, std::size_t bytes, std::uint32_t seed,
                  cudaStream_t stream);

 private:
  DeviceBuffer<unsigned long long> result_;  // [0] first wrong word (all ones: none), [1] count
  PinnedBuffer<unsigned long long> host_;    // the same, read back
  PinnedBuffer<std::uint32_t> got_;          // the first wrong word's value
};

}  // namespace memstrat
