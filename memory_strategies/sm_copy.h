// sm_copy.h: SmCopy, a copy done by the SMs instead of a copy engine: a grid-stride kernel that
// reads `bytes` from any device-visible source (device memory, mapped pinned host memory,
// managed memory) once, with the widest loads the two addresses allow (16-byte vectors when
// both are 16-byte aligned), and writes them to device memory. Reading mapped host memory this
// way turns scattered PCIe reads into full, coalesced 16-byte requests, many in flight at once.
// plan_sm_copy says how a copy is split (a pure function, tested on the CPU).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace memstrat {

/// How one copy is split: `head` single bytes up to the destination's first `width`-aligned
/// address, `body` elements of `width` bytes (both addresses aligned to width there), `tail`
/// single bytes after them. width is the largest of 16, 8, 4, 2, 1 at which dst and src have the
/// same misalignment; head, tail < width.
struct SmCopyPlan {
  std::size_t width = 1;
  std::size_t head = 0;
  std::size_t body = 0;
  std::size_t tail = 0;
};
SmCopyPlan plan_sm_copy(const void* dst, const void* src, std::size_t bytes);

class SmCopy {
 public:
  static constexpr int kThreads = 256;
  /// Not usable until created for a device.
  SmCopy() = default;
  /// For the current device: the grid is as many blocks of the 16-byte kernel as fit on all its
  /// SMs at once (occupancy), so a large copy keeps every SM's load units busy; max_blocks > 0
  /// caps it: a copy that runs beside another kernel in the block slots that kernel leaves free
  /// (StepLauncher's free_blocks). Loads the kernels now (set-up), not at the first copy.
  static SmCopy create(int max_blocks = 0);

  /// Enqueue the copy of [src, src + bytes) to [dst, dst + bytes) on `stream`: one kernel
  /// launch, none for 0 bytes. src: device-readable; dst: device memory; no overlap. The grid
  /// is the smaller of what fills the GPU and what the copy needs (one element per thread).
  void operator()(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) const;

  /// The most blocks one copy launches.
  int max_blocks() const { return max_blocks_; }

 private:
  int max_blocks_ = 0;
};

}  // namespace memstrat
