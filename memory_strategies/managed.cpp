#include "memory_strategies/managed.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "common/nvtx.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

void ManagedStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                             cudaStream_t compute) {
  if (hints_.chunked && opt.prefetch_chunk_mib < 1)
    throw std::invalid_argument(name_ + ": --prefetch-chunk must be >= 1 (MiB)");
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
    plan_ = hints_.chunked
                ? ChunkPlan::split(g, static_cast<std::size_t>(opt.prefetch_chunk_mib) << 20)
                : ChunkPlan::per_batch(g);
    prefetch_stream_ = Stream::create();
    nvtx_name_stream(prefetch_stream_, "prefetch");
    for (int c = 0; c < plan_->chunks(); ++c) ready_.push_back(Event::create_sync_only());
    timeline_.allocate(plan_->chunks());
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
  prefetching_ = hints_.prefetch && !(hints_.skip_resident && resident_);
}

void ManagedStrategy::prefetch_chunk(int c) {
  const SplitChunk k = plan_->split_chunk(c);
  NvtxRange r(Phase::Prefetch, "prefetch");
  timeline_.start(c, prefetch_stream_);
  prefetch_to_device(images_.data() + k.image_offset, k.image_bytes, device_, prefetch_stream_);
  prefetch_to_device(reinterpret_cast<const std::uint8_t*>(labels_.data()) + k.label_offset,
                     k.label_bytes, device_, prefetch_stream_);
  timeline_.stop(c, prefetch_stream_, k.bytes());
  CUDA_CHECK(cudaEventRecord(ready_[c], prefetch_stream_));
}

BatchView ManagedStrategy::acquire(int b) {
  if (prefetching_) {
    // The chunk of batch b (at the first batch only) and the next one go up on the side stream
    // while b computes; per batch, a chunk is one batch.
    const int c = plan_->chunk_of(b);
    const int last = std::min(plan_->chunks(), c + 2);
    while (issued_ < last) prefetch_chunk(issued_++);
    if (plan_->starts_chunk(b)) CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), ready_[c], 0));
  }
  return source_.epoch_view(images_.data(), labels_.data(), b);
}

void ManagedStrategy::end_epoch() {
  // Static data, every chunk prefetched this epoch: resident from now on (the CPU never writes
  // it again), so later epochs issue no prefetch at all.
  if (hints_.skip_resident && prefetching_ && !source_.refreshes() && issued_ == plan_->chunks())
    resident_ = true;
}

}  // namespace memstrat
