// console.h: what `memstrat train` prints, read from the typed RunRecord: the run's header line,
// one line per epoch, the end-of-run table of every epoch with the set-up line and the
// profiler's notes, and the one-line summary (printed even with --quiet).
#pragma once

#include <iosfwd>

#include "experiments/core/record.h"

namespace memstrat {

void print_run_header(std::ostream& out, const RunRecord& r);
void print_epoch_line(std::ostream& out, const RunRecord& r, const EpochRecord& e);
/// The per-epoch table, the set-up time and API calls, and the profiler's notes.
void print_epoch_table(std::ostream& out, const RunRecord& r);
/// Needs r.totals (a finished run).
void print_summary_line(std::ostream& out, const RunRecord& r);

}  // namespace memstrat
