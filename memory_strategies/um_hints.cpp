#include "memory_strategies/um_hints.h"

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
  }
#if CUDART_VERSION >= 13000
  CUDA_CHECK(cudaMemAdvise(ptr, bytes, a, device_location(device)));
#else
  CUDA_CHECK(cudaMemAdvise(ptr, bytes, a, device));
#endif
}

}  // namespace memstrat
