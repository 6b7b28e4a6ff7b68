#include "memory_strategies/double_buffer.h"

#include <algorithm>
#include <stdexcept>

#include "common/nvtx.h"
#include "memory_strategies/slot_ring.h"  // make_copy_streams

namespace memstrat {

std::uint64_t DoubleBufferStrategy::device_footprint(const StrategyOptions& opt,
                                                    const BatchGeometry& g) {
  return static_cast<std::uint64_t>(opt.depth) * g.bytes(0);  // --depth device batch slots
}

void DoubleBufferStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                  cudaStream_t compute) {
  if (opt.depth < 2) throw std::invalid_argument("double-buffer: --depth must be >= 2");
  if (opt.copy_streams < 1) throw std::invalid_argument("double-buffer: --copy-streams must be >= 1");
  source_.configure(data, opt, compute);
  const BatchGeometry& g = source_.geometry();
  depth_ = opt.depth;
  for (int k = 0; k < depth_; ++k) {
    slot_images_.emplace_back(g.image_bytes(0));
    slot_labels_.emplace_back(static_cast<std::size_t>(g.rows(0)));
    copied_.push_back(Event::create_sync_only());
    consumed_.push_back(Event::create_sync_only());
  }
  consumed_recorded_.assign(static_cast<std::size_t>(depth_), 0);
  copy_streams_ = make_copy_streams(opt.copy_streams);
  timeline_.allocate(g.batches());
  if (opt.scenario == Scenario::Stream) {
    host_slots_.attach(data, opt, SlotKind::Pinned, "double-buffer");
    return;
  }
  host_images_ = PinnedBuffer<std::uint8_t>(source_.image_bytes());
  host_labels_ = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()));
  source_.bind(host_images_.data(), host_labels_.data());
}

void DoubleBufferStrategy::begin_epoch(int epoch) {
  // The previous epoch has finished on the GPU (the trainer synchronises between epochs), so
  // the host copy may be rewritten and no slot is in use.
  if (host_slots_.attached()) host_slots_.begin_epoch(epoch);
  source_.begin_epoch(epoch);
  timeline_.begin_epoch();
  issued_ = 0;
}

cudaStream_t DoubleBufferStrategy::issue_copy(int b, const std::uint8_t* images,
                                              const std::int32_t* labels) {
  const BatchGeometry& g = source_.geometry();
  const int slot = b % depth_;
  cudaStream_t s = copy_streams_[static_cast<std::size_t>(b) % copy_streams_.size()];
  // Wait until the step that last read this slot is done (recorded in release()).
  if (consumed_recorded_[slot]) CUDA_CHECK(cudaStreamWaitEvent(s, consumed_[slot], 0));
  NvtxRange r(Phase::H2D, "h2d");
  timeline_.start(b, s);
  CUDA_CHECK(cudaMemcpyAsync(slot_images_[slot].data(), images, g.image_bytes(b),
                             cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaMemcpyAsync(slot_labels_[slot].data(), labels, g.label_bytes(b),
                             cudaMemcpyHostToDevice, s));
  timeline_.stop(b, s, g.bytes(b));
  CUDA_CHECK(cudaEventRecord(copied_[slot], s));
  return s;
}

BatchView DoubleBufferStrategy::acquire(int b) {
  if (host_slots_.attached()) {
    // Only batch b is certain to exist: copying ahead would make this acquire wait for batches
    // the workers have not made yet. The host runs ahead of the GPU, so this copy still
    // overlaps the step of the batch before.
    const int h = host_slots_.take(b);
    const std::uint8_t* images = host_slots_.host(h);
    cudaStream_t s = issue_copy(
        b, images, reinterpret_cast<const std::int32_t*>(images + host_slots_.label_offset()));
    host_slots_.release_after(h, s);  // after its copies, on their stream
    issued_ = b + 1;
  } else {
    // Keep up to depth batches in flight: b (needed now) and the next depth-1.
    const BatchGeometry& g = source_.geometry();
    const int last = std::min(g.batches(), b + depth_);
    for (; issued_ < last; ++issued_)
      issue_copy(issued_, host_images_.data() + g.image_offset(issued_),
                 host_labels_.data() + g.first(issued_));
  }
  const int slot = b % depth_;
  CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), copied_[slot], 0));
  return source_.slot_view(slot_images_[slot].data(), slot_labels_[slot].data(), b);
}

StrategyStats DoubleBufferStrategy::stats() const {
  StrategyStats s = timeline_.stats();
  if (host_slots_.attached()) s.producer = host_slots_.stats();
  return s;
}

void DoubleBufferStrategy::release(int b) {
  const int slot = b % depth_;
  CUDA_CHECK(cudaEventRecord(consumed_[slot], source_.compute()));
  consumed_recorded_[slot] = 1;
}

}  // namespace memstrat
