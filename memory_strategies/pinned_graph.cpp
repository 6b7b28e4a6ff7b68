#include "memory_strategies/pinned_graph.h"

#include <stdexcept>

#include "common/nvtx.h"

namespace memstrat {

std::uint64_t PinnedGraphStrategy::device_footprint(const StrategyOptions& opt,
                                                    const BatchGeometry& g) {
  // One device slot of --copy-chunk MiB of whole packed batches.
  return ChunkPlan::packed(g, static_cast<std::size_t>(opt.copy_chunk_mib) << 20).packed_slot_bytes();
}

void PinnedGraphStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                 cudaStream_t compute) {
  if (opt.copy_chunk_mib < 1)
    throw std::invalid_argument("pinned-graph: --copy-chunk must be >= 1 (MiB)");
  source_.configure(data, opt, compute);
  blocks_.attach(source_);
  plan_ = ChunkPlan::packed(source_.geometry(), static_cast<std::size_t>(opt.copy_chunk_mib) << 20);
  slot_ = DeviceBuffer<std::uint8_t>(plan_.packed_slot_bytes());
  timeline_.allocate(plan_.chunks());
}

BatchView PinnedGraphStrategy::acquire(int b) {
  if (plan_.starts_chunk(b)) {
    NvtxRange r(Phase::H2D, "h2d");
    cudaStream_t compute = source_.compute();
    const int c = plan_.chunk_of(b);
    // On the compute stream: stream order keeps chunk c's copy from overwriting the slot while
    // the previous chunk's last step still reads it, and chunk c's steps from starting before
    // it arrived.
    timeline_.start(c, compute);
    const std::size_t bytes = blocks_.copy(plan_.packed_chunk(c), slot_.data(), compute);
    timeline_.stop(c, compute, bytes);
  }
  return source_.packed_slot_view(slot_.data() + plan_.packed_offset_in_chunk(b), b);
}

StrategyStats PinnedGraphStrategy::stats() const {
  StrategyStats s;
  s.h2d_bytes = plan_.packed_epoch_bytes();
  s.copy_ms = timeline_.total_ms();
  return s;
}

}  // namespace memstrat
