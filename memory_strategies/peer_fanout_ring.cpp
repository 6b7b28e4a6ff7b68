#include "memory_strategies/peer_fanout_ring.h"

#include <stdexcept>

namespace memstrat {

namespace {
ChunkPlan plan_for(const BatchGeometry& shard, const StrategyOptions& opt) {
  return ChunkPlan::packed(shard, static_cast<std::size_t>(opt.copy_chunk_mib) << 20);
}
}  // namespace

std::uint64_t PeerFanoutRingStrategy::device_footprint(const StrategyOptions& opt,
                                                       const BatchGeometry& g) {
  if (opt.shards == 1 || opt.shard == 0) return PeerSet::shard_offsets(g, opt.shards).back();
  return static_cast<std::uint64_t>(opt.depth) *
         plan_for(PeerSet::shard_geometry(g, opt.shard, opt.shards), opt).packed_slot_bytes();
}

void PeerFanoutRingStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                                    cudaStream_t compute) {
  if (opt.scenario != Scenario::Static)  // the registry refuses it first (unsupported_with)
    throw std::invalid_argument("peer-fanout-ring runs the static scenario only");
  if (opt.depth < 2) throw std::invalid_argument("peer-fanout-ring: --depth must be >= 2");
  if (opt.copy_streams < 1)
    throw std::invalid_argument("peer-fanout-ring: --copy-streams must be >= 1");
  if (opt.copy_chunk_mib < 1)
    throw std::invalid_argument("peer-fanout-ring: --copy-chunk must be >= 1 (MiB)");
  source_.configure(data, opt, compute);
  shard_.attach(data, opt);
  if (shard_.local()) return;
  plan_ = plan_for(source_.geometry(), opt);
  ring_.allocate(opt.depth, plan_.packed_slot_bytes(), make_copy_streams(opt.copy_streams),
                 plan_.chunks(), compute, [this](int c, void* slot, cudaStream_t s) {
                   const PackedChunk k = plan_.packed_chunk(c);
                   shard_.copy(k.offset, k.bytes, slot, s);
                   return k.bytes;
                 });
}

BatchView PeerFanoutRingStrategy::acquire(int b) {
  if (shard_.local()) return source_.packed_epoch_view(shard_.blocks(), b);
  return source_.packed_slot_view(ring_.acquire_batch(plan_, b), b);
}

StrategyStats PeerFanoutRingStrategy::stats() const {
  StrategyStats s;
  if (shard_.local()) return s;  // read in place: nothing moves
  s.peer_bytes = plan_.packed_epoch_bytes();
  s.copy_ms = ring_.copy_ms();
  return s;
}

}  // namespace memstrat
