#include "memory_strategies/peer_set.h"

#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "common/nvtx.h"
#include "common/peer_access.h"
#include "memory_strategies/epoch_data.h"  // shard_rows, transfer_bytes_per_sample
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/replica_group.h"

namespace memstrat {

BatchGeometry PeerSet::shard_geometry(const BatchGeometry& g, int shard, int shards) {
  return BatchGeometry{shard_rows(g.samples, g.batch, shard, shards), g.batch,
                       g.image_bytes_per_sample};
}

std::vector<std::uint64_t> PeerSet::shard_offsets(const BatchGeometry& g, int shards) {
  if (shards < 1) throw std::invalid_argument("PeerSet: shards must be >= 1");
  std::vector<std::uint64_t> off{0};
  for (int r = 0; r < shards; ++r)  // total_bytes is a multiple of kAlign: every start stays one
    off.push_back(off.back() + PackedLayout{shard_geometry(g, r, shards)}.total_bytes());
  return off;
}

std::shared_ptr<const PeerSet> PeerSet::for_rank(const HostDataset& data,
                                                 const StrategyOptions& opt) {
  if (opt.group == nullptr) {
    if (opt.shards != 1)
      throw std::invalid_argument("PeerSet: a shard of several (--gpus N) needs the run's "
                                  "ReplicaGroup (StrategyOptions::group)");
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    return std::make_shared<const PeerSet>(data, opt, 1, device);
  }
  ReplicaGroup& g = *opt.group;
  if (g.ranks() != opt.shards)
    throw std::invalid_argument("PeerSet: the group has " + std::to_string(g.ranks()) +
                                " ranks, the options " + std::to_string(opt.shards) + " shards");
  return g.shared<PeerSet>(
      [&] { return std::make_shared<PeerSet>(data, opt, g.ranks(), g.device(0)); });
}

PeerSet::PeerSet(const HostDataset& data, const StrategyOptions& opt, int shards, int device)
    : device_(device) {
  CurrentDevice on(device);
  NvtxRange r(Phase::H2D, "h2d");
  std::vector<HostEpochSource> sources(static_cast<std::size_t>(shards));
  Stream upload = Stream::create();
  for (int s = 0; s < shards; ++s) {
    StrategyOptions o = opt;
    o.shard = s;
    o.shards = shards;
    o.group = nullptr;
    sources[static_cast<std::size_t>(s)].configure(data, o, upload);
  }
  offsets_ = shard_offsets(BatchGeometry{data.n_train(), opt.batch,
                                         transfer_bytes_per_sample(data.features(), opt.transfer)},
                           shards);
  for (int s = 0; s < shards; ++s)  // the layout the writer writes is the one the offsets assume
    if (sources[static_cast<std::size_t>(s)].packed().total_bytes() !=
        offsets_[static_cast<std::size_t>(s) + 1] - offsets_[static_cast<std::size_t>(s)])
      throw std::logic_error("PeerSet: shard " + std::to_string(s) + "'s layout disagrees");
  PinnedBuffer<std::uint8_t> staging(bytes());  // set-up only: freed when the upload is done
  for (int s = 0; s < shards; ++s)  // static data: written at bind
    sources[static_cast<std::size_t>(s)].bind_packed(staging.data() +
                                                     offsets_[static_cast<std::size_t>(s)]);
  blocks_ = DeviceBuffer<std::uint8_t>(bytes());
  CUDA_CHECK(cudaMemcpyAsync(blocks_.data(), staging.data(), bytes(), cudaMemcpyHostToDevice,
                             upload));
  CUDA_CHECK(cudaStreamSynchronize(upload));
}

}  // namespace memstrat

namespace memstrat {

PeerSet::~PeerSet() {
  int before = 0;
  CUDA_CHECK_NOTHROW(cudaGetDevice(&before));
  CUDA_CHECK_NOTHROW(cudaSetDevice(device_));
  blocks_.reset();
  CUDA_CHECK_NOTHROW(cudaSetDevice(before));
}

void PeerShard::attach(const HostDataset& data, const StrategyOptions& opt) {
  CUDA_CHECK(cudaGetDevice(&device_));
  shard_ = opt.shard;
  set_ = PeerSet::for_rank(data, opt);
  local_ = set_->device() == device_;
  if (!local_) access_ = PeerAccess::enable(device_, set_->device());
}

void PeerShard::copy(std::size_t offset, std::size_t bytes, void* dst, cudaStream_t s) const {
  CUDA_CHECK(cudaMemcpyPeerAsync(dst, device_, blocks() + offset, set_->device(), bytes, s));
}

}  // namespace memstrat
