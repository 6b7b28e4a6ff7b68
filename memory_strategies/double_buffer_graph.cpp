#include "memory_strategies/double_buffer_graph.h"

#include <stdexcept>
#include <string>

namespace memstrat {

std::uint64_t DoubleBufferGraphStrategy::device_footprint(const StrategyOptions& opt,
                                                          const BatchGeometry& g) {
  // --depth device chunk slots of --copy-chunk MiB of whole packed batches.
  return static_cast<std::uint64_t>(opt.depth) *
         ChunkPlan::packed(g, static_cast<std::size_t>(opt.copy_chunk_mib) << 20).packed_slot_bytes();
}

void DoubleBufferGraphStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                       cudaStream_t compute) {
  const std::string who(name());
  if (opt.depth < 2) throw std::invalid_argument(who + ": --depth must be >= 2");
  if (opt.copy_streams < 1) throw std::invalid_argument(who + ": --copy-streams must be >= 1");
  if (opt.copy_chunk_mib < 1)
    throw std::invalid_argument(who + ": --copy-chunk must be >= 1 (MiB)");
  source_.configure(data, opt, compute);
  attach_blocks(blocks_, source_, data, opt);
  plan_ = ChunkPlan::packed(source_.geometry(), static_cast<std::size_t>(opt.copy_chunk_mib) << 20);
  ring_.allocate(opt.depth, plan_.packed_slot_bytes(), make_copy_streams(opt.copy_streams),
                 plan_.chunks(), compute, [this](int c, void* slot, cudaStream_t s) {
                   return blocks_.copy(plan_.packed_chunk(c), slot, s);
                 });
}

void DoubleBufferGraphStrategy::attach_blocks(PackedHostBlocks& blocks, HostEpochSource& source,
                                              const HostDataset&, const StrategyOptions&) {
  blocks.attach(source);  // pinned storage of its own
}

void DoubleBufferGraphStrategy::begin_epoch(int epoch) {
  // The previous epoch has finished on the GPU (the trainer synchronises between epochs), so
  // the host blocks may be rewritten (refresh) and no slot is in use.
  source_.begin_epoch(epoch);
  ring_.begin_epoch();
}

BatchView DoubleBufferGraphStrategy::acquire(int b) {
  return source_.packed_slot_view(ring_.acquire_batch(plan_, b), b);
}

}  // namespace memstrat
