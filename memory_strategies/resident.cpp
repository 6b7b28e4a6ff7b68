#include "memory_strategies/resident.h"

#include <stdexcept>

#include "common/nvtx.h"

namespace memstrat {

std::uint64_t ResidentStrategy::device_footprint(const StrategyOptions& opt,
                                                const BatchGeometry& g) {
  // Refresh on the GPU: the uint8 set, the order and the epoch the kernel writes. Stream, the
  // GPU gathers: the set in its format (uint8 where the GPU augments), the order and one batch.
  if (writes_epoch_on_gpu(opt)) return GpuEpochWriter::device_bytes(g, opt.transfer);
  if (gathers_on_gpu(opt)) return GatherInput::set_bytes(opt, g) + GatherInput::device_bytes(g);
  return g.epoch_bytes();
}

void ResidentStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                              cudaStream_t compute) {
  source_.configure(data, opt, compute);
  if (writes_epoch_on_gpu(opt)) {
    gpu_writer_.attach(data, opt, compute);  // no host copy: the GPU writes every epoch
    return;
  }
  const std::size_t image_bytes = opt.scenario == Scenario::Stream
                                      ? GatherInput::set_image_bytes(data, opt)
                                      : source_.image_bytes();
  host_images_ = PinnedBuffer<std::uint8_t>(image_bytes);
  host_labels_ = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()));
  dev_images_ = DeviceBuffer<std::uint8_t>(image_bytes);
  dev_labels_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()));
  timeline_.allocate(1);
  if (opt.scenario == Scenario::Stream) {
    if (!gathers_on_gpu(opt))  // the registry refuses it first (StrategyEntry::unsupported_with)
      throw std::invalid_argument("resident runs the stream scenario with --augment none only");
    GatherInput::write_set(data, GatherInput::set_format(opt), host_images_.data(),
                           host_labels_.data());
    upload();  // once, as part of set-up
    CUDA_CHECK(cudaStreamSynchronize(compute));
    gather_.attach(data, opt, dev_images_.data(), dev_labels_.data(), compute);
    return;
  }
  source_.bind(host_images_.data(), host_labels_.data());
  if (!source_.refreshes()) {
    // Static data: uploaded once, as part of set-up (not counted in any epoch).
    upload();
    CUDA_CHECK(cudaStreamSynchronize(compute));
    timeline_.begin_epoch();  // forget the set-up upload: no epoch moves a byte
  }
}

void ResidentStrategy::upload() {
  NvtxRange r(Phase::H2D, "h2d");
  cudaStream_t compute = source_.compute();
  timeline_.start(0, compute);
  CUDA_CHECK(cudaMemcpyAsync(dev_images_.data(), host_images_.data(), host_images_.bytes(),
                             cudaMemcpyHostToDevice, compute));
  CUDA_CHECK(cudaMemcpyAsync(dev_labels_.data(), host_labels_.data(), host_labels_.bytes(),
                             cudaMemcpyHostToDevice, compute));
  timeline_.stop(0, compute, host_images_.bytes() + host_labels_.bytes());
}

void ResidentStrategy::begin_epoch(int epoch) {
  if (gather_.attached()) gather_.begin_epoch(epoch);
  if (gpu_writer_.attached()) {
    gpu_writer_.begin_epoch(epoch);  // the order into staging; acquire(0) enqueues the rest
    upload_pending_ = true;
    return;
  }
  // The timeline is not reset: a refresh epoch records its upload over the last one, enqueued or
  // replayed in an epoch graph; a static epoch records nothing.
  upload_pending_ = source_.begin_epoch(epoch);  // refresh: new host data to upload
}

BatchView ResidentStrategy::acquire(int b) {
  if (gather_.attached()) return gather_.gather(b);
  if (gpu_writer_.attached()) {
    // Refresh on the GPU: the order goes up and one kernel writes the whole epoch before the
    // first batch; every batch is then an offset into it, as with the host-written epoch.
    if (b == 0 && upload_pending_) {
      gpu_writer_.write();
      upload_pending_ = false;
    }
    return source_.epoch_view(gpu_writer_.images(), gpu_writer_.labels(), b);
  }
  if (b == 0 && upload_pending_) {
    // Refresh: the new epoch's data goes up in one bulk copy before the first batch; the
    // compute stream waits for it (that wait is this strategy's whole per-epoch cost).
    upload();
    upload_pending_ = false;
  }
  return source_.epoch_view(dev_images_.data(), dev_labels_.data(), b);
}

}  // namespace memstrat
