// managed.h: ManagedStrategy, unified memory: the training set in cudaMallocManaged memory
// written by the CPU. Its hints are set by the registry line that names it:
//   um                  none: pages fault in on the GPU's first touch
//   um-prefetch         each batch is prefetched to the GPU on a side stream one batch ahead
//                       (events order it before the step that reads it)
//   um-advise           prefetch, plus the cudaMemAdvise hints of --advise, set once at attach
//   um-prefetch-coarse  the best form of um-prefetch: chunks of --prefetch-chunk MiB (whole
//                       batches) prefetched one chunk ahead, and no prefetch at all of data the
//                       strategy knows is resident (static data after the first epoch)
// What is prefetched when is a ChunkPlan (chunk_plan.h): per batch, or coarse chunks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class ManagedStrategy final : public MemoryStrategy {
 public:
  struct Hints {
    bool prefetch = false;  // cudaMemPrefetchAsync, one chunk (default: one batch) ahead
    bool advise = false;    // cudaMemAdvise (the set in StrategyOptions::advise) at attach
    bool chunked = false;   // chunks of StrategyOptions::prefetch_chunk_mib, not single batches
    /// Prefetch only what may not be resident: static data once, in the first epoch after
    /// attach (the CPU never writes it again); refresh data every epoch (the host rewrite moves
    /// its pages back). Assumes nothing evicts the pages afterwards: attach refuses data that
    /// does not fit in free device memory with a margin (check_managed_fits), and if pages were
    /// evicted anyway the GPU would fault them back in: slower, never wrong.
    bool skip_resident = false;
  };
  ManagedStrategy(std::string_view name, Hints hints) : name_(name), hints_(hints) {}

  std::string_view name() const override { return name_; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override;
  /// Prefetched bytes are requested, not necessarily moved (pages already resident are skipped);
  /// CUPTI's unified-memory counters report what actually migrated. Without prefetch: none.
  StrategyStats stats() const override { return timeline_.stats(); }

 private:
  void prefetch_chunk(int c);
  std::string name_;
  Hints hints_;
  int device_ = 0;
  HostEpochSource source_;
  ManagedBuffer<std::uint8_t> images_;
  ManagedBuffer<std::int32_t> labels_;
  std::optional<ChunkPlan> plan_;  // with prefetch
  Stream prefetch_stream_;
  std::vector<Event> ready_;  // per chunk: its prefetch is done
  CopyTimeline timeline_;     // per chunk
  int issued_ = 0;            // chunks [0, issued_) of this epoch are enqueued
  bool prefetching_ = false;  // this epoch prefetches
  bool resident_ = false;     // skip_resident: static data already prefetched in full
};

}  // namespace memstrat
