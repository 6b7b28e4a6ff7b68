#include "experiments/core/gradient_reduction.h"

#include <stdexcept>
#include <string>

#include "common/nccl_comm.h"
#include "common/nvtx.h"
#include "kernels/common/rank_sum.h"

namespace memstrat {

GradientReduction::GradientReduction(Reduce mode, const std::vector<int>& layers, int shards,
                                     int first_shard, int local_shards, float* own_grads,
                                     ncclComm* comm, cudaStream_t stream)
    : mode_(mode),
      buckets_(layers),
      shards_(shards),
      first_(first_shard),
      local_(local_shards),
      own_(own_grads),
      comm_(comm),
      stream_(stream) {
  const bool emulation = comm == nullptr && local_shards == shards && first_shard == 0;
  const bool rank = comm != nullptr && local_shards == 1 && first_shard >= 0 && first_shard < shards;
  if (shards < 1 || !(emulation || rank))
    throw std::invalid_argument("GradientReduction: a replica computes every shard (no "
                                "communicator) or one shard per rank (with one)");
  if (emulation && mode == Reduce::Ring)
    throw std::invalid_argument("GradientReduction: the emulation sums in rank order (exact)");
  if (comm != nullptr && !kHaveNccl)
    throw std::logic_error("GradientReduction: a communicator in a build without NCCL");
  if (mode == Reduce::Exact)
    gathered_ = DeviceBuffer<float>(static_cast<std::size_t>(shards) * count());
}

float* GradientReduction::shard_buffer(int r) {
  if (r < first_ || r >= first_ + local_)
    throw std::out_of_range("GradientReduction: shard " + std::to_string(r) + " is not this replica's");
  if (mode_ == Reduce::Ring) return own_;
  return gathered_.data() + static_cast<std::size_t>(r) * count();
}

void GradientReduction::combine() {
  NvtxRange range(Phase::Update, mode_ == Reduce::Ring ? "all-reduce" : "gather + rank sum");
#if MEMSTRAT_HAVE_NCCL
  if (comm_ != nullptr && mode_ == Reduce::Exact) {
    // In place: this rank's slot is the send buffer, every slot the receive buffer.
    float* slot = gathered_.data() + static_cast<std::size_t>(first_) * count();
    NCCL_CHECK(ncclAllGather(slot, gathered_.data(), count(), ncclFloat, comm_, stream_));
  }
  if (comm_ != nullptr && mode_ == Reduce::Ring) {
    for (const GradientBucket& b : buckets_.buckets())
      NCCL_CHECK(ncclAllReduce(own_ + b.begin, own_ + b.begin, b.size(), ncclFloat, ncclSum, comm_,
                               stream_));
    return;
  }
#endif
  kernels::rank_sum(gathered_.data(), shards_, count(), own_, stream_);
}

}  // namespace memstrat
