// zero_copy.h: ZeroCopyStrategy (`zero-copy`): data in mapped pinned host memory
// (cudaHostAlloc(..., cudaHostAllocMapped)); kernels and cuBLAS read it over the bus through the
// device pointer, nothing is copied. Every read of the input crosses PCIe (the GEMMs read X more
// than once per step).
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class ZeroCopyStrategy final : public MemoryStrategy {
 public:
  std::string_view name() const override { return "zero-copy"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override { source_.begin_epoch(epoch); }
  BatchView acquire(int b) override { return source_.epoch_view(dev_images_, dev_labels_, b); }
  void release(int) override {}
  void end_epoch() override {}
  StrategyStats stats() const override { return {}; }  // no explicit transfers: CUPTI can't see them either

 private:
  HostEpochSource source_;
  PinnedBuffer<std::uint8_t> host_images_;  // mapped
  PinnedBuffer<std::int32_t> host_labels_;  // mapped
  const std::uint8_t* dev_images_ = nullptr;  // device aliases of the mapped memory
  const std::int32_t* dev_labels_ = nullptr;
};

}  // namespace memstrat
