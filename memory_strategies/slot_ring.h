// slot_ring.h: SlotRing, the staging pipeline of a strategy that moves each transfer unit (a
// batch, or a chunk of whole batches) into one of K device slots on side streams while the
// compute stream works on earlier units, keeping the epoch-capture contract
// (MemoryStrategy::epoch_capturable). Unit b goes into slot b % K, on side stream b % S, issued
// up to K-1 units ahead of the unit the compute stream needs; events hand each slot over in both
// directions:
//   copied[slot]   side stream -> compute: the unit has arrived
//   consumed[slot] compute -> side stream: the last step that read the slot has finished
// The side streams fork from the compute stream in acquire(0) and join it in end_epoch(), and only
// units b >= K wait for a consumed event (one recorded earlier in the same epoch): the first K
// units of an epoch are ordered after the previous epoch's steps by the fork (or, replayed as
// one graph, by the graph launch boundary). So every epoch enqueues the same work, and an epoch
// captured into a graph replays correctly. Used by zero-copy-staged (one SM copy per chunk) and
// double-buffer-graph (one cudaMemcpyAsync per chunk: ChunkPlan).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/copy_timeline.h"

namespace memstrat {

class SlotRing {
 public:
  /// Enqueues the transfer of unit b into device slot `slot` on side stream `s` (nothing else:
  /// no wait, no record) and returns the bytes it moves.
  using Fill = std::function<std::size_t(int b, void* slot, cudaStream_t s)>;

  /// From attach (allocates): `depth` (>= 2) slots of `slot_bytes` (no more than `units`: an
  /// epoch of fewer units never reaches the others), the side streams the ring uses round-robin
  /// (at least one; the caller creates and names them), events, and a CopyTimeline for `units`
  /// transfers per epoch.
  void allocate(int depth, std::size_t slot_bytes, std::vector<Stream> side_streams, int units,
                cudaStream_t compute, Fill fill);
  /// From the strategy's begin_epoch: nothing of this epoch is issued yet.
  void begin_epoch() { issued_ = 0; }
  /// Unit b's slot, once the compute stream waits for it: at b == 0 forks the side streams from
  /// the compute stream; issues units up to b + depth - 1 (those not issued yet).
  void* acquire(int b);
  /// The last step that reads unit b has been enqueued on the compute stream.
  void release(int b);
  /// Where the units are the packed chunks of `plan`: batch b's block in its chunk's slot. The
  /// compute stream waits for a chunk once, at its first batch (acquire); later batches of the
  /// chunk follow in stream order.
  const std::uint8_t* acquire_batch(const ChunkPlan& plan, int b);
  /// Where the units are the chunks of `plan`: batch b's step has been enqueued; after the
  /// chunk's last batch its slot is free for chunk c + depth (release).
  void release_batch(const ChunkPlan& plan, int b) {
    if (plan.ends_chunk(b)) release(plan.chunk_of(b));
  }
  /// The compute stream waits for every side stream's last work of the epoch.
  void end_epoch();
  /// GPU time of this epoch's transfers. Every epoch, enqueued or replayed, records every
  /// unit's event pair (as external event nodes while captured), so the timeline is never reset.
  std::optional<double> copy_ms() const { return timeline_.total_ms(); }

 private:
  void issue(int b);
  /// Unit b's slot (the address acquire(b) returned).
  void* slot(int b) const { return slots_[static_cast<std::size_t>(b % depth_)].data(); }
  int depth_ = 2;
  int units_ = 0;
  cudaStream_t compute_ = nullptr;
  Fill fill_;
  std::vector<DeviceBuffer<std::uint8_t>> slots_;
  std::vector<Stream> side_;
  std::vector<Event> copied_, consumed_, join_;
  Event fork_;
  CopyTimeline timeline_;
  int issued_ = 0;  // units [0, issued_) of this epoch have their transfer enqueued
};

/// `n` copy streams named for NVTX "copy 0" .. "copy n-1" (double-buffer, double-buffer-graph).
std::vector<Stream> make_copy_streams(int n);

}  // namespace memstrat
