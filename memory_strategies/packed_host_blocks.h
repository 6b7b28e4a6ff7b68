// packed_host_blocks.h: PackedHostBlocks, an epoch's data in page-locked host memory in the packed
// layout (batch_geometry.h: one 16-byte-aligned block per batch, its images then its labels), the
// host side of the best forms that move a batch in ONE transfer: pinned-graph and
// double-buffer-graph (one cudaMemcpyAsync per chunk of consecutive blocks, which are
// contiguous), zero-copy-staged (mapped, one SM copy per chunk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/cuda_raii.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/host_epoch_source.h"

namespace memstrat {

class PackedHostBlocks {
 public:
  /// From the strategy's attach, after source.configure: allocates the pinned storage for
  /// source's packed layout (`flags`: 0, or cudaHostAllocMapped to read it from kernels) and
  /// binds it to `source` (static data is written now).
  void attach(HostEpochSource& source, unsigned flags = 0);
  /// The same over page-locked storage that `owner` keeps alive (a region of a HostSharedSet):
  /// at least source.packed().total_bytes() bytes at `host`. Not mapped.
  void attach(HostEpochSource& source, std::uint8_t* host, std::shared_ptr<const void> owner);

  const PackedLayout& layout() const { return layout_; }
  /// Chunk k's first byte as a device address (mapped storage only; nullptr otherwise).
  const std::uint8_t* mapped_chunk(const PackedChunk& k) const;
  /// Enqueue ONE cudaMemcpyAsync of chunk k's blocks (one range) into device memory `dst` on
  /// `s`; returns its bytes.
  std::size_t copy(const PackedChunk& k, void* dst, cudaStream_t s) const;

 private:
  PackedLayout layout_;
  PinnedBuffer<std::uint8_t> own_;       // attach(source, flags)
  std::shared_ptr<const void> owner_;    // attach(source, host, owner)
  std::uint8_t* host_ = nullptr;         // the blocks, in one or the other
  const std::uint8_t* mapped_ = nullptr;  // device alias of host_ when mapped
};

}  // namespace memstrat
