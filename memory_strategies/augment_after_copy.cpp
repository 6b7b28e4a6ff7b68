// augment_after_copy.cpp: AugmentAfterCopy (augment_after_copy.h).
#include "memory_strategies/augment_after_copy.h"

#include <stdexcept>
#include <utility>

#include "common/cuda_check.h"

namespace memstrat {

bool augments_after_copy(const StrategyOptions& o) {
  if (o.augment_device != AugmentDevice::Gpu) return false;
  if (o.scenario == Scenario::Refresh) return true;  // its light shift
  return o.scenario == Scenario::Stream && o.augment != Augment::None;
}

AugmentAfterCopy::AugmentAfterCopy(std::unique_ptr<MemoryStrategy> inner)
    : inner_(std::move(inner)) {
  if (!inner_) throw std::invalid_argument("AugmentAfterCopy: no strategy to wrap");
}

std::uint64_t AugmentAfterCopy::device_bytes(const StrategyOptions& opt) {
  return augments_after_copy(opt) ? sizeof(std::int32_t) : 0;
}

void AugmentAfterCopy::attach(const HostDataset& data, const StrategyOptions& opt,
                              cudaStream_t compute) {
  inner_->attach(data, opt, compute);  // with gpu, its host side writes the rows raw
  if (!augments_after_copy(opt)) return;
  compute_ = compute;
  epoch_staging_ = PinnedBuffer<std::int32_t>(1);
  epoch_dev_ = DeviceBuffer<std::int32_t>(1);
  AugmentRows a;
  a.augment = opt.scenario == Scenario::Refresh ? Augment::Light : opt.augment;
  a.seed = opt.seed;
  a.image_rows = data.rows;
  a.image_cols = data.cols;
  a.transfer = opt.transfer;
  a.epoch_on_device = epoch_dev_.data();
  rows_ = a;
}

void AugmentAfterCopy::begin_epoch(int epoch) {
  if (rows_) epoch_staging_[0] = epoch;  // the GPU is idle: nothing reads the staging copy
  inner_->begin_epoch(epoch);
}

BatchView AugmentAfterCopy::acquire(int b) {
  BatchView v = inner_->acquire(b);  // the copy, and the compute stream's wait for it
  if (!rows_) return v;
  if (b == 0)
    CUDA_CHECK(cudaMemcpyAsync(epoch_dev_.data(), epoch_staging_.data(), sizeof(std::int32_t),
                               cudaMemcpyHostToDevice, compute_));
  AugmentRows a = *rows_;
  a.first_row = v.first_sample;
  // The batch lies in the wrapped strategy's device memory, which it rewrites with the next copy.
  void* images = v.x_u8 != nullptr ? static_cast<void*>(const_cast<std::uint8_t*>(v.x_u8))
                                   : static_cast<void*>(const_cast<float*>(v.x_f32));
  augment_in_place(images, v.rows, a, compute_);
  return v;
}

StrategyStats AugmentAfterCopy::stats() const {
  StrategyStats s = inner_->stats();
  if (rows_) s.h2d_bytes += sizeof(std::int32_t);
  return s;
}

}  // namespace memstrat
