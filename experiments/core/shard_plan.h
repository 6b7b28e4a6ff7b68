// shard_plan.h: ShardPlan, how data-parallel training (--gpus N, --emulate-gpus N) cuts an epoch.
// A global batch is N × --batch rows of the epoch's order, cut into N contiguous row ranges, one
// per shard (GPU rank r, or the r-th turn of the one-GPU emulation). Shard r of global batch g is
// exactly the single-GPU batch g·N + r of --batch rows, so every strategy serves a shard as the
// batch it already knows. The last global batch keeps the epoch's remaining rows in that layout:
// the first shards take full --batch rows, one may be partial, the shards past the end are empty
// (0 rows: they contribute a zero gradient). The loss is the mean over the global batch's rows,
// so every shard's gradient carries the factor 1 / (the global batch's rows) and their sum is
// the gradient of that mean. With N = 1 this is the single-GPU layout and factor exactly.
#pragma once

#include <cstdint>

namespace memstrat {

/// One shard of one global batch.
struct ShardRange {
  int batch = 0;             // the single-GPU batch index (g·N + r) a strategy acquires
  std::int64_t first = 0;    // first row in the epoch's order
  int rows = 0;              // 0 for a shard past the end of the epoch
};

class ShardPlan {
 public:
  /// `samples` rows per epoch, `batch` rows per shard (--batch), `shards` = N. Throws
  /// std::invalid_argument unless samples >= 0, batch >= 1 and shards >= 1.
  ShardPlan(std::int64_t samples, int batch, int shards);
  int shards() const { return shards_; }
  int batch() const { return batch_; }
  std::int64_t samples() const { return samples_; }
  /// Global batches per epoch: ceil(samples / (N × batch)).
  int global_batches() const;
  /// Rows of global batch g (N × batch except perhaps the last).
  int global_rows(int g) const;
  std::int64_t global_first(int g) const { return static_cast<std::int64_t>(g) * shards_ * batch_; }
  /// Shard r of global batch g.
  ShardRange shard(int g, int r) const;
  /// The factor every shard's loss gradient carries in global batch g: 1 / global_rows(g), the
  /// same float expression the single-GPU step uses for its batch.
  float gradient_scale(int g) const;

 private:
  std::int64_t samples_;
  int batch_;
  int shards_;
};

}  // namespace memstrat
