// batch_producer.h: BatchProducer, the stream scenario's input pipeline: N host worker threads,
// started once, gather batch b of the epoch's fresh permutation, augment it and write it in the
// transfer format into one slot of a ring of K slots whose memory the caller owns (pinned,
// mapped, managed or pageable: whatever the strategy moves from), just ahead of the trainer.
//
// Hand-off (who waits for whom, with what):
//
//   batch b of every epoch lives in slot b mod K: the run-wide number q of a batch (its `seq`)
//   counts across epochs, and every epoch's batch 0 gets the next multiple of K (numbers in
//   between are skipped), so q mod K = b mod K. A consumer that reads slots in place therefore
//   sees the same address for batch b in every epoch (a per-batch CUDA graph stays valid). A
//   slot goes Free -> Filling -> Ready -> Held -> (Free | ReleasePending) -> Filling ...
//
//   worker:    claims the next batch under the mutex, then waits on its slot's condition
//              variable until the slot has served its previous batch (released), and, if
//              that release was ReleasePending, polls the slot's event outside the mutex
//              (wait_released: cudaEventQuery, yielding between queries; back-pressure:
//              slot_wait_ms). Fills the slot outside the mutex, marks it Ready and signals
//              `ready_cv_`.
//   consumer:  wait_ready(b) waits on `ready_cv_` for batch b's slot to be Ready (starvation:
//              consumer_wait_ms) and takes it (Held). When whatever reads the slot is done it
//              hands it back, either
//                release(slot)                 - the host is done now (e.g. after a blocking
//                                                pageable copy, or a CPU consumer), or
//                release_after(slot, stream)   - the GPU is done when `stream` reaches this
//                                                point: records the slot's event on `stream`
//                                                (ReleasePending); the worker that refills the
//                                                slot waits on that event. Nothing else waits:
//                                                no host synchronisation, no stream bubble.
//   Events were chosen over cudaLaunchHostFunc: a host function runs inside the stream (the
//   stream's next work waits for it) and cannot outlive its owner safely; an event costs the
//   stream nothing and the wait lands on the worker, which has nothing else to do.
//
// Determinism: batch b's bytes are write_rows(rows [b*batch, ...) of epoch e) - a function of
// (data, seed, epoch, b) only - whatever the worker count or schedule. A shard's batch b is the
// whole epoch's batch b·shards + shard, byte for byte.
// Errors: an exception in a worker (augmentation, a CUDA error of an event) stops all workers
// and is rethrown by the consumer's next wait_ready / begin_epoch. Misuse that would deadlock
// (waiting for a batch whose slot the consumer still holds) throws std::logic_error at once.
// The destructor stops and joins the workers (a worker finishes the batch it is writing; one
// waiting on a release event returns when the GPU passes it).
// Memory: everything is allocated in the constructor (the order, one scratch image per
// worker, K events); nothing afterwards. The consumer calls begin_epoch, wait_ready, release,
// release_after and stats from one thread.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "memory_strategies/augment.h"
#include "memory_strategies/epoch_order.h"
#include "memory_strategies/host_epoch_source.h"  // BatchGeometry
#include "memory_strategies/memory_strategy.h"    // Transfer
#include "memory_strategies/producer_stats.h"

namespace memstrat {

struct ProducerConfig {
  int workers = 1;  // host threads, >= 1
  int batch = 256;  // rows per batch (the last one of an epoch may be partial)
  Augment augment = Augment::Light;
  Transfer transfer = Transfer::U8;
  std::uint64_t seed = 1;
  /// Several GPUs: this producer serves shard `shard` of `shards`, the single-GPU batches
  /// g·shards + shard of the whole epoch, as its batches 0, 1, 2 ... (the whole epoch's order
  /// and augmentation keys: EpochRows::whole_row), so the shards' bytes are the whole epoch's.
  int shard = 0;
  int shards = 1;
  /// Create one event per slot so that release_after works (needs a CUDA device). Off: only
  /// release() (CPU consumers, tests without a GPU).
  bool gpu_release = false;
  /// Called by the worker after it wrote batch `batch` into its slot, before the slot is
  /// published (tests inject delays and failures here). May throw. Empty: nothing.
  std::function<void(int worker, int batch)> after_fill;
};

/// One ring slot's memory, owned by the caller: room for `batch` images in the transfer format
/// and `batch` int32 labels, host-writable (pageable, pinned, mapped or managed).
struct SlotMemory {
  void* images = nullptr;
  std::int32_t* labels = nullptr;
};

class BatchProducer {
 public:
  /// Starts `cfg.workers` threads (idle until begin_epoch). `slot_memory`: K >= 1 slots, each for
  /// one batch; the memory must outlive the producer. Throws std::invalid_argument for a bad
  /// config.
  BatchProducer(const HostDataset& data, const ProducerConfig& cfg,
                std::vector<SlotMemory> slot_memory);
  /// Stops and joins the workers. Call it after the streams given to release_after are done
  /// with the slot memory (the memory's owner must wait for them anyway before freeing it).
  ~BatchProducer();
  BatchProducer(const BatchProducer&) = delete;
  BatchProducer& operator=(const BatchProducer&) = delete;

