#include "memory_strategies/zero_copy.h"

namespace memstrat {

std::uint64_t ZeroCopyStrategy::device_footprint(const StrategyOptions& opt,
                                                const BatchGeometry& g) {
  // The data stays in mapped host memory; only the stream scenario's GPU gather has device
  // buffers.
  return gathers_on_gpu(opt) ? GatherInput::device_bytes(g) : 0;
}

void ZeroCopyStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                              cudaStream_t compute) {
  source_.configure(data, opt, compute);
  if (opt.scenario == Scenario::Stream && !gathers_on_gpu(opt)) {
    slots_.attach(data, opt, SlotKind::Mapped, "zero-copy");
    return;
  }
  host_images_ = PinnedBuffer<std::uint8_t>(source_.image_bytes(), cudaHostAllocMapped);
  host_labels_ =
      PinnedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()), cudaHostAllocMapped);
  void* p = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_images_.data(), 0));
  dev_images_ = static_cast<const std::uint8_t*>(p);
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_labels_.data(), 0));
  dev_labels_ = static_cast<const std::int32_t*>(p);
  if (gathers_on_gpu(opt)) {
    GatherInput::write_set(data, opt.transfer, host_images_.data(), host_labels_.data());
    gather_.attach(data, opt, dev_images_, dev_labels_, compute);
    return;
  }
  source_.bind(host_images_.data(), host_labels_.data());
}

void ZeroCopyStrategy::begin_epoch(int epoch) {
  if (slots_.attached()) slots_.begin_epoch(epoch);
  if (gather_.attached()) gather_.begin_epoch(epoch);
  source_.begin_epoch(epoch);
}

BatchView ZeroCopyStrategy::acquire(int b) {
  if (slots_.attached()) return slots_.view(slots_.device(slots_.take(b)), b);
  if (gather_.attached()) return gather_.gather(b);
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
  return {};
}

}  // namespace memstrat
