#include "memory_strategies/zero_copy_staged.h"

#include <algorithm>
#include <stdexcept>

#include "common/nvtx.h"

namespace memstrat {

void ZeroCopyStagedStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                    cudaStream_t compute) {
  if (opt.depth < 2) throw std::invalid_argument("zero-copy-staged: --depth must be >= 2");
  source_.configure(data, opt, compute);
  layout_ = source_.packed();
  depth_ = opt.depth;
  const bool stream = opt.scenario == Scenario::Stream;
  if (stream) {
    host_slots_.attach(data, opt, SlotKind::Mapped, "zero-copy-staged");
  } else {
    host_blocks_ = PinnedBuffer<std::uint8_t>(layout_.total_bytes(), cudaHostAllocMapped);
    void* p = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&p, host_blocks_.data(), 0));
    mapped_blocks_ = static_cast<const std::uint8_t*>(p);
  }
  for (int k = 0; k < depth_; ++k) {
    slots_.emplace_back(stream ? host_slots_.stride() : layout_.block_stride());
    copied_.push_back(Event::create_sync_only());
    consumed_.push_back(Event::create_sync_only());
  }
  fork_ = Event::create_sync_only();
  join_ = Event::create_sync_only();
  copier_ = SmCopy::create();
  // The greatest priority: the staging kernel is small and the next step waits for it, so its
  // blocks are scheduled ahead of any pending blocks of the step it overlaps (priorities never
  // preempt blocks already running).
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  stage_ = Stream::create(cudaStreamNonBlocking, greatest);
  nvtx_name_stream(stage_, "stage");
  timeline_.allocate(source_.geometry().batches());
  if (stream) {
    epoch_bytes_ = 0;
    for (int b = 0; b < source_.geometry().batches(); ++b) epoch_bytes_ += host_slots_.block_bytes(b);
    return;
  }
  epoch_bytes_ = layout_.epoch_bytes();
  source_.bind_packed(host_blocks_.data());
}

void ZeroCopyStagedStrategy::begin_epoch(int epoch) {
  // GPU idle: the mapped host blocks may be rewritten (refresh) and no slot is in use.
  if (host_slots_.attached()) host_slots_.begin_epoch(epoch);
  source_.begin_epoch(epoch);
  issued_ = 0;
}

void ZeroCopyStagedStrategy::issue_copy(int b, const std::uint8_t* block, std::size_t bytes) {
  const int slot = b % depth_;
  // Batches 0..depth-1 are ordered after the previous epoch's steps by the fork; a later batch
  // waits until the step that read its slot (batch b - depth, this epoch) has finished.
  if (b >= depth_) CUDA_CHECK(cudaStreamWaitEvent(stage_, consumed_[slot], 0));
  NvtxRange r(Phase::H2D, "h2d");
  timeline_.start(b, stage_);
  copier_(slots_[slot].data(), block, bytes, stage_);
  timeline_.stop(b, stage_, bytes);
  CUDA_CHECK(cudaEventRecord(copied_[slot], stage_));
}

BatchView ZeroCopyStagedStrategy::acquire(int b) {
  cudaStream_t compute = source_.compute();
  if (b == 0) {
    // Fork: the stage stream joins the compute stream's order (and an epoch capture).
    CUDA_CHECK(cudaEventRecord(fork_, compute));
    CUDA_CHECK(cudaStreamWaitEvent(stage_, fork_, 0));
  }
  const int slot = b % depth_;
  if (host_slots_.attached()) {
    // Only batch b is certain to exist (see double_buffer.h); the host runs ahead of the GPU,
    // so its staging still overlaps the step of the batch before.
    const int h = host_slots_.take(b);
    issue_copy(b, host_slots_.device(h), host_slots_.block_bytes(b));
    host_slots_.release_after(h, stage_);  // after the kernel that reads it, on its stream
    issued_ = b + 1;
    CUDA_CHECK(cudaStreamWaitEvent(compute, copied_[slot], 0));
    return host_slots_.view(slots_[slot].data(), b);
  }
  // Keep up to depth batches in flight: b (needed now) and the next depth-1.
  const int last = std::min(source_.geometry().batches(), b + depth_);
  for (; issued_ < last; ++issued_)
    issue_copy(issued_, mapped_blocks_ + layout_.block_offset(issued_),
               layout_.block_bytes(issued_));
  CUDA_CHECK(cudaStreamWaitEvent(compute, copied_[slot], 0));
  return source_.packed_slot_view(slots_[slot].data(), b);
}

void ZeroCopyStagedStrategy::release(int b) {
  CUDA_CHECK(cudaEventRecord(consumed_[b % depth_], source_.compute()));
}

void ZeroCopyStagedStrategy::end_epoch() {
  // Join: the compute stream's epoch ends after the stage stream's last work.
  CUDA_CHECK(cudaEventRecord(join_, stage_));
  CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), join_, 0));
}

StrategyStats ZeroCopyStagedStrategy::stats() const {
  // The timeline is never reset: every epoch records every batch's pair of events (so a replayed
  // epoch graph, which does not call acquire, re-records all of them), and the bytes are the
  // geometry's, not a count kept by acquire.
  StrategyStats s;
  s.h2d_bytes = epoch_bytes_;
  s.copy_ms = timeline_.total_ms();
  if (host_slots_.attached()) s.producer = host_slots_.stats();
  return s;
}

}  // namespace memstrat
