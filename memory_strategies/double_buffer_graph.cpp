#include "memory_strategies/double_buffer_graph.h"

#include <stdexcept>

namespace memstrat {

void DoubleBufferGraphStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                       cudaStream_t compute) {
  if (opt.depth < 2) throw std::invalid_argument("double-buffer-graph: --depth must be >= 2");
  if (opt.copy_streams < 1)
    throw std::invalid_argument("double-buffer-graph: --copy-streams must be >= 1");
  if (opt.copy_chunk_mib < 1)
    throw std::invalid_argument("double-buffer-graph: --copy-chunk must be >= 1 (MiB)");
  source_.configure(data, opt, compute);
  blocks_.attach(source_);
  plan_ = ChunkPlan::packed(source_.geometry(), static_cast<std::size_t>(opt.copy_chunk_mib) << 20);
  ring_.allocate(opt.depth, plan_.packed_slot_bytes(), make_copy_streams(opt.copy_streams),
                 plan_.chunks(), compute, [this](int c, void* slot, cudaStream_t s) {
                   return blocks_.copy(plan_.packed_chunk(c), slot, s);
                 });
}

void DoubleBufferGraphStrategy::begin_epoch(int epoch) {
  // The previous epoch has finished on the GPU (the trainer synchronises between epochs), so
  // the host blocks may be rewritten (refresh) and no slot is in use.
  source_.begin_epoch(epoch);
  ring_.begin_epoch();
}

BatchView DoubleBufferGraphStrategy::acquire(int b) {
  const int c = plan_.chunk_of(b);
  // The compute stream waits for a chunk once, before its first step; its later steps follow in
  // stream order.
  if (plan_.starts_chunk(b)) ring_.acquire(c);
  return source_.packed_slot_view(
      static_cast<const std::uint8_t*>(ring_.slot(c)) + plan_.packed_offset_in_chunk(b), b);
}

void DoubleBufferGraphStrategy::release(int b) {
  // The slot is free for chunk c + depth once the chunk's last step has run.
  if (plan_.ends_chunk(b)) ring_.release(plan_.chunk_of(b));
}

}  // namespace memstrat
