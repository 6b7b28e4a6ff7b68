// zero_copy.h: ZeroCopyStrategy (`zero-copy`): data in mapped pinned host memory
// (cudaHostAlloc(..., cudaHostAllocMapped)); kernels and cuBLAS read it over the bus through the
// device pointer, nothing is copied. Every read of the input crosses PCIe (the GEMMs read X more
// than once per step).
#pragma once

#include "memory_strategies/strategy_common.h"

namespace memstrat {

class ZeroCopyStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "zero-copy"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override { return {}; }  // no explicit transfers: CUPTI can't see them either

 private:
  std::optional<EpochWriter> writer_;
  BatchGeometry geom_;
  Transfer transfer_ = Transfer::U8;
  PinnedBuffer<std::uint8_t> host_images_;  // mapped
  PinnedBuffer<std::int32_t> host_labels_;  // mapped
  const std::uint8_t* dev_images_ = nullptr;  // device aliases of the mapped memory
  const std::int32_t* dev_labels_ = nullptr;
};

}  // namespace memstrat
