#include "memory_strategies/memory_strategy.h"

#include "common/cuda_check.h"
#include "common/peer_access.h"

namespace memstrat {

std::string_view to_string(Transfer t) { return t == Transfer::U8 ? "u8" : "f32"; }
std::string_view to_string(Scenario s) {
  switch (s) {
    case Scenario::Static: return "static";
    case Scenario::Refresh: return "refresh";
    case Scenario::Stream: return "stream";
  }
  return "?";
}

std::string AdviseSet::to_string() const {
  std::string s;
  const bool on[] = {read_mostly, preferred_device, accessed_by};
  for (std::size_t i = 0; i < std::size(kAdviseHints); ++i) {
    if (!on[i]) continue;
    if (!s.empty()) s += ",";
    s += kAdviseHints[i];
  }
  return s.empty() ? "none" : s;
}

DeviceCaps DeviceCaps::query(int device, int first_gpu) {
  DeviceCaps c;
  c.device = device;
  c.first_gpu = first_gpu;
  if (first_gpu >= 0) c.can_access_first_gpu = PeerAccess::possible(device, first_gpu);
  int v = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, device));
  c.concurrent_managed_access = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrManagedMemory, device));
  c.managed_memory = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, device));
  c.can_map_host_memory = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrAsyncEngineCount, device));
  c.async_engine_count = v;
  CUDA_CHECK(cudaMemGetInfo(&c.free_bytes, &c.total_bytes));
  return c;
}

DeviceCaps DeviceCaps::every() {
  DeviceCaps c;
  c.concurrent_managed_access = c.managed_memory = c.can_map_host_memory = true;
  c.async_engine_count = 8;
  c.free_bytes = c.total_bytes = ~std::size_t{0};
  return c;
}

}  // namespace memstrat
