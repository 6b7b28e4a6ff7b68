#include "memory_strategies/copy_on_compute.h"

#include <chrono>

#include "common/nvtx.h"

namespace memstrat {

void CopyOnComputeStream::attach(const HostDataset& data, const StrategyOptions& opt,
                                 cudaStream_t compute) {
  source_.configure(data, opt, compute);
  const BatchGeometry& g = source_.geometry();
  allocate_host(source_.image_bytes(), static_cast<std::size_t>(source_.samples()), &host_images_,
                &host_labels_);
  dev_images_ = DeviceBuffer<std::uint8_t>(g.image_bytes(0));
  dev_labels_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(g.rows(0)));
  timeline_.allocate(g.batches());
  source_.bind(host_images_, host_labels_);
}

void CopyOnComputeStream::begin_epoch(int epoch) {
  source_.begin_epoch(epoch);
  timeline_.begin_epoch();
  host_ms_ = 0.0;
}

BatchView CopyOnComputeStream::acquire(int b) {
  NvtxRange r(Phase::H2D, "h2d");
  const BatchGeometry& g = source_.geometry();
  cudaStream_t compute = source_.compute();
  const auto t0 = std::chrono::steady_clock::now();
  timeline_.start(b, compute);
  const auto* src = static_cast<const std::uint8_t*>(host_images_) + g.image_offset(b);
  // From pageable memory this call is staged through a driver buffer and returns only when the
  // source has been consumed, i.e. it behaves like cudaMemcpy; from pinned memory it is a DMA
  // that is merely enqueued. Either way it is ordered on the compute stream.
  CUDA_CHECK(cudaMemcpyAsync(dev_images_.data(), src, g.image_bytes(b), cudaMemcpyHostToDevice,
                             compute));
  CUDA_CHECK(cudaMemcpyAsync(dev_labels_.data(), host_labels_ + g.first(b), g.label_bytes(b),
                             cudaMemcpyHostToDevice, compute));
  timeline_.stop(b, compute, g.bytes(b));
  host_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return source_.slot_view(dev_images_.data(), dev_labels_.data(), b);
}

StrategyStats CopyOnComputeStream::stats() const {
  StrategyStats s = timeline_.stats();
  s.host_ms = host_ms_;
  return s;
}

}  // namespace memstrat
