#include "memory_strategies/prefetch_plan.h"

#include <algorithm>
#include <stdexcept>

namespace memstrat {

PrefetchPlan PrefetchPlan::coarse(const BatchGeometry& g, std::size_t chunk_bytes) {
  if (chunk_bytes == 0) throw std::invalid_argument("PrefetchPlan: chunk size must be > 0");
  const std::uint64_t full = g.batches() == 0 ? 1 : g.bytes(0);
  const std::uint64_t per = std::max<std::uint64_t>(1, chunk_bytes / full);
  return PrefetchPlan(g, static_cast<int>(std::min<std::uint64_t>(per, std::max(1, g.batches()))));
}

PrefetchChunk PrefetchPlan::chunk(int c) const {
  PrefetchChunk k;
  k.first_batch = c * per_;
  k.end_batch = std::min(g_.batches(), k.first_batch + per_);
  const std::int64_t first = g_.first(k.first_batch);
  const std::int64_t end = std::min(g_.samples, g_.first(k.end_batch));
  const auto n = static_cast<std::size_t>(end - first);
  k.image_offset = static_cast<std::size_t>(first) * g_.image_bytes_per_sample;
  k.image_bytes = n * g_.image_bytes_per_sample;
  k.label_offset = static_cast<std::size_t>(first) * sizeof(std::int32_t);
  k.label_bytes = n * sizeof(std::int32_t);
  return k;
}

int row_runs(const std::int32_t* rows, int n, std::int32_t* sorted, RowRun* runs) {
  std::copy(rows, rows + n, sorted);
  std::sort(sorted, sorted + n);
  int k = 0;
  for (int i = 0; i < n; ++i) {
    if (k > 0 && sorted[i] <= runs[k - 1].first + runs[k - 1].count) {  // next, or a repeat
      runs[k - 1].count = std::max(runs[k - 1].count, sorted[i] - runs[k - 1].first + 1);
      continue;
    }
    runs[k++] = {sorted[i], 1};
  }
  return k;
}

std::uint64_t PrefetchPlan::epoch_bytes() const {
  std::uint64_t s = 0;
  for (int c = 0; c < chunks(); ++c) s += chunk(c).bytes();
  return s;
}

}  // namespace memstrat
