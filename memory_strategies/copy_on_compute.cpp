#include "memory_strategies/copy_on_compute.h"

#include "common/nvtx.h"

namespace memstrat {

void CopyOnComputeStream::attach(const HostDataset& data, const StrategyOptions& opt,
                                 cudaStream_t compute) {
  writer_.emplace(data, opt);
  transfer_ = opt.transfer;
  compute_ = compute;
  geom_ = {writer_->samples(), opt.batch, writer_->image_bytes_per_sample()};
  allocate_host(writer_->image_bytes(), static_cast<std::size_t>(writer_->samples()), &host_images_,
                &host_labels_);
  dev_images_ = DeviceBuffer<std::uint8_t>(geom_.image_bytes(0));
  dev_labels_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(geom_.rows(0)));
  timeline_.allocate(geom_.batches());
  if (!writer_->refreshes()) writer_->write(1, host_images_, host_labels_);
}

void CopyOnComputeStream::begin_epoch(int epoch) {
  if (writer_->refreshes()) writer_->write(epoch, host_images_, host_labels_);
  timeline_.begin_epoch();
  bytes_ = 0;
  host_ms_ = 0.0;
}

BatchView CopyOnComputeStream::acquire(int b) {
  NvtxRange r(Phase::H2D, "h2d");
  const auto t0 = std::chrono::steady_clock::now();
  timeline_.start(b, compute_);
  const auto* src = static_cast<const std::uint8_t*>(host_images_) + geom_.image_offset(b);
  // From pageable memory this call is staged through a driver buffer and returns only when the
  // source has been consumed, i.e. it behaves like cudaMemcpy; from pinned memory it is a DMA
  // that is merely enqueued. Either way it is ordered on the compute stream.
  CUDA_CHECK(cudaMemcpyAsync(dev_images_.data(), src, geom_.image_bytes(b), cudaMemcpyHostToDevice,
                             compute_));
  CUDA_CHECK(cudaMemcpyAsync(dev_labels_.data(), host_labels_ + geom_.first(b), geom_.label_bytes(b),
                             cudaMemcpyHostToDevice, compute_));
  timeline_.stop(b, compute_);
  host_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  bytes_ += geom_.image_bytes(b) + geom_.label_bytes(b);
  return make_view(dev_images_.data(), dev_labels_.data(), transfer_, geom_.rows(b), geom_.first(b));
}

StrategyStats CopyOnComputeStream::stats() const {
  StrategyStats s;
  s.h2d_bytes = bytes_;
  s.copy_ms = timeline_.total_ms();
  s.host_ms = host_ms_;
  return s;
}

}  // namespace memstrat
