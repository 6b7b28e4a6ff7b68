#include "memory_strategies/slot_ring.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/nvtx.h"

namespace memstrat {

void SlotRing::allocate(int depth, std::size_t slot_bytes, std::vector<Stream> side_streams,
                        int units, cudaStream_t compute, Fill fill) {
  if (depth < 2) throw std::invalid_argument("SlotRing: depth must be >= 2");
  if (side_streams.empty()) throw std::invalid_argument("SlotRing: needs a side stream");
  depth_ = depth;
  units_ = units;
  compute_ = compute;
  fill_ = std::move(fill);
  side_ = std::move(side_streams);
  // Unit b uses slot b % depth: with fewer units than slots, only the first `units` are used.
  for (int k = 0; k < std::min(depth_, units_); ++k) {
    slots_.emplace_back(slot_bytes);
    copied_.push_back(Event::create_sync_only());
    consumed_.push_back(Event::create_sync_only());
  }
  for (std::size_t s = 0; s < side_.size(); ++s) join_.push_back(Event::create_sync_only());
  fork_ = Event::create_sync_only();
  timeline_.allocate(units);
}

void SlotRing::issue(int b) {
  const int slot = b % depth_;
  cudaStream_t s = side_[static_cast<std::size_t>(b) % side_.size()];
  // Units 0..depth-1 are ordered after the previous epoch's steps by the fork; a later unit
  // waits until the last step that read its slot (unit b - depth, this epoch) has finished.
  if (b >= depth_) CUDA_CHECK(cudaStreamWaitEvent(s, consumed_[slot], 0));
  NvtxRange r(Phase::H2D, "h2d");
  timeline_.start(b, s);
  const std::size_t bytes = fill_(b, slots_[slot].data(), s);
  timeline_.stop(b, s, bytes);
  CUDA_CHECK(cudaEventRecord(copied_[slot], s));
}

void* SlotRing::acquire(int b) {
  if (b == 0) {
    // Fork: the side streams join the compute stream's order (and an epoch capture).
    CUDA_CHECK(cudaEventRecord(fork_, compute_));
    for (const Stream& s : side_) CUDA_CHECK(cudaStreamWaitEvent(s, fork_, 0));
  }
  // Keep up to depth units in flight: b (needed now) and the next depth-1.
  const int last = std::min(units_, b + depth_);
  while (issued_ < last) issue(issued_++);
  const int slot = b % depth_;
  CUDA_CHECK(cudaStreamWaitEvent(compute_, copied_[slot], 0));
  return slots_[slot].data();
}

const std::uint8_t* SlotRing::acquire_batch(const ChunkPlan& plan, int b) {
  const int c = plan.chunk_of(b);
  if (plan.starts_chunk(b)) acquire(c);
  return static_cast<const std::uint8_t*>(slot(c)) + plan.packed_offset_in_chunk(b);
}

void SlotRing::release(int b) { CUDA_CHECK(cudaEventRecord(consumed_[b % depth_], compute_)); }

void SlotRing::end_epoch() {
  // Join: the compute stream's epoch ends after every side stream's last work.
  for (std::size_t s = 0; s < side_.size(); ++s) {
    CUDA_CHECK(cudaEventRecord(join_[s], side_[s]));
    CUDA_CHECK(cudaStreamWaitEvent(compute_, join_[s], 0));
  }
}

std::vector<Stream> make_copy_streams(int n) {
  std::vector<Stream> streams;
  for (int c = 0; c < n; ++c) {
    streams.push_back(Stream::create());
    nvtx_name_stream(streams.back(), ("copy " + std::to_string(c)).c_str());
  }
  return streams;
}

}  // namespace memstrat
