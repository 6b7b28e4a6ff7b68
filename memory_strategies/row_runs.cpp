#include "memory_strategies/row_runs.h"

#include <algorithm>

namespace memstrat {

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

}  // namespace memstrat
