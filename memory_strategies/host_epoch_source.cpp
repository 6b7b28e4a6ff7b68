#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

void HostEpochSource::configure(const HostDataset& data, const StrategyOptions& opt,
                                cudaStream_t compute) {
  writer_.emplace(data, opt);
  transfer_ = opt.transfer;
  compute_ = compute;
  geom_ = {writer_->samples(), opt.batch, writer_->image_bytes_per_sample()};
}

void HostEpochSource::bind(void* images, std::int32_t* labels) {
  images_ = images;
  labels_ = labels;
  if (!writer_->refreshes()) writer_->write(1, images_, labels_);
}

bool HostEpochSource::begin_epoch(int epoch) {
  if (!writer_->refreshes()) return false;
  writer_->write(epoch, images_, labels_);
  return true;
}

BatchView HostEpochSource::slot_view(const void* images, const std::int32_t* labels, int b) const {
  BatchView v;
  if (transfer_ == Transfer::U8)
    v.x_u8 = static_cast<const std::uint8_t*>(images);
  else
    v.x_f32 = static_cast<const float*>(images);
  v.y = labels;
  v.rows = geom_.rows(b);
  v.first_sample = geom_.first(b);
  return v;
}

BatchView HostEpochSource::epoch_view(const void* images, const std::int32_t* labels, int b) const {
  return slot_view(static_cast<const std::uint8_t*>(images) + geom_.image_offset(b),
                   labels + geom_.first(b), b);
}

}  // namespace memstrat
