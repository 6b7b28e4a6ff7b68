// managed.h: ManagedStrategy, unified memory: the training set in cudaMallocManaged memory
// written by the CPU. Its hints are set by the registry line that names it:
//   um           none: pages fault in on the GPU's first touch
//   um-prefetch  each batch is prefetched to the GPU on a side stream one batch ahead (events
//                order it before the step that reads it)
//   um-advise    prefetch, plus the cudaMemAdvise hints of --advise, set once at attach
#pragma once

#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class ManagedStrategy final : public MemoryStrategy {
 public:
  struct Hints {
    bool prefetch = false;  // cudaMemPrefetchAsync of batch b+1 while b computes
    bool advise = false;    // cudaMemAdvise (the set in StrategyOptions::advise) at attach
  };
  ManagedStrategy(std::string_view name, Hints hints) : name_(name), hints_(hints) {}

  std::string_view name() const override { return name_; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  /// Prefetched bytes are requested, not necessarily moved (pages already resident are skipped);
  /// CUPTI's unified-memory counters report what actually migrated. Without prefetch: none.
  StrategyStats stats() const override { return timeline_.stats(); }

 private:
  void prefetch_batch(int b);
  std::string name_;
  Hints hints_;
  int device_ = 0;
  HostEpochSource source_;
  ManagedBuffer<std::uint8_t> images_;
  ManagedBuffer<std::int32_t> labels_;
  Stream prefetch_stream_;
  std::vector<Event> ready_;  // per batch: prefetch of batch b done
  CopyTimeline timeline_;
  int issued_ = 0;
};

}  // namespace memstrat
