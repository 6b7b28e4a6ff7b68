#include "memory_strategies/resident.h"

#include "common/nvtx.h"

namespace memstrat {

void ResidentStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                              cudaStream_t compute) {
  writer_.emplace(data, opt);
  transfer_ = opt.transfer;
  compute_ = compute;
  geom_ = {writer_->samples(), opt.batch, writer_->image_bytes_per_sample()};
  host_images_ = PinnedBuffer<std::uint8_t>(writer_->image_bytes());
  host_labels_ = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(writer_->samples()));
  dev_images_ = DeviceBuffer<std::uint8_t>(writer_->image_bytes());
  dev_labels_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(writer_->samples()));
  timeline_.allocate(1);
  if (!writer_->refreshes()) {
    // Static data: uploaded once, as part of set-up.
    writer_->write(1, host_images_.data(), host_labels_.data());
    upload();
    CUDA_CHECK(cudaStreamSynchronize(compute_));
  }
}

void ResidentStrategy::upload() {
  NvtxRange r(Phase::H2D, "h2d");
  timeline_.start(0, compute_);
  CUDA_CHECK(cudaMemcpyAsync(dev_images_.data(), host_images_.data(), host_images_.bytes(),
                             cudaMemcpyHostToDevice, compute_));
  CUDA_CHECK(cudaMemcpyAsync(dev_labels_.data(), host_labels_.data(), host_labels_.bytes(),
                             cudaMemcpyHostToDevice, compute_));
  timeline_.stop(0, compute_);
}

void ResidentStrategy::begin_epoch(int epoch) {
  timeline_.begin_epoch();
  bytes_ = 0;
  if (writer_->refreshes()) {
    writer_->write(epoch, host_images_.data(), host_labels_.data());
    upload_pending_ = true;
  }
}

BatchView ResidentStrategy::acquire(int b) {
  if (b == 0 && upload_pending_) {
    // Refresh: the new epoch's data goes up in one bulk copy before the first batch; the
    // compute stream waits for it (that wait is this strategy's whole per-epoch cost).
    upload();
    bytes_ += host_images_.bytes() + host_labels_.bytes();
    upload_pending_ = false;
  }
  return make_view(dev_images_.data() + geom_.image_offset(b), dev_labels_.data() + geom_.first(b),
                   transfer_, geom_.rows(b), geom_.first(b));
}

StrategyStats ResidentStrategy::stats() const {
  StrategyStats s;
  s.h2d_bytes = bytes_;
  s.copy_ms = timeline_.total_ms();
  return s;
}

}  // namespace memstrat
