#include "memory_strategies/managed.h"

#include <algorithm>
#include <utility>

#include "common/nvtx.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

void ManagedStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                             cudaStream_t compute) {
  CUDA_CHECK(cudaGetDevice(&device_));
  source_.configure(data, opt, compute);
  const BatchGeometry& g = source_.geometry();
  check_managed_fits(source_.image_bytes() + source_.label_bytes(), name_.c_str());
  images_ = ManagedBuffer<std::uint8_t>(source_.image_bytes());
  labels_ = ManagedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()));
  if (hints_.advise) {
    NvtxRange r(Phase::Advise, "advise");
    const AdviseSet& a = opt.advise;
    for (auto [ptr, bytes] : {std::pair<const void*, std::size_t>{images_.data(), images_.bytes()},
                              {labels_.data(), labels_.bytes()}}) {
      if (a.read_mostly) advise(ptr, bytes, UmAdvice::ReadMostly, device_);
      if (a.preferred_device) advise(ptr, bytes, UmAdvice::PreferredLocationDevice, device_);
      if (a.accessed_by) advise(ptr, bytes, UmAdvice::AccessedByDevice, device_);
    }
  }
  if (hints_.prefetch) {
    prefetch_stream_ = Stream::create();
    nvtx_name_stream(prefetch_stream_, "prefetch");
    for (int b = 0; b < g.batches(); ++b) ready_.push_back(Event::create_sync_only());
    timeline_.allocate(g.batches());
  }
  // The CPU writes the data (first touch on the host): the GPU has to fault or prefetch it in.
  source_.bind(images_.data(), labels_.data());
}

void ManagedStrategy::begin_epoch(int epoch) {
  // GPU idle here; with concurrentManagedAccess the CPU may write managed memory, which moves
  // (or, with ReadMostly, invalidates) the pages the GPU held.
  source_.begin_epoch(epoch);
  issued_ = 0;
  timeline_.begin_epoch();
}

void ManagedStrategy::prefetch_batch(int b) {
  const BatchGeometry& g = source_.geometry();
  NvtxRange r(Phase::Prefetch, "prefetch");
  timeline_.start(b, prefetch_stream_);
  prefetch_to_device(images_.data() + g.image_offset(b), g.image_bytes(b), device_,
                     prefetch_stream_);
  prefetch_to_device(labels_.data() + g.first(b), g.label_bytes(b), device_, prefetch_stream_);
  timeline_.stop(b, prefetch_stream_, g.bytes(b));
  CUDA_CHECK(cudaEventRecord(ready_[b], prefetch_stream_));
}

BatchView ManagedStrategy::acquire(int b) {
  if (hints_.prefetch) {
    // Batch b (first batch only) and b+1 go up on the side stream while b computes.
    const int last = std::min(source_.geometry().batches(), b + 2);
    while (issued_ < last) prefetch_batch(issued_++);
    CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), ready_[b], 0));
  }
  return source_.epoch_view(images_.data(), labels_.data(), b);
}

}  // namespace memstrat
