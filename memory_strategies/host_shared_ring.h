// host_shared_ring.h: HostSharedRingStrategy (`host-shared-ring`), the best form of `host-shared`.
// The same one portable page-locked set for every rank (HostSharedSet), each rank's region now
// holding its shard in the packed layout (one block per batch, images then labels), and each GPU
// moving it as double-buffer-graph does: a chunk of its consecutive batches (--copy-chunk MiB) is
// ONE cudaMemcpyAsync from its region, on copy stream(s) (--copy-streams), into one of K device
// chunk slots (--depth), while the compute stream runs the steps of earlier chunks
// (double_buffer_graph.h: SlotRing, launch groups, epoch capture). What it removes from
// host-shared: the step's wait for every batch's copies, and all but one copy per chunk.
// One GPU and --emulate-gpus: one region, so double-buffer-graph's data path exactly (one_gpu_as
// "double-buffer-graph"). Several GPUs run the static scenario (data_parallel_request.h).
#pragma once

#include <memory>

#include "memory_strategies/double_buffer_graph.h"
#include "memory_strategies/host_shared_set.h"

namespace memstrat {

class HostSharedRingStrategy final : public DoubleBufferGraphStrategy {
 public:
  std::string_view name() const override { return "host-shared-ring"; }

 protected:
  void attach_blocks(PackedHostBlocks& blocks, HostEpochSource& source, const HostDataset& data,
                     const StrategyOptions& opt) override;
};

}  // namespace memstrat
