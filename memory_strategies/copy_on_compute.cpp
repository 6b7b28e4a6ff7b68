#include "memory_strategies/copy_on_compute.h"

#include <chrono>
#include <string>

#include "common/nvtx.h"

namespace memstrat {

std::uint64_t CopyOnComputeStream::device_footprint(const StrategyOptions&,
                                                   const BatchGeometry& g) {
  return g.bytes(0);  // one device batch: images and labels (stream slots are host memory)
}

void CopyOnComputeStream::attach(const HostDataset& data, const StrategyOptions& opt,
                                 cudaStream_t compute) {
  source_.configure(data, opt, compute);
  const BatchGeometry& g = source_.geometry();
  dev_images_ = DeviceBuffer<std::uint8_t>(g.image_bytes(0));
  dev_labels_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(g.rows(0)));
  timeline_.allocate(g.batches());
  if (opt.scenario == Scenario::Stream) {
    slots_.attach(data, opt, slot_kind(), std::string(name()).c_str());
    return;
  }
  allocate_host(source_.image_bytes(), static_cast<std::size_t>(source_.samples()), &host_images_,
                &host_labels_);
  source_.bind(host_images_, host_labels_);
}

void CopyOnComputeStream::begin_epoch(int epoch) {
  if (slots_.attached()) slots_.begin_epoch(epoch);
  source_.begin_epoch(epoch);
  // The timeline is not reset: every epoch copies every batch again, enqueued or replayed in an
  // epoch graph, over the last epoch's record.
  host_ms_ = 0.0;
}

BatchView CopyOnComputeStream::acquire(int b) {
  const BatchGeometry& g = source_.geometry();
  const std::uint8_t* images = static_cast<const std::uint8_t*>(host_images_) + g.image_offset(b);
  const std::int32_t* labels = host_labels_ + g.first(b);
  int slot = -1;
  if (slots_.attached()) {  // stream: batch b is in its slot once the workers made it
    slot = slots_.take(b);
    images = slots_.host(slot);
    labels = reinterpret_cast<const std::int32_t*>(images + slots_.label_offset());
  }
  NvtxRange r(Phase::H2D, "h2d");
  cudaStream_t compute = source_.compute();
  const auto t0 = std::chrono::steady_clock::now();
  timeline_.start(b, compute);
  // From pageable memory this call is staged through a driver buffer and returns only when the
  // source has been consumed, i.e. it behaves like cudaMemcpy; from pinned memory it is a DMA
  // that is merely enqueued. Either way it is ordered on the compute stream.
  CUDA_CHECK(cudaMemcpyAsync(dev_images_.data(), images, g.image_bytes(b), cudaMemcpyHostToDevice,
                             compute));
  CUDA_CHECK(cudaMemcpyAsync(dev_labels_.data(), labels, g.label_bytes(b), cudaMemcpyHostToDevice,
                             compute));
  timeline_.stop(b, compute, g.bytes(b));
  // The copies are all that reads the slot. The event makes the refill wait for the DMA (pinned)
  // and does not rely on the driver having staged pageable memory before returning.
  if (slot >= 0) slots_.release_after(slot, compute);
  host_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return source_.slot_view(dev_images_.data(), dev_labels_.data(), b);
}

StrategyStats CopyOnComputeStream::stats() const {
  StrategyStats s = timeline_.stats();
  s.host_ms = host_ms_;
  if (slots_.attached()) s.producer = slots_.stats();
  return s;
}

}  // namespace memstrat
