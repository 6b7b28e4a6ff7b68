#include "memory_strategies/host_epoch_source.h"

#include <stdexcept>

namespace memstrat {

void HostEpochSource::configure(const HostDataset& data, const StrategyOptions& opt,
                                cudaStream_t compute) {
  writer_.emplace(data, opt);
  transfer_ = opt.transfer;
  scenario_ = opt.scenario;
  compute_ = compute;
  geom_ = {writer_->samples(), opt.batch, writer_->image_bytes_per_sample()};
}

void HostEpochSource::bind(void* images, std::int32_t* labels) {
  images_ = images;
  labels_ = labels;
  if (!writer_->refreshes()) write(1);
}

void HostEpochSource::bind_packed(void* blocks) {
  if (reinterpret_cast<std::uintptr_t>(blocks) % PackedLayout::kAlign != 0)
    throw std::invalid_argument("HostEpochSource::bind_packed: storage is not 16-byte aligned");
  blocks_ = blocks;
  if (!writer_->refreshes()) write(1);
}

void HostEpochSource::write(int epoch) {
  if (blocks_ != nullptr)
    writer_->write_packed(epoch, blocks_, packed());
  else
    writer_->write(epoch, images_, labels_);
}

bool HostEpochSource::begin_epoch(int epoch) {
  if (!writer_->refreshes()) return false;
  write(epoch);
  return true;
}

BatchView batch_view(Transfer t, const BatchGeometry& g, const void* images,
                     const std::int32_t* labels, int b) {
  BatchView v;
  if (t == Transfer::U8)
    v.x_u8 = static_cast<const std::uint8_t*>(images);
  else
    v.x_f32 = static_cast<const float*>(images);
  v.y = labels;
  v.rows = g.rows(b);
  v.first_sample = g.first(b);
  return v;
}

BatchView HostEpochSource::slot_view(const void* images, const std::int32_t* labels, int b) const {
  return batch_view(transfer_, geom_, images, labels, b);
}

BatchView HostEpochSource::packed_slot_view(const void* block, int b) const {
  return slot_view(block,
                   reinterpret_cast<const std::int32_t*>(static_cast<const std::uint8_t*>(block) +
                                                         packed().label_offset(b)),
                   b);
}

BatchView HostEpochSource::packed_epoch_view(const void* blocks, int b) const {
  return packed_slot_view(static_cast<const std::uint8_t*>(blocks) + packed().block_offset(b), b);
}

BatchView HostEpochSource::epoch_view(const void* images, const std::int32_t* labels, int b) const {
  return slot_view(static_cast<const std::uint8_t*>(images) + geom_.image_offset(b),
                   labels + geom_.first(b), b);
}

}  // namespace memstrat
