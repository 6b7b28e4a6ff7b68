// um_hints.h: the unified-memory calls every managed strategy makes, each in one place: the guard
// against over-requesting managed memory, and cudaMemPrefetchAsync / cudaMemAdvise (CUDA 13
// changed both to take a cudaMemLocation; everything else in memstrat calls these helpers).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace memstrat {

/// Refuse a managed allocation the device could not hold: over-requesting managed memory can
/// hang the GPU. Throws std::runtime_error with the numbers and what to do.
void check_managed_fits(std::size_t bytes, const char* strategy);

/// Migrate [ptr, ptr+bytes) of managed memory to `device`, ordered on `stream`.
void prefetch_to_device(const void* ptr, std::size_t bytes, int device, cudaStream_t stream);
/// Migrate [ptr, ptr+bytes) of managed memory back to host memory (cudaCpuDeviceId), ordered on
/// `stream`: e.g. to put pages back where a fault-driven or prefetch measurement starts from.
void prefetch_to_host(const void* ptr, std::size_t bytes, cudaStream_t stream);

enum class UmAdvice { ReadMostly, PreferredLocationDevice, AccessedByDevice, PreferredLocationHost };
/// cudaMemAdvise(ptr, bytes, advice, location = device) for one advice (PreferredLocationHost:
/// the location is the host, and `device` is not read).
void advise(const void* ptr, std::size_t bytes, UmAdvice advice, int device);

}  // namespace memstrat
