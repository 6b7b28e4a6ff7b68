#include "memory_strategies/pinned_graph.h"

#include "common/nvtx.h"

namespace memstrat {

void PinnedGraphStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                 cudaStream_t compute) {
  source_.configure(data, opt, compute);
  blocks_.attach(source_);
  slot_ = DeviceBuffer<std::uint8_t>(blocks_.slot_bytes());
  timeline_.allocate(source_.geometry().batches());
}

BatchView PinnedGraphStrategy::acquire(int b) {
  NvtxRange r(Phase::H2D, "h2d");
  cudaStream_t compute = source_.compute();
  // On the compute stream: stream order keeps the copy from overwriting the slot while the
  // previous step still reads it, and the step from starting before its batch arrived.
  timeline_.start(b, compute);
  const std::size_t bytes = blocks_.copy(b, slot_.data(), compute);
  timeline_.stop(b, compute, bytes);
  return source_.packed_slot_view(slot_.data(), b);
}

StrategyStats PinnedGraphStrategy::stats() const {
  StrategyStats s;
  s.h2d_bytes = blocks_.epoch_bytes();
  s.copy_ms = timeline_.total_ms();
  return s;
}

}  // namespace memstrat
