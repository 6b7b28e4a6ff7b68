#include "memory_strategies/zero_copy_staged.h"

#include <stdexcept>
#include <vector>

#include "common/nvtx.h"

namespace memstrat {

std::uint64_t ZeroCopyStagedStrategy::device_footprint(const StrategyOptions& opt,
                                                       const BatchGeometry& g) {
  // --depth device chunk slots of --copy-chunk MiB of whole packed batches.
  return static_cast<std::uint64_t>(opt.depth) *
         ChunkPlan::packed(g, static_cast<std::size_t>(opt.copy_chunk_mib) << 20).packed_slot_bytes();
}

void ZeroCopyStagedStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                    cudaStream_t compute) {
  if (opt.depth < 2) throw std::invalid_argument("zero-copy-staged: --depth must be >= 2");
  if (opt.stage_blocks < 1) throw std::invalid_argument("zero-copy-staged: --stage-blocks must be >= 1");
  if (opt.copy_chunk_mib < 1)
    throw std::invalid_argument("zero-copy-staged: --copy-chunk must be >= 1 (MiB)");
  source_.configure(data, opt, compute);
  // --stage-blocks blocks, in as many block slots as the single-launch step's grid leaves free
  // (StrategyEntry::blocks_beside_step), so staging runs beside the step, not between steps.
  copier_ = SmCopy::create(opt.stage_blocks);
  // The greatest priority: the staging kernel is small and the next step waits for it, so its
  // blocks are scheduled ahead of any pending blocks of the step it overlaps (priorities never
  // preempt blocks already running).
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  std::vector<Stream> stage;
  stage.push_back(Stream::create(cudaStreamNonBlocking, greatest));
  nvtx_name_stream(stage.back(), "stage");
  blocks_.attach(source_, cudaHostAllocMapped);
  plan_ = ChunkPlan::packed(source_.geometry(), static_cast<std::size_t>(opt.copy_chunk_mib) << 20);
  ring_.allocate(opt.depth, plan_.packed_slot_bytes(), std::move(stage), plan_.chunks(), compute,
                 [this](int c, void* slot, cudaStream_t s) {
                   const PackedChunk k = plan_.packed_chunk(c);
                   copier_(slot, blocks_.mapped_chunk(k), k.bytes, s);
                   return k.bytes;
                 });
}

void ZeroCopyStagedStrategy::begin_epoch(int epoch) {
  // GPU idle: the mapped host blocks may be rewritten (refresh) and no slot is in use.
  source_.begin_epoch(epoch);
  ring_.begin_epoch();
}

BatchView ZeroCopyStagedStrategy::acquire(int b) {
  return source_.packed_slot_view(ring_.acquire_batch(plan_, b), b);
}

StrategyStats ZeroCopyStagedStrategy::stats() const {
  // Bytes from the geometry, not counted by acquire: a replayed epoch graph does not call it.
  StrategyStats s;
  s.h2d_bytes = plan_.packed_epoch_bytes();
  s.copy_ms = ring_.copy_ms();
  return s;
}

}  // namespace memstrat
