// stream_slots.h: StreamSlots, what a strategy holds to run the stream scenario with host
// workers: a ring of --prefetch slots in the kind of memory the strategy moves data from
// (pageable, pinned, mapped or managed), filled just in time by --workers BatchProducer threads
// (gather of the epoch's fresh permutation, --augment, transfer format), and the hand-off back.
//
// Use (a strategy member, beside its HostEpochSource):
//   attach:      slots_.attach(data, opt, SlotKind::Pinned, "pinned");
//   begin_epoch: slots_.begin_epoch(epoch);               // the workers start on batch 0
//   acquire(b):  const int s = slots_.take(b);            // blocks until batch b is ready
//                ... copy from slots_.host(s) / let kernels read slots_.device(s) ...
//                slots_.release_after(s, stream);        // once `stream` has passed its last read
//   stats:       s.producer = slots_.stats();
// release_after records an event on `stream`; the worker that refills the slot waits for it
// (batch_producer.h), so a slot is never rewritten while the GPU may still read it: the event
// must follow the last work that reads the slot on that stream (a copy out of it, or the step
// that reads it in place).
//
// Batch b of every epoch lives in slot b mod K (BatchProducer), so a strategy that lets the
// kernels read slots in place hands out the same address for batch b every epoch.
//
// Slot layout: one block per slot, the batch's images in the transfer format at offset 0, its
// labels at label_offset() (a full batch's images rounded up to 16 bytes): one range holds a
// whole batch, so one copy can move it. Slots start kSlotAlign bytes apart, so no two share a
// page: managed memory migrates by page, and a worker writing one slot must not pull back a
// page of the slot the GPU is reading.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "memory_strategies/batch_producer.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// The memory a strategy's slots are made of.
enum class SlotKind {
  Pageable,  // std::vector: copies out of it are staged by the driver
  Pinned,    // cudaHostAlloc: DMA straight from the slot
  Mapped,    // cudaHostAlloc(..., Mapped): kernels read the slot over the bus
  Managed,   // cudaMallocManaged: the workers' writes and the GPU's reads migrate its pages
};

/// The ranges of --workers and --prefetch.
inline constexpr int kMaxWorkers = 256;
inline constexpr int kMaxPrefetch = 1024;

/// The largest total size of a run's slots (--prefetch x one slot): checked before any device
/// work (check_stream_slots), since pinned, mapped and managed slots are locked or device-backed.
inline constexpr std::uint64_t kMaxSlotBytes = 2ull << 30;

/// Where slots start: a multiple of the GPU's 64 KiB page (and so of the host's 4 KiB one).
inline constexpr std::size_t kSlotAlign = 64 << 10;

/// Bytes of one slot (images of a full batch rounded up to 16 bytes, its labels), rounded up to
/// kSlotAlign, for batches of `batch` samples of `image_bytes_per_sample` bytes.
std::uint64_t stream_slot_bytes(int batch, std::size_t image_bytes_per_sample);

/// Throws std::invalid_argument, naming --prefetch and --batch, when `prefetch` slots for
/// batches of `batch` samples of `image_bytes_per_sample` bytes exceed kMaxSlotBytes.
void check_stream_slots(int prefetch, int batch, std::size_t image_bytes_per_sample);

class StreamSlots {
 public:
  StreamSlots() = default;
  ~StreamSlots();  // stops the workers before the slot memory goes
  StreamSlots(const StreamSlots&) = delete;
  StreamSlots& operator=(const StreamSlots&) = delete;

  /// Allocates opt.prefetch slots of `kind` for batches of opt.batch samples and starts
  /// opt.workers producer threads (idle until begin_epoch). Managed slots are refused when they
  /// do not fit in free device memory (check_managed_fits, naming `strategy`).
  void attach(const HostDataset& data, const StrategyOptions& opt, SlotKind kind,
              const char* strategy);
  bool attached() const { return producer_ != nullptr; }

  /// The workers start on epoch `epoch`'s fresh permutation (every batch of the previous epoch
  /// must have been taken).
  void begin_epoch(int epoch);
  /// Blocks until batch b is in its slot (the time the trainer starved for input); returns the
  /// slot, held until release / release_after. Batches are taken in order 0, 1, 2, ...
  int take(int b);
  /// The host is done with slot s (nothing on any stream reads it).
  void release(int s);
  /// The GPU is done with slot s once `stream` reaches this point.
  void release_after(int s, cudaStream_t stream);

  /// The slot batch b of every epoch lives in (what take(b) returns).
  int slot_of(int b) const { return b % slots_; }
  /// Slot s as the host sees it (the workers wrote it): images at 0, labels at label_offset().
  const std::uint8_t* host(int s) const;
  /// Slot s as kernels address it: the mapped alias or the managed pointer; nullptr for
  /// pageable and pinned slots (copy from host() instead).
  const std::uint8_t* device(int s) const;
  std::size_t label_offset() const { return label_offset_; }
  /// Distance between slots; also the size of a device buffer that holds one slot's block.
  std::size_t stride() const { return stride_; }
  /// Batch b as one range of its slot: the images region of a full batch, then the labels of
  /// its rows (for a partial last batch this includes unused image rows).
  std::size_t block_bytes(int b) const;
  /// Batch b in a block laid out like a slot (the slot, its device alias, or a device copy).
  BatchView view(const void* block, int b) const;
  /// The whole slot memory (for cudaMemAdvise on managed slots).
  std::uint8_t* memory() const { return base_; }
  std::size_t memory_bytes() const { return stride_ * static_cast<std::size_t>(slots_); }

  const BatchGeometry& geometry() const { return producer_->geometry(); }
  int slots() const { return slots_; }
  ProducerStats stats() const { return producer_->stats(); }

 private:
  Transfer transfer_ = Transfer::U8;
  int slots_ = 0;
  std::size_t label_offset_ = 0;
  std::size_t stride_ = 0;
  std::uint8_t* base_ = nullptr;          // the slots' host address
  const std::uint8_t* device_ = nullptr;  // their device address (mapped, managed)
  std::vector<std::uint8_t> pageable_;    // the memory, by kind
  PinnedBuffer<std::uint8_t> pinned_;
  ManagedBuffer<std::uint8_t> managed_;
  std::unique_ptr<BatchProducer> producer_;  // after the memory: destroyed first
};

}  // namespace memstrat
