// host_shared.h: HostSharedStrategy (`host-shared`), the naive form of the host-shared data path
// of data-parallel training on several GPUs (--gpus N): the training set in ONE page-locked host
// allocation, portable to every GPU's context (HostSharedSet), each rank's shard a region of it
// that the rank's epoch writer fills, and each GPU's copy engine copying its batch from there
// with pinned's copies (cudaMemcpyAsync of the images and of the labels on its compute stream,
// into one device batch buffer, before the step; no overlap). What it measures against `pinned`
// run per GPU (N allocations, one per rank): the N copy engines pulling from ONE host allocation,
// on one host memory node, at once; the set is held once in host memory.
// One GPU and --emulate-gpus: one region, so pinned's data path exactly (one_gpu_as "pinned"):
// the emulation is the reference the several-GPU run is held to bitwise, and it must run the
// same strategy. The stream scenario's host slots are pinned's (stream_slots.h); several GPUs run
// the static scenario (data_parallel_request.h).
#pragma once

#include <memory>

#include "memory_strategies/host_shared_set.h"
#include "memory_strategies/pinned.h"

namespace memstrat {

/// PinnedStrategy with its host memory a region of the run's shared set (allocate_host); the
/// copies, slots and forms are pinned's.
class HostSharedStrategy final : public PinnedStrategy {
 public:
  std::string_view name() const override { return "host-shared"; }
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;

 protected:
  void allocate_host(std::size_t image_bytes, std::size_t samples, void** images,
                     std::int32_t** labels) override;

 private:
  const HostDataset* data_ = nullptr;  // attach only
  StrategyOptions opt_;
  std::shared_ptr<HostSharedSet> set_;
};

}  // namespace memstrat
