// augment_after_copy.h: AugmentAfterCopy, --augment-device gpu for the copying strategies
// (pageable, pinned, double-buffer and their best forms): the strategy it wraps moves the raw
// rows as it always moves its batches (refresh: the host rewrites the epoch reshuffled but not
// shifted; stream: the host workers gather, and do not augment), and once a batch is in device
// memory one kernel augments it where it lies (augment_in_place, keyed by (seed, epoch, row of
// the epoch)), on the compute stream, before its step: the bytes the host would have written.
// The bus carries what it carried before, in the transfer format; only the augmentation moved.
//
// Every copying entry of the registry is made wrapped (registry.cpp); with host augmentation, or
// the static scenario, the wrapper only forwards. Launch forms are the wrapped strategy's: the
// kernel is enqueued in acquire() after the wait for the batch's copy, needs no step before it,
// and reads the epoch from device memory, uploaded from pinned staging in acquire(0), so that an
// epoch graph that captured it replays each epoch's key.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "common/cuda_raii.h"
#include "memory_strategies/augment_gpu.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// True when a copying strategy augments its batches after the copy: --augment-device gpu in
/// refresh (its light shift) or in stream with light or heavy.
bool augments_after_copy(const StrategyOptions& o);

class AugmentAfterCopy final : public MemoryStrategy {
 public:
  explicit AugmentAfterCopy(std::unique_ptr<MemoryStrategy> inner);
  /// Device memory attach() adds to the wrapped strategy's for options `opt`: the epoch number
  /// where it augments (pure).
  static std::uint64_t device_bytes(const StrategyOptions& opt);

  std::string_view name() const override { return inner_->name(); }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override { inner_->release(b); }
  void end_epoch() override { inner_->end_epoch(); }
  /// The wrapped strategy's figures, plus the epoch number's 4 bytes in h2d_bytes where it
  /// augments (that copy's few microseconds are not in copy_ms).
  StrategyStats stats() const override;
  bool epoch_capturable() const override { return inner_->epoch_capturable(); }
  bool acquire_ahead() const override { return inner_->acquire_ahead(); }
  int launch_group() const override { return inner_->launch_group(); }
  LaunchForms launch_forms() const override { return inner_->launch_forms(); }

 private:
  std::unique_ptr<MemoryStrategy> inner_;
  std::optional<AugmentRows> rows_;  // set where it augments
  cudaStream_t compute_ = nullptr;
  PinnedBuffer<std::int32_t> epoch_staging_;
  DeviceBuffer<std::int32_t> epoch_dev_;
};

}  // namespace memstrat
