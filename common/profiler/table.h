// table.h: the end-of-run tables of the built-in profiler (CuptiProfiler::table()): CUDA API
// calls per window, and the unified-memory and activity counters per window.
#pragma once

#include <string>

#include "common/profiler/counters.h"
#include "common/profiler/window_ledger.h"

namespace memstrat {

/// API calls per window (rows: the allocation functions, the other watched functions that were
/// called, any other function called in a window other than "setup"; columns: windows,
/// outside, total) and the activity counters per window; "n/a" = not measured.
/// `totals`: every call counted, or nullptr when API counting is unavailable (then the first
/// table says why: `profiling_enabled` false = profiling off, else see the notes).
std::string profiler_table(const WindowLedger::History& windows, const ApiCounts* totals,
                           bool profiling_enabled);

}  // namespace memstrat
