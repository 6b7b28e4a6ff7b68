// copy_timeline.h: CopyTimeline, a strategy's account of its explicit transfers in one epoch:
// a start/stop timing-event pair per batch (or per bulk upload) and the bytes each moved, read
// back as StrategyStats after the epoch finished. A strategy whose every epoch makes the same
// transfers need not forget the previous epoch's (begin_epoch): each epoch records every transfer
// again, over the last one, whether it enqueues them or a captured epoch graph replays them (the
// replay records the events, never calls start/stop); this is what keeps its stats() right after
// a replay.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

class CopyTimeline {
 public:
  /// Events for `batches` transfers (allocation: call from attach).
  void allocate(int batches);
  /// Forget the previous epoch's transfers.
  void begin_epoch();
  /// Bracket the transfer of batch b, enqueued on stream s; `bytes` is what it moves (for a
  /// prefetch, what it requests: pages already resident are skipped by the driver), in place of
  /// what an earlier record of b moved.
  void start(int b, cudaStream_t s);
  void stop(int b, cudaStream_t s, std::uint64_t bytes);
  /// Sum of this epoch's recorded transfer durations; nullopt if nothing was recorded.
  std::optional<double> total_ms() const;
  /// h2d_bytes and copy_ms of this epoch (host_ms is left to the strategy).
  StrategyStats stats() const;

 private:
  std::vector<Event> start_, stop_;
  std::vector<char> used_;
  std::vector<std::uint64_t> bytes_;  // per transfer
};

}  // namespace memstrat
