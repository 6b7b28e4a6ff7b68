// self_check.h: does the harness time a copy the way anyone would? pinned-h2d at the largest
// size must agree within 5% with a plain measurement: one cudaMemcpyAsync between its own pair
// of CUDA events, on its own stream and buffers, with none of the harness's code.
#pragma once

#include <cstddef>
#include <string_view>

namespace memstrat {

inline constexpr std::string_view kSelfCheckPrimitive = "pinned-h2d";
inline constexpr double kSelfCheckTolerance = 0.05;
/// Below this a copy lasts well under a millisecond and launch jitter alone can exceed 5%.
inline constexpr std::size_t kSelfCheckMinBytes = std::size_t{16} << 20;

struct SelfCheck {
  std::size_t bytes = 0;
  double primitive_median_us = 0;  // the pinned-h2d sweep at `bytes`
  double plain_median_us = 0;      // the plain measurement, median of `samples`
  int samples = 0;
  double relative_difference = 0;  // (primitive - plain) / plain
  bool passed = false;             // |relative_difference| <= kSelfCheckTolerance
};

/// Median over `samples` copies (after one untimed warm-up copy) of one cudaMemcpyAsync of
/// `bytes` from cudaMallocHost memory to device memory, each between its own event pair.
/// Uses the current device.
double plain_pinned_copy_us(std::size_t bytes, int samples);

/// Measures the plain copy and compares it with the primitive's median at the same size.
SelfCheck self_check(std::size_t bytes, double primitive_median_us, int samples);

}  // namespace memstrat
