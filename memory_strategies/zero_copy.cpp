#include "memory_strategies/zero_copy.h"

#include <stdexcept>

namespace memstrat {

void ZeroCopyStrategy::attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t) {
  int dev = 0, can_map = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, dev));
  if (!can_map) throw std::runtime_error("zero-copy: this device cannot map host memory");
  writer_.emplace(data, opt);
  transfer_ = opt.transfer;
  geom_ = {writer_->samples(), opt.batch, writer_->image_bytes_per_sample()};
  host_images_ = PinnedBuffer<std::uint8_t>(writer_->image_bytes(), cudaHostAllocMapped);
  host_labels_ =
      PinnedBuffer<std::int32_t>(static_cast<std::size_t>(writer_->samples()), cudaHostAllocMapped);
  void* p = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_images_.data(), 0));
  dev_images_ = static_cast<const std::uint8_t*>(p);
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_labels_.data(), 0));
  dev_labels_ = static_cast<const std::int32_t*>(p);
  if (!writer_->refreshes()) writer_->write(1, host_images_.data(), host_labels_.data());
}

void ZeroCopyStrategy::begin_epoch(int epoch) {
  if (writer_->refreshes()) writer_->write(epoch, host_images_.data(), host_labels_.data());
}

BatchView ZeroCopyStrategy::acquire(int b) {
  return make_view(dev_images_ + geom_.image_offset(b), dev_labels_ + geom_.first(b), transfer_,
                   geom_.rows(b), geom_.first(b));
}

}  // namespace memstrat
