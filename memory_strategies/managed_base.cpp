#include "memory_strategies/managed_base.h"

#include <stdexcept>

#include "common/nvtx.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

void ManagedStrategyBase::attach(const HostDataset& data, const StrategyOptions& opt,
                                 cudaStream_t compute) {
  CUDA_CHECK(cudaGetDevice(&device_));
  const DeviceCaps caps = DeviceCaps::query(device_);
  if (!caps.managed_memory) throw std::runtime_error(std::string(name()) + ": device has no managed memory");
  if ((prefetch_ || use_advise_) && !caps.concurrent_managed_access)
    throw std::runtime_error(std::string(name()) +
                             ": prefetch/advise need concurrentManagedAccess, which this device lacks");
  writer_.emplace(data, opt);
  transfer_ = opt.transfer;
  compute_ = compute;
  advise_ = opt.advise;
  geom_ = {writer_->samples(), opt.batch, writer_->image_bytes_per_sample()};
  check_managed_fits(writer_->image_bytes() + writer_->label_bytes(), std::string(name()).c_str());
  images_ = ManagedBuffer<std::uint8_t>(writer_->image_bytes());
  labels_ = ManagedBuffer<std::int32_t>(static_cast<std::size_t>(writer_->samples()));
  if (use_advise_) {
    NvtxRange r(Phase::Advise, "advise");
    for (auto [ptr, bytes] : {std::pair<const void*, std::size_t>{images_.data(), images_.bytes()},
                              {labels_.data(), labels_.bytes()}}) {
      if (advise_.read_mostly) advise(ptr, bytes, UmAdvice::ReadMostly, device_);
      if (advise_.preferred_device) advise(ptr, bytes, UmAdvice::PreferredLocationDevice, device_);
      if (advise_.accessed_by) advise(ptr, bytes, UmAdvice::AccessedByDevice, device_);
    }
  }
  if (prefetch_) {
    prefetch_stream_ = Stream::create();
    nvtx_name_stream(prefetch_stream_, "prefetch");
    for (int b = 0; b < geom_.batches(); ++b) ready_.push_back(Event::create_sync_only());
    timeline_.allocate(geom_.batches());
  }
  // The CPU writes the data (first touch on the host): the GPU has to fault or prefetch it in.
  if (!writer_->refreshes()) writer_->write(1, images_.data(), labels_.data());
}

void ManagedStrategyBase::begin_epoch(int epoch) {
  // GPU idle here; with concurrentManagedAccess the CPU may write managed memory, which moves
  // (or, with ReadMostly, invalidates) the pages the GPU held.
  if (writer_->refreshes()) writer_->write(epoch, images_.data(), labels_.data());
  issued_ = 0;
  bytes_ = 0;
  if (prefetch_) timeline_.begin_epoch();
}

void ManagedStrategyBase::prefetch_batch(int b) {
  NvtxRange r(Phase::Prefetch, "prefetch");
  timeline_.start(b, prefetch_stream_);
  prefetch_to_device(images_.data() + geom_.image_offset(b), geom_.image_bytes(b), device_,
                     prefetch_stream_);
  prefetch_to_device(labels_.data() + geom_.first(b), geom_.label_bytes(b), device_,
                     prefetch_stream_);
  timeline_.stop(b, prefetch_stream_);
  CUDA_CHECK(cudaEventRecord(ready_[b], prefetch_stream_));
  bytes_ += geom_.image_bytes(b) + geom_.label_bytes(b);
}

BatchView ManagedStrategyBase::acquire(int b) {
  if (prefetch_) {
    // Batch b (first batch only) and b+1 go up on the side stream while b computes.
    const int last = std::min(geom_.batches(), b + 2);
    while (issued_ < last) prefetch_batch(issued_++);
    CUDA_CHECK(cudaStreamWaitEvent(compute_, ready_[b], 0));
  }
  return make_view(images_.data() + geom_.image_offset(b), labels_.data() + geom_.first(b),
                   transfer_, geom_.rows(b), geom_.first(b));
}

StrategyStats ManagedStrategyBase::stats() const {
  StrategyStats s;
  // Prefetched bytes are requested, not necessarily moved (pages already resident are skipped);
  // CUPTI's unified-memory counters report what actually migrated.
  s.h2d_bytes = bytes_;
  if (prefetch_) s.copy_ms = timeline_.total_ms();
  return s;
}

}  // namespace memstrat
