#include "experiments/core/gradient_buckets.h"

#include <algorithm>
#include <stdexcept>

namespace memstrat {

GradientBuckets::GradientBuckets(const std::vector<int>& layers, std::size_t max_floats) {
  if (layers.size() < 2) throw std::invalid_argument("GradientBuckets: need at least two layer sizes");
  for (const int n : layers)
    if (n < 1) throw std::invalid_argument("GradientBuckets: every layer size must be >= 1");
  if (max_floats < 4) throw std::invalid_argument("GradientBuckets: a bucket must hold >= 4 floats");
  const std::size_t step = max_floats / 4 * 4;  // a split starts 16 bytes after the previous one
  const int L = static_cast<int>(layers.size()) - 1;
  std::vector<std::size_t> start(static_cast<std::size_t>(L) + 1, 0);  // layer l: W_l then b_l
  for (int l = 0; l < L; ++l)
    start[l + 1] = start[l] + static_cast<std::size_t>(layers[l]) * layers[l + 1] +
                   static_cast<std::size_t>(layers[l + 1]);
  count_ = start[L];
  for (int l = L - 1; l >= 0; --l)
    for (std::size_t b = start[l]; b < start[l + 1]; b += step)
      buckets_.push_back({b, std::min(start[l + 1], b + step), l});
}

}  // namespace memstrat
