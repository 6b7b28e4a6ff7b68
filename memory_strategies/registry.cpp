#include "memory_strategies/registry.h"

#include "memory_strategies/double_buffer.h"
#include "memory_strategies/pageable.h"
#include "memory_strategies/pinned.h"
#include "memory_strategies/resident.h"
#include "memory_strategies/um.h"
#include "memory_strategies/um_advise.h"
#include "memory_strategies/um_prefetch.h"
#include "memory_strategies/zero_copy.h"

namespace memstrat {

namespace {
template <typename T>
std::unique_ptr<MemoryStrategy> make() {
  return std::make_unique<T>();
}
std::string always(const DeviceCaps&) { return {}; }
std::string needs_mapping(const DeviceCaps& c) {
  return c.can_map_host_memory ? "" : "device cannot map host memory (canMapHostMemory = 0)";
}
std::string needs_managed(const DeviceCaps& c) {
  return c.managed_memory ? "" : "device has no managed memory (managedMemory = 0)";
}
std::string needs_concurrent_managed(const DeviceCaps& c) {
  if (!c.managed_memory) return needs_managed(c);
  return c.concurrent_managed_access
             ? ""
             : "prefetch/advise need concurrentManagedAccess = 1 (not on this device/OS)";
}
}  // namespace

const std::vector<StrategyEntry>& strategy_registry() {
  static const std::vector<StrategyEntry> r = {
      {"resident", "whole data set in device memory, uploaded once; batch = pointer offset (upper bound)", always, make<ResidentStrategy>},
      {"pageable", "malloc'ed host memory; per batch a staged cudaMemcpy into one device buffer", always, make<PageableStrategy>},
      {"pinned", "cudaMallocHost memory; per batch cudaMemcpyAsync on the compute stream (no overlap)", always, make<PinnedStrategy>},
      {"double-buffer", "pinned memory; K device buffers filled by copy stream(s) while compute runs (--depth, --copy-streams)", always, make<DoubleBufferStrategy>},
      {"zero-copy", "mapped pinned memory read by the kernels over PCIe; nothing copied", needs_mapping, make<ZeroCopyStrategy>},
      {"um", "cudaMallocManaged memory written by the CPU; no hints, pages fault in on first GPU touch", needs_managed, make<UmStrategy>},
      {"um-prefetch", "managed memory; cudaMemPrefetchAsync of batch i+1 on a side stream while batch i computes", needs_concurrent_managed, make<UmPrefetchStrategy>},
      {"um-advise", "um-prefetch plus cudaMemAdvise ReadMostly / PreferredLocation / AccessedBy (--advise)", needs_concurrent_managed, make<UmAdviseStrategy>},
  };
  return r;
}

const StrategyEntry* find_strategy(std::string_view name) {
  for (const auto& e : strategy_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string strategy_names() {
  std::string s;
  for (const auto& e : strategy_registry()) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

}  // namespace memstrat
