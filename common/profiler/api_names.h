// api_names.h: the names of CUDA API functions as the profiler uses them: CUPTI's versioned
// names normalised, the functions every record lists, and the functions drawn in the trace.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memstrat {

/// CUPTI reports runtime functions with the CUDA version that introduced their signature:
/// "cudaMalloc_v3020", "cudaMemPrefetchAsync_v12020", "cudaGetDeviceProperties_v2_v12000".
/// Strips one trailing "_v" + 4 or more digits: "cudaMalloc", "cudaMemPrefetchAsync",
/// "cudaGetDeviceProperties_v2". Driver ABI suffixes ("cuMemAlloc_v2") and per-thread
/// default-stream variants ("cudaMemcpyAsync_ptsz") are kept: they are different entry points.
std::string normalize_api_name(std::string_view cupti_name);

/// The API functions every record lists, with an explicit 0 when not called: the allocation,
/// copy, unified-memory, synchronisation and launch calls that the memory strategies differ in.
const std::vector<std::string>& watched_api_names();

/// Whether calls of `normalized_name` are drawn in the trace: memory, copies, hints,
/// synchronisation, graph launches. Kernel launches are left out (the kernels themselves are
/// on the stream tracks).
bool is_traced_api(std::string_view normalized_name);

}  // namespace memstrat
