#include "memory_strategies/zero_copy.h"

namespace memstrat {

void ZeroCopyStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                              cudaStream_t compute) {
  source_.configure(data, opt, compute);
  host_images_ = PinnedBuffer<std::uint8_t>(source_.image_bytes(), cudaHostAllocMapped);
  host_labels_ =
      PinnedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()), cudaHostAllocMapped);
  void* p = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_images_.data(), 0));
  dev_images_ = static_cast<const std::uint8_t*>(p);
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_labels_.data(), 0));
  dev_labels_ = static_cast<const std::int32_t*>(p);
  source_.bind(host_images_.data(), host_labels_.data());
}

}  // namespace memstrat
