// pinned.h: PinnedStrategy (`pinned`): data in page-locked host memory (cudaMallocHost), one
// cudaMemcpyAsync DMA per batch on the compute stream (fast copies, but no overlap). Those copies
// can be captured: asked for (--launch-form graph), the whole epoch, copies and steps, replays as
// one CUDA graph.
#pragma once

#include "memory_strategies/copy_on_compute.h"

namespace memstrat {

// Not final: host-shared is pinned's data path with its host memory a region of one set shared by
// every GPU (host_shared.h).
class PinnedStrategy : public CopyOnComputeStream {
 public:
  std::string_view name() const override { return "pinned"; }

 protected:
  void allocate_host(std::size_t image_bytes, std::size_t samples, void** images,
                     std::int32_t** labels) override;
  SlotKind slot_kind() const override { return SlotKind::Pinned; }
  bool copies_capturable() const override { return true; }

 private:
  PinnedBuffer<std::uint8_t> images_;
  PinnedBuffer<std::int32_t> labels_;
};

}  // namespace memstrat
