// gradient_buckets.h: GradientBuckets, the fixed cut of the flat gradient buffer (W_0, b_0, W_1,
// b_1, ... as MlpBuffers lays it out) into the ranges that --reduce ring all-reduces, one
// ncclAllReduce each. A bucket never spans two layers, holds at most a given number of floats
// and starts a multiple of 4 floats (16 bytes) after its layer's start; the buckets are listed in the order the
// backward pass finishes them (the last layer first), so a bucket can be reduced while the
// layers before it are still being differentiated. The cut depends only on the layer sizes and
// the bucket size, never on timing: the same calls with the same counts every step, which is
// what keeps a ring reduction's bits fixed for a fixed N (with NCCL's algorithm, protocol and
// channel count pinned).
#pragma once

#include <cstddef>
#include <vector>

namespace memstrat {

/// One bucket: floats [begin, end) of the flat gradient buffer, of layer `layer`.
struct GradientBucket {
  std::size_t begin = 0;
  std::size_t end = 0;
  int layer = 0;
  std::size_t size() const { return end - begin; }
};

/// The default bucket size of --reduce ring: 4 MiB of floats.
inline constexpr std::size_t kRingBucketFloats = (std::size_t{4} << 20) / sizeof(float);

class GradientBuckets {
 public:
  /// `layers` = input, hidden..., classes (MlpConfig::layers); buckets of at most max_floats
  /// floats (>= 4). Throws std::invalid_argument for fewer than 2 sizes, a size < 1 or
  /// max_floats < 4.
  GradientBuckets(const std::vector<int>& layers, std::size_t max_floats = kRingBucketFloats);
  /// In reduction order: the last layer's buckets first, each layer's from its start.
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  /// Floats in the whole flat buffer (every parameter).
  std::size_t count() const { return count_; }

 private:
  std::vector<GradientBucket> buckets_;
  std::size_t count_ = 0;
};

}  // namespace memstrat
