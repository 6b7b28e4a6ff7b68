// producer_stats.h: ProducerStats, what the stream scenario's host producers (BatchProducer)
// measured over one epoch: how fast the workers produced, how long the trainer starved for a
// ready batch, and how long the workers waited for a free slot (back-pressure). A strategy
// passes them on in StrategyStats; the record writes them per epoch.
#pragma once

#include <cstdint>

namespace memstrat {

/// Figures of the current (or last) epoch, since the producer's begin_epoch.
struct ProducerStats {
  int workers = 0;
  int slots = 0;
  std::int64_t batches = 0;  // produced (Ready) this epoch
  std::int64_t samples = 0;
  double busy_ms = 0.0;             // summed over workers: gather + augment + format
  double busy_max_ms = 0.0;         // the busiest worker (imbalance: busy_max vs busy / workers)
  double slot_wait_ms = 0.0;        // summed over workers: waiting for a free slot (back-pressure)
  double consumer_wait_ms = 0.0;    // wait_ready blocked: the trainer starved for input
  double first_wait_ms = 0.0;       // of which waiting for batch 0 (filling the pipeline)
  std::int64_t consumer_waits = 0;  // wait_ready calls that had to block
  double span_ms = 0.0;             // begin_epoch -> the last batch Ready
  /// One worker's production rate while busy (samples per busy second).
  double worker_samples_per_s() const { return busy_ms > 0 ? samples / (busy_ms / 1e3) : 0.0; }
  /// What all workers delivered together over the epoch's production span.
  double samples_per_s() const { return span_ms > 0 ? samples / (span_ms / 1e3) : 0.0; }
};

}  // namespace memstrat
