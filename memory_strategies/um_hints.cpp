#include "memory_strategies/um_hints.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "common/cuda_check.h"

namespace memstrat {

namespace {
#if CUDART_VERSION >= 12020
cudaMemLocation device_location(int device) {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = device;
  return loc;
}
cudaMemLocation host_location() {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeHost;  // id is ignored for the host
  return loc;
}
#endif
}  // namespace

void check_managed_fits(std::size_t bytes, const char* strategy) {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // Keep a margin for the MLP's own buffers, cuBLAS workspaces and the driver.
  const std::size_t margin = std::max<std::size_t>(512ull << 20, total_b / 20);
  if (bytes + margin > free_b) {
    std::ostringstream m;
    m << strategy << ": refusing to allocate " << (bytes >> 20) << " MiB of managed memory: the GPU "
      << "reports only " << (free_b >> 20) << " MiB free (a margin of " << (margin >> 20)
      << " MiB is kept). Over-requesting managed memory can hang the GPU. Use a smaller data "
      << "set (--train-samples) or free GPU memory.";
    throw std::runtime_error(m.str());
  }
}

void prefetch_to_device(const void* ptr, std::size_t bytes, int device, cudaStream_t stream) {
  if (bytes == 0) return;
#if CUDART_VERSION >= 13000
  CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, device_location(device), 0, stream));
#else
  CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, device, stream));
#endif
}

void prefetch_to_host(const void* ptr, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
#if CUDART_VERSION >= 13000
  CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, host_location(), 0, stream));
#else
  CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, cudaCpuDeviceId, stream));
#endif
}

void advise(const void* ptr, std::size_t bytes, UmAdvice advice, int device) {
  if (bytes == 0) return;
  cudaMemoryAdvise a = cudaMemAdviseSetReadMostly;
  switch (advice) {
    case UmAdvice::ReadMostly: a = cudaMemAdviseSetReadMostly; break;
    case UmAdvice::PreferredLocationDevice: a = cudaMemAdviseSetPreferredLocation; break;
    case UmAdvice::AccessedByDevice: a = cudaMemAdviseSetAccessedBy; break;
    case UmAdvice::PreferredLocationHost: a = cudaMemAdviseSetPreferredLocation; break;
  }
  const bool host = advice == UmAdvice::PreferredLocationHost;
#if CUDART_VERSION >= 13000
  CUDA_CHECK(cudaMemAdvise(ptr, bytes, a, host ? host_location() : device_location(device)));
#else
  CUDA_CHECK(cudaMemAdvise(ptr, bytes, a, host ? cudaCpuDeviceId : device));
#endif
}

}  // namespace memstrat
