// managed_base.h: ManagedStrategyBase, the shared body of `um`, `um-prefetch` and `um-advise`:
// the training set in cudaMallocManaged memory written by the CPU; optionally each batch is
// prefetched to the GPU on a side stream one batch ahead (ordered by events), and optionally
// cudaMemAdvise hints are set once at attach.
#pragma once

#include <vector>

#include "memory_strategies/strategy_common.h"

namespace memstrat {

class ManagedStrategyBase : public MemoryStrategy {
 public:
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override;

 protected:
  /// prefetch: enqueue cudaMemPrefetchAsync for batch b+1 while b computes.
  /// advise: the hints to set at attach (all false = none).
  ManagedStrategyBase(bool prefetch, bool use_advise) : prefetch_(prefetch), use_advise_(use_advise) {}

 private:
  void prefetch_batch(int b);
  bool prefetch_;
  bool use_advise_;
  AdviseSet advise_;
  int device_ = 0;
  std::optional<EpochWriter> writer_;
  BatchGeometry geom_;
  Transfer transfer_ = Transfer::U8;
  cudaStream_t compute_ = nullptr;
  ManagedBuffer<std::uint8_t> images_;
  ManagedBuffer<std::int32_t> labels_;
  Stream prefetch_stream_;
  std::vector<Event> ready_;  // per batch: prefetch of batch b done
  CopyTimeline timeline_;
  int issued_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace memstrat
