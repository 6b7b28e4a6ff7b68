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
  host_blocks_ = PinnedBuffer<std::uint8_t>(layout_.total_bytes(), cudaHostAllocMapped);
  void* p = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&p, host_blocks_.data(), 0));
  mapped_blocks_ = static_cast<const std::uint8_t*>(p);
  for (int k = 0; k < depth_; ++k) {
    slots_.emplace_back(layout_.block_stride());
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
  epoch_bytes_ = layout_.epoch_bytes();
  source_.bind_packed(host_blocks_.data());
}

void ZeroCopyStagedStrategy::begin_epoch(int epoch) {
  // GPU idle: the mapped host blocks may be rewritten (refresh) and no slot is in use.
  source_.begin_epoch(epoch);
  issued_ = 0;
}

void ZeroCopyStagedStrategy::issue_copy(int b) {
  const int slot = b % depth_;
  // Batches 0..depth-1 are ordered after the previous epoch's steps by the fork; a later batch
  // waits until the step that read its slot (batch b - depth, this epoch) has finished.
  if (b >= depth_) CUDA_CHECK(cudaStreamWaitEvent(stage_, consumed_[slot], 0));
  NvtxRange r(Phase::H2D, "h2d");
  const std::size_t bytes = layout_.block_bytes(b);
  timeline_.start(b, stage_);
  copier_(slots_[slot].data(), mapped_blocks_ + layout_.block_offset(b), bytes, stage_);
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
  // Keep up to depth batches in flight: b (needed now) and the next depth-1.
  const int last = std::min(source_.geometry().batches(), b + depth_);
  while (issued_ < last) issue_copy(issued_++);
  const int slot = b % depth_;
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
  return s;
}

}  // namespace memstrat
