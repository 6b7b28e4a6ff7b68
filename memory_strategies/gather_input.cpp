#include "memory_strategies/gather_input.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "common/nvtx.h"
#include "memory_strategies/epoch_data.h"  // write_rows, transfer_bytes_per_sample
#include "memory_strategies/host_epoch_source.h"  // batch_view

namespace memstrat {

void GatherInput::write_set(const HostDataset& data, Transfer t, void* images,
                            std::int32_t* labels) {
  std::vector<std::int32_t> identity(static_cast<std::size_t>(data.n_train()));
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<std::uint8_t> scratch(static_cast<std::size_t>(data.features()));
  write_rows({&data, identity.data(), Augment::None, t, 0, 0}, 0, data.n_train(), images, labels,
             scratch.data());
}

Transfer GatherInput::set_format(const StrategyOptions& opt) {
  return opt.augment != Augment::None && opt.augment_device == AugmentDevice::Gpu ? Transfer::U8
                                                                                 : opt.transfer;
}

std::size_t GatherInput::set_image_bytes(const HostDataset& data, const StrategyOptions& opt) {
  return transfer_bytes_per_sample(data.features(), set_format(opt)) *
         static_cast<std::size_t>(data.n_train());
}

std::uint64_t GatherInput::set_bytes(const StrategyOptions& opt, const BatchGeometry& g) {
  // g is in the transfer format; the set in set_format's.
  return g.labelled_bytes(g.image_bytes_per_sample / pixel_bytes(opt.transfer) *
                          pixel_bytes(set_format(opt)));
}

std::uint64_t GatherInput::device_bytes(const BatchGeometry& g) {
  return static_cast<std::uint64_t>(g.samples) * sizeof(std::int32_t) + g.bytes(0);
}

void GatherInput::attach(const HostDataset& data, const StrategyOptions& opt, const void* images,
                         const std::int32_t* labels, cudaStream_t compute) {
  src_ = {images, labels, data.n_train(),
          transfer_bytes_per_sample(data.features(), set_format(opt))};
  geom_ = {data.n_train(), opt.batch, transfer_bytes_per_sample(data.features(), opt.transfer)};
  if (opt.augment != Augment::None && opt.augment_device == AugmentDevice::Gpu)
    augment_.emplace(  // the kernel augments as the host producers would: (seed, epoch, row)
        AugmentRows{opt.augment, opt.seed, 0, 0, data.rows, data.cols, opt.transfer});
  transfer_ = opt.transfer;
  compute_ = compute;
  order_.emplace(data.n_train(), opt.seed);
  order_staging_ = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(data.n_train()));
  order_dev_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(data.n_train()));
  batch_images_ = DeviceBuffer<std::uint8_t>(geom_.image_bytes(0));
  batch_labels_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(geom_.rows(0)));
  upload_.allocate(1);
}

void GatherInput::begin_epoch(int epoch) {
  // The GPU is idle (the trainer drained the last epoch), so the staging copy may be rewritten.
  order_->set_epoch(epoch);
  std::memcpy(order_staging_.data(), order_->order(), order_staging_.bytes());
  upload_.begin_epoch();
  NvtxRange r(Phase::H2D, "h2d order");
  upload_.start(0, compute_);
  CUDA_CHECK(cudaMemcpyAsync(order_dev_.data(), order_staging_.data(), order_staging_.bytes(),
                             cudaMemcpyHostToDevice, compute_));
  upload_.stop(0, compute_, order_staging_.bytes());
}

BatchView GatherInput::gather(int b) {
  if (augment_) {
    AugmentRows a = *augment_;
    a.epoch = order_->epoch();
    a.first_row = geom_.first(b);  // the key of row r: the epoch's row first(b) + r
    gather_augment(src_, order_dev_.data() + geom_.first(b), geom_.rows(b), a,
                   batch_images_.data(), batch_labels_.data(), compute_);
  } else {
    gather_batch(src_, order_dev_.data() + geom_.first(b), geom_.rows(b), batch_images_.data(),
                 batch_labels_.data(), compute_);
  }
  return batch_view(transfer_, geom_, batch_images_.data(), batch_labels_.data(), b);
}

}  // namespace memstrat
