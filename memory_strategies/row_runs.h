// row_runs.h: the rows a gathered batch reads (stream scenario, --augment none: the GPU gathers
// scattered samples) as runs of consecutive data-set rows, so that a managed strategy moves a
// scattered batch ahead of its gather with one prefetch per run.
#pragma once

#include <cstdint>

namespace memstrat {

/// A run of consecutive data-set rows [first, first + count).
struct RowRun {
  std::int32_t first = 0;
  std::int32_t count = 0;
};

/// rows[0..n) copied into `sorted` (room for n) and sorted, then merged into runs written to
/// `runs` (room for n); returns their number. Repeated rows fall into one run. No allocation.
int row_runs(const std::int32_t* rows, int n, std::int32_t* sorted, RowRun* runs);

}  // namespace memstrat
