// copy_on_compute.h: CopyOnComputeStream, the shared body of `pageable` and `pinned`: the epoch's
// data lives in host memory the derived class owns; each batch is copied with cudaMemcpyAsync on
// the compute stream into one device batch buffer (stream order keeps the next copy from
// overwriting data the previous step still reads; nothing overlaps).
// Stream scenario: the host memory is a ring of slots (stream_slots.h) of the derived class's
// kind; a batch is copied out of its slot on the compute stream and the slot handed back with
// release_after(slot, compute), recorded right after the copies: the worker that refills the
// slot waits until the GPU has the bytes.
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/stream_slots.h"

namespace memstrat {

class CopyOnComputeStream : public MemoryStrategy {
 public:
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override;
  /// Per batch, or, where the derived class's host memory allows a captured copy
  /// (copies_capturable) and all of an epoch's data is written before it (static, refresh), one
  /// epoch graph: every epoch enqueues the same copies and steps on the compute stream, and the
  /// copy timeline is recorded again by every replay. Never a kernel form: every batch is copied
  /// into the one device batch buffer, so a batch can be acquired only after the step before it
  /// was enqueued.
  LaunchForms launch_forms() const override {
    return {false, 0, copies_capturable() && source_.written_before_epoch()};
  }

 protected:
  /// Allocate host storage for `image_bytes` + `labels` samples and return the pointers.
  virtual void allocate_host(std::size_t image_bytes, std::size_t samples, void** images,
                             std::int32_t** labels) = 0;
  /// The memory of the stream scenario's slots (the same kind allocate_host gives).
  virtual SlotKind slot_kind() const = 0;
  /// True when a cudaMemcpyAsync from this host memory can be captured into a graph and replayed
  /// (page-locked memory: a DMA); false where the driver stages it through its own buffer as the
  /// call runs (pageable memory).
  virtual bool copies_capturable() const = 0;

 private:
  HostEpochSource source_;
  StreamSlots slots_;  // stream scenario
  void* host_images_ = nullptr;
  std::int32_t* host_labels_ = nullptr;
  DeviceBuffer<std::uint8_t> dev_images_;  // one batch, raw bytes of the transfer format
  DeviceBuffer<std::int32_t> dev_labels_;
  CopyTimeline timeline_;
  double host_ms_ = 0.0;
};

}  // namespace memstrat
