#include "memory_strategies/peer_fanout.h"

#include <stdexcept>

#include "common/nvtx.h"

namespace memstrat {

std::uint64_t PeerFanoutStrategy::device_footprint(const StrategyOptions& opt,
                                                   const BatchGeometry& g) {
  if (opt.shards == 1 || opt.shard == 0) return PeerSet::shard_offsets(g, opt.shards).back();
  return PackedLayout{PeerSet::shard_geometry(g, opt.shard, opt.shards)}.block_stride();
}

void PeerFanoutStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                cudaStream_t compute) {
  if (opt.scenario != Scenario::Static)  // the registry refuses it first (unsupported_with)
    throw std::invalid_argument("peer-fanout runs the static scenario only");
  source_.configure(data, opt, compute);
  shard_.attach(data, opt);
  if (shard_.local()) return;
  slot_ = DeviceBuffer<std::uint8_t>(source_.packed().block_stride());
  read_ = SmCopy::create();  // this rank's GPU (current here); loads its kernels now
  timeline_.allocate(source_.geometry().batches());
}

BatchView PeerFanoutStrategy::acquire(int b) {
  if (shard_.local()) return source_.packed_epoch_view(shard_.blocks(), b);
  // One slot: the compute stream orders this read after the previous step that read it. The SMs
  // of this GPU read rank 0's memory over peer access (peer_fanout.h says why not a copy engine).
  const PackedLayout layout = source_.packed();
  cudaStream_t compute = source_.compute();
  NvtxRange r(Phase::H2D, "peer");
  timeline_.start(b, compute);
  read_(slot_.data(), shard_.blocks() + layout.block_offset(b), layout.block_bytes(b), compute);
  timeline_.stop(b, compute, layout.block_bytes(b));
  return source_.packed_slot_view(slot_.data(), b);
}

StrategyStats PeerFanoutStrategy::stats() const {
  StrategyStats s = timeline_.stats();  // nothing recorded in place: no bytes, no copy time
  s.peer_bytes = s.h2d_bytes;           // the timeline's bytes are peer copies here
  s.h2d_bytes = 0;
  return s;
}

}  // namespace memstrat
