// resident.h: ResidentStrategy (`resident`): the whole training set lives in device memory,
// uploaded once (static) or once per epoch before its first batch (refresh); a batch is a
// pointer offset. The upper bound every other strategy is measured against.
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class ResidentStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "resident"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override { return timeline_.stats(); }
  /// Every batch is a fixed offset into device memory (a refresh epoch's upload is enqueued by
  /// acquire(0), before any compute).
  bool acquire_ahead() const override { return true; }

 private:
  void upload();
  HostEpochSource source_;
  PinnedBuffer<std::uint8_t> host_images_;  // staging for the (re)uploads
  PinnedBuffer<std::int32_t> host_labels_;
  DeviceBuffer<std::uint8_t> dev_images_;
  DeviceBuffer<std::int32_t> dev_labels_;
  CopyTimeline timeline_;
  bool upload_pending_ = false;
};

}  // namespace memstrat
