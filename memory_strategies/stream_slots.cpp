#include "memory_strategies/stream_slots.h"

#include <stdexcept>
#include <string>

#include "memory_strategies/batch_geometry.h"  // PackedLayout::align_up
#include "memory_strategies/epoch_data.h"      // transfer_bytes_per_sample
#include "memory_strategies/host_epoch_source.h"  // batch_view
#include "memory_strategies/um_hints.h"        // check_managed_fits

namespace memstrat {

std::uint64_t stream_slot_bytes(int batch, std::size_t image_bytes_per_sample) {
  const std::uint64_t images = PackedLayout::align_up(static_cast<std::size_t>(batch) *
                                                      image_bytes_per_sample);
  const std::uint64_t block = images + static_cast<std::uint64_t>(batch) * sizeof(std::int32_t);
  return (block + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}

void check_stream_slots(int prefetch, int batch, std::size_t image_bytes_per_sample) {
  const std::uint64_t slot = stream_slot_bytes(batch, image_bytes_per_sample);
  const std::uint64_t total = slot * static_cast<std::uint64_t>(prefetch);
  if (total > kMaxSlotBytes)
    throw std::invalid_argument(
        "--prefetch " + std::to_string(prefetch) + " slots of one batch of " +
        std::to_string(batch) + " (" + std::to_string(slot >> 10) + " KiB each) take " +
        std::to_string(total >> 20) + " MiB; the stream scenario's slots may take at most " +
        std::to_string(kMaxSlotBytes >> 20) + " MiB (pinned, mapped or managed memory): lower "
        "--prefetch or --batch");
}

StreamSlots::~StreamSlots() { producer_.reset(); }

void StreamSlots::attach(const HostDataset& data, const StrategyOptions& opt, SlotKind kind,
                         const char* strategy) {
  if (opt.prefetch < 1) throw std::invalid_argument("stream: --prefetch must be >= 1");
  const std::size_t row = transfer_bytes_per_sample(data.features(), opt.transfer);
  check_stream_slots(opt.prefetch, opt.batch, row);
  transfer_ = opt.transfer;
  slots_ = opt.prefetch;
  label_offset_ = PackedLayout::align_up(static_cast<std::size_t>(opt.batch) * row);
  stride_ = stream_slot_bytes(opt.batch, row);
  const std::size_t bytes = memory_bytes();
  switch (kind) {
    case SlotKind::Pageable:
      pageable_.assign(bytes, 0);  // touch every page now, not during the first epoch
      base_ = pageable_.data();
      break;
    case SlotKind::Pinned:
    case SlotKind::Mapped: {
      pinned_ = PinnedBuffer<std::uint8_t>(bytes, kind == SlotKind::Mapped ? cudaHostAllocMapped : 0);
      base_ = pinned_.data();
      if (kind == SlotKind::Mapped) device_ = mapped_device_pointer(pinned_.data());
      break;
    }
    case SlotKind::Managed:
      check_managed_fits(bytes, strategy);
      managed_ = ManagedBuffer<std::uint8_t>(bytes);
      base_ = managed_.data();
      device_ = base_;
      break;
  }
  std::vector<SlotMemory> memory;
  for (int s = 0; s < slots_; ++s) {
    std::uint8_t* block = base_ + static_cast<std::size_t>(s) * stride_;
    memory.push_back({block, reinterpret_cast<std::int32_t*>(block + label_offset_)});
  }
  ProducerConfig cfg;
  cfg.workers = opt.workers;
  cfg.batch = opt.batch;
  // --augment-device gpu: the workers only gather; the GPU augments after the copy
  // (augment_after_copy.h).
  cfg.augment = opt.augment_device == AugmentDevice::Gpu ? Augment::None : opt.augment;
  cfg.transfer = opt.transfer;
  cfg.seed = opt.seed;
  cfg.shard = opt.shard;
  cfg.shards = opt.shards;
  cfg.gpu_release = true;
  producer_ = std::make_unique<BatchProducer>(data, cfg, std::move(memory));
}

void StreamSlots::begin_epoch(int epoch) { producer_->begin_epoch(epoch); }

int StreamSlots::take(int b) {
  const int s = producer_->wait_ready(b);
  if (s != slot_of(b))  // the address a strategy hands out for batch b depends on it
    throw std::logic_error("StreamSlots::take(" + std::to_string(b) + "): slot " +
                           std::to_string(s) + ", expected " + std::to_string(slot_of(b)));
  return s;
}

void StreamSlots::release(int s) { producer_->release(s); }

void StreamSlots::release_after(int s, cudaStream_t stream) { producer_->release_after(s, stream); }

const std::uint8_t* StreamSlots::host(int s) const {
  return base_ + static_cast<std::size_t>(s) * stride_;
}

const std::uint8_t* StreamSlots::device(int s) const {
  return device_ == nullptr ? nullptr : device_ + static_cast<std::size_t>(s) * stride_;
}

std::size_t StreamSlots::block_bytes(int b) const {
  return label_offset_ + static_cast<std::size_t>(geometry().rows(b)) * sizeof(std::int32_t);
}

BatchView StreamSlots::view(const void* block, int b) const {
  const auto* p = static_cast<const std::uint8_t*>(block);
  return batch_view(transfer_, geometry(), p,
                    reinterpret_cast<const std::int32_t*>(p + label_offset_), b);
}

}  // namespace memstrat
