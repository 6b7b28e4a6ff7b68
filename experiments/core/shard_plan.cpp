#include "experiments/core/shard_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace memstrat {

ShardPlan::ShardPlan(std::int64_t samples, int batch, int shards)
    : samples_(samples), batch_(batch), shards_(shards) {
  if (samples < 0) throw std::invalid_argument("ShardPlan: negative sample count");
  if (batch < 1) throw std::invalid_argument("ShardPlan: batch must be >= 1");
  if (shards < 1) throw std::invalid_argument("ShardPlan: shards must be >= 1");
}

int ShardPlan::global_batches() const {
  const std::int64_t g = static_cast<std::int64_t>(shards_) * batch_;
  return static_cast<int>((samples_ + g - 1) / g);
}

int ShardPlan::global_rows(int g) const {
  if (g < 0 || g >= global_batches())
    throw std::out_of_range("ShardPlan: global batch " + std::to_string(g) + " of " +
                            std::to_string(global_batches()));
  return static_cast<int>(
      std::min<std::int64_t>(static_cast<std::int64_t>(shards_) * batch_, samples_ - global_first(g)));
}

ShardRange ShardPlan::shard(int g, int r) const {
  if (r < 0 || r >= shards_)
    throw std::out_of_range("ShardPlan: shard " + std::to_string(r) + " of " + std::to_string(shards_));
  const int rows = global_rows(g);  // checks g
  ShardRange s;
  s.batch = g * shards_ + r;
  s.first = global_first(g) + static_cast<std::int64_t>(r) * batch_;
  const std::int64_t inside = static_cast<std::int64_t>(rows) - static_cast<std::int64_t>(r) * batch_;
  s.rows = static_cast<int>(std::clamp<std::int64_t>(inside, 0, batch_));
  return s;
}

float ShardPlan::gradient_scale(int g) const {
  return 1.0f / static_cast<float>(global_rows(g));
}

}  // namespace memstrat
