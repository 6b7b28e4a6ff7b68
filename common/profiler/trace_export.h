// trace_export.h: turns what the profiler recorded into Chrome trace events (track layout:
// docs/profiling.md). Host process: profiler windows, NVTX ranges and CUDA API calls per thread,
// CPU page faults; one process per GPU: kernels, memcpys and memsets per stream, prefetch
// migrations under the stream that asked for them, other unified-memory migrations, GPU page
// faults. Slices on one track never partially overlap (extra lanes take the exceptions).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "common/profiler/activity.h"
#include "common/profiler/chrome_trace.h"
#include "common/profiler/window_ledger.h"

namespace memstrat {

/// Adds every record and window to `trace` and returns the "otherData" block (generator, clock,
/// counts of NVTX ranges and dropped records). Sorts records.ops and records.um by start time.
/// now_ns closes a window that is still open; cupti_dropped: records CUPTI dropped.
nlohmann::json export_trace(ChromeTrace& trace, TraceRecords& records,
                            const WindowLedger::Spans& windows, std::uint64_t now_ns,
                            std::uint64_t cupti_dropped);

}  // namespace memstrat
