#include "memory_strategies/zero_copy.h"

namespace memstrat {

std::uint64_t ZeroCopyStrategy::device_footprint(const StrategyOptions& opt,
                                                const BatchGeometry& g) {
  // The data stays in mapped host memory; only the GPU's gather (stream) and the GPU's epoch
  // writer (refresh, --augment-device gpu) have device buffers: the order, and one batch.
  if (writes_epoch_on_gpu(opt)) return GpuEpochWriter::order_bytes(g);
  return gathers_on_gpu(opt) ? GatherInput::device_bytes(g) : 0;
}

void ZeroCopyStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                              cudaStream_t compute) {
  source_.configure(data, opt, compute);
  if (opt.scenario == Scenario::Stream && !gathers_on_gpu(opt)) {
    slots_.attach(data, opt, SlotKind::Mapped, "zero-copy");
    return;
  }
  // The mapped set the GPU gathers from (stream: in its format), or the epoch the step reads.
  const std::size_t image_bytes =
      gathers_on_gpu(opt) ? GatherInput::set_image_bytes(data, opt) : source_.image_bytes();
  host_images_ = PinnedBuffer<std::uint8_t>(image_bytes, cudaHostAllocMapped);
  host_labels_ =
      PinnedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()), cudaHostAllocMapped);
  dev_images_ = mapped_device_pointer(host_images_.data());
  dev_labels_ = mapped_device_pointer(host_labels_.data());
  if (gathers_on_gpu(opt)) {
    GatherInput::write_set(data, GatherInput::set_format(opt), host_images_.data(),
                           host_labels_.data());
    gather_.attach(data, opt, dev_images_, dev_labels_, compute);
    return;
  }
  if (writes_epoch_on_gpu(opt)) {
    // The uint8 set, written once by the CPU, beside the epoch: the GPU reads the one and writes
    // the other over the bus, and the step reads the epoch in place as the host path's.
    set_images_ = PinnedBuffer<std::uint8_t>(data.train_images.size(), cudaHostAllocMapped);
    set_labels_ =
        PinnedBuffer<std::int32_t>(static_cast<std::size_t>(data.n_train()), cudaHostAllocMapped);
    GatherInput::write_set(data, Transfer::U8, set_images_.data(), set_labels_.data());
    const GatherSource set{mapped_device_pointer(set_images_.data()), mapped_device_pointer(set_labels_.data()),
                           data.n_train(), static_cast<std::size_t>(data.features())};
    gpu_writer_.attach_to(data, opt, set, mapped_device_pointer(host_images_.data()),
                          mapped_device_pointer(host_labels_.data()), compute);
    return;
  }
  source_.bind(host_images_.data(), host_labels_.data());
}

void ZeroCopyStrategy::begin_epoch(int epoch) {
  if (slots_.attached()) slots_.begin_epoch(epoch);
  if (gather_.attached()) gather_.begin_epoch(epoch);
  if (gpu_writer_.attached()) {
    gpu_writer_.begin_epoch(epoch);  // the order into staging; acquire(0) enqueues the rest
    return;
  }
  source_.begin_epoch(epoch);
}

BatchView ZeroCopyStrategy::acquire(int b) {
  if (slots_.attached()) return slots_.view(slots_.device(slots_.take(b)), b);
  if (gather_.attached()) return gather_.gather(b);
  if (gpu_writer_.attached() && b == 0) gpu_writer_.write();  // the epoch, before its first step
  return source_.epoch_view(dev_images_, dev_labels_, b);
}

void ZeroCopyStrategy::release(int b) {
  // The step that reads batch b's slot in place has been enqueued on the compute stream.
  if (slots_.attached()) slots_.release_after(slots_.slot_of(b), source_.compute());
}

StrategyStats ZeroCopyStrategy::stats() const {
  if (slots_.attached()) {
    StrategyStats s;
    s.producer = slots_.stats();
    return s;
  }
  if (gather_.attached()) return gather_.stats();
  if (gpu_writer_.attached()) return gpu_writer_.stats();
  return {};
}

}  // namespace memstrat
