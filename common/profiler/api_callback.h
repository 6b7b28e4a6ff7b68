// api_callback.h: the CUPTI callback that counts CUDA API calls, and the process-wide table it
// counts into (CUPTI allows one subscriber, so there is one table per process).
//
// The runtime-API domain counts every runtime call on entry; the driver-API domain counts driver
// calls made directly by the application or a library (cuBLAS launches through
// cuLaunchKernelEx), not the ones the runtime makes inside a runtime call (a thread-local depth
// tells them apart). That is the set `nsys stats --report cuda_api_sum` lists. The hot path is
// one relaxed atomic increment per call into a table indexed by callback id; names are resolved
// when a window ends.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "common/profiler/window_ledger.h"

namespace memstrat {

/// The callback to subscribe. userdata: the ActivityRecords that keep the API calls drawn in the
/// trace (see is_traced_api), or nullptr when not tracing.
void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* cbdata);

/// Calls counted so far in this process, by normalised name (never-seen ids by
/// "runtime#<id>" / "driver#<id>").
WindowLedger::Snapshot api_calls_so_far();
/// Name of the function in a table slot (an ApiEvent's slot); nullptr when not seen yet.
const char* api_slot_name(std::uint32_t slot);
/// Calls whose callback id did not fit in the table (not in any count).
std::uint64_t api_calls_out_of_range();

}  // namespace memstrat
