#include "memory_strategies/double_buffer_graph.h"

#include <stdexcept>

namespace memstrat {

void DoubleBufferGraphStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                       cudaStream_t compute) {
  if (opt.depth < 2) throw std::invalid_argument("double-buffer-graph: --depth must be >= 2");
  if (opt.copy_streams < 1)
    throw std::invalid_argument("double-buffer-graph: --copy-streams must be >= 1");
  source_.configure(data, opt, compute);
  blocks_.attach(source_);
  ring_.allocate(opt.depth, blocks_.slot_bytes(), make_copy_streams(opt.copy_streams),
                 source_.geometry().batches(), compute,
                 [this](int b, void* slot, cudaStream_t s) { return blocks_.copy(b, slot, s); });
}

void DoubleBufferGraphStrategy::begin_epoch(int epoch) {
  // The previous epoch has finished on the GPU (the trainer synchronises between epochs), so
  // the host blocks may be rewritten (refresh) and no slot is in use.
  source_.begin_epoch(epoch);
  ring_.begin_epoch();
}

}  // namespace memstrat
