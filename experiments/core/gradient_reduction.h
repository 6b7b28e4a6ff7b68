// gradient_reduction.h: GradientReduction, how one replica of data-parallel training turns its
// shards' gradients into the summed gradient its update reads (--reduce, run_config.h):
//   emulation (one GPU, every shard in turn): each shard into its slot of a gather buffer
//     [N × count], then rank_sum in rank order;
//   exact (N GPUs): this rank's shard into its own slot, ncclAllGather in place fills the
//     others, then the same rank_sum: the same bits as the emulation on every GPU;
//   ring (N GPUs): the shard into the Mlp's own gradient buffer, then one in-place
//     ncclAllReduce (sum) per fixed bucket (GradientBuckets), in reduction order.
// Buffers are allocated once, in the constructor; combine() only enqueues on the replica's
// stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "common/cuda_raii.h"
#include "experiments/core/gradient_buckets.h"
#include "experiments/core/run_config.h"  // Reduce

struct ncclComm;  // nccl.h's communicator (ncclComm_t); only used in a build with NCCL

namespace memstrat {

class GradientReduction {
 public:
  /// `layers`: the Mlp's layer sizes; `own_grads`: the Mlp's gradient buffer (gradient_buffer(),
  /// count floats). `comm`: this rank's communicator (rank = first_shard) for several GPUs,
  /// nullptr for the emulation (local_shards == shards). Throws std::invalid_argument for a
  /// shape that is neither, std::logic_error for a communicator in a build without NCCL.
  GradientReduction(Reduce mode, const std::vector<int>& layers, int shards, int first_shard,
                    int local_shards, float* own_grads, ncclComm* comm, cudaStream_t stream);
  /// Where shard r's gradients go (first_shard <= r < first_shard + local_shards).
  float* shard_buffer(int r);
  /// Enqueue the combination of every shard's gradients into result().
  void combine();
  /// The summed gradient (valid on the stream after combine()).
  const float* result() const { return own_; }
  std::size_t count() const { return buckets_.count(); }

 private:
  Reduce mode_;
  GradientBuckets buckets_;
  int shards_, first_, local_;
  float* own_;
  ncclComm* comm_;
  cudaStream_t stream_;
  DeviceBuffer<float> gathered_;  // [shards × count]: exact and the emulation
};

}  // namespace memstrat