  /// Reshuffles for epoch `epoch` and lets the workers start on its batch 0. Every batch of the
  /// previous epoch must have been taken by wait_ready (its slots may still be held or pending
  /// release: batches of the new epoch wait for them). Resets stats().
  void begin_epoch(int epoch);

  /// Blocks until batch b (of the current epoch) is in its slot; returns the slot, now held by
  /// the caller. Batches are taken in order 0, 1, 2, ... Rethrows a worker's exception.
  int wait_ready(int b);
  /// The host is done with `slot`.
  void release(int slot);
  /// The GPU is done with `slot` once `stream` reaches this point (needs gpu_release).
  void release_after(int slot, cudaStream_t stream);

  SlotMemory slot(int s) const { return slots_[static_cast<std::size_t>(s)]; }
  int slots() const { return static_cast<int>(slots_.size()); }
  const BatchGeometry& geometry() const { return geom_; }
  int batches() const { return geom_.batches(); }
  int rows(int b) const { return geom_.rows(b); }
  /// The current epoch's order (row i = data-set sample order()[i]).
  const EpochOrder& order() const { return order_; }
  ProducerStats stats() const;

 private:
  enum class State { Free, ReleasePending, Filling, Ready, Held };
  struct Slot {
    State state = State::Free;
    std::int64_t seq = 0;  // the run-wide batch number in the slot, or the next one to fill it
  };
  /// After `slot`'s batch was handed back: the number of the next batch it serves (never one of
  /// the numbers skipped at an epoch boundary). Under mu_.
  void advance(Slot& slot) const;
  using Clock = std::chrono::steady_clock;

  void work(int worker);
  /// Until the GPU has passed `e` (a slot's release_after): cudaEventQuery, yielding between.
  static void wait_released(cudaEvent_t e);
  void fill(int worker, int epoch, int b, int s);
  int slot_of(std::int64_t seq) const { return static_cast<int>(seq % slots()); }
  Slot& checked_held(int s, const char* what);
  void fail(std::exception_ptr e);  // under mu_
  void notify_all_slots();           // every slot's condition variable

  const HostDataset* data_;
  ProducerConfig cfg_;
  std::vector<SlotMemory> slots_;
  BatchGeometry geom_;
  EpochOrder order_;
  std::vector<Event> release_events_;               // one per slot with gpu_release
  std::vector<std::vector<std::uint8_t>> scratch_;  // one image per worker
  int device_ = 0;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a batch to claim, or stop
  // workers: slot s was released. One per slot, so that a release wakes the worker waiting for
  // that slot and not every worker: with 8 or more workers ahead of the GPU, waking them all at
  // each release made them queue on mu_ in front of the consumer.
  std::vector<std::condition_variable> slot_cvs_;
  std::condition_variable ready_cv_;  // consumer: a batch is Ready, or a worker failed
  std::vector<Slot> ring_;
  bool stop_ = false;
  std::exception_ptr error_;
  bool active_ = false;  // an epoch is running
  int epoch_ = 0;
  std::int64_t base_ = 0;  // run-wide number of this epoch's batch 0 (a multiple of K)
  int next_claim_ = 0;     // next batch of the epoch a worker takes
  int next_wait_ = 0;      // next batch of the epoch the consumer takes
  Clock::time_point epoch_start_;
  ProducerStats stats_;
  std::vector<double> worker_busy_ms_;

  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace memstrat
