// chunk_plan.h: ChunkPlan, how a strategy splits an epoch into transfer units of whole batches
// (chunks), so that one call moves many batches and the compute stream waits for "the chunk that
// holds batch b" with one event. The plan says which batches a chunk holds; the layout says what
// moving it takes:
//   split   (BatchGeometry) a chunk is two byte ranges, its images and its labels: two
//           cudaMemPrefetchAsync calls (um-prefetch, um-advise: one batch per chunk;
//           um-prefetch-coarse: --prefetch-chunk MiB)
//   packed  (PackedLayout) the blocks of consecutive batches are contiguous, so a chunk is ONE
//           byte range: one cudaMemcpyAsync (pinned-graph, double-buffer-graph: --copy-chunk MiB)
// Every chunk but the last holds the same number of whole batches; the last may hold fewer, and
// the epoch's last batch may be partial.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memory_strategies/batch_geometry.h"

namespace memstrat {

/// Chunk of batches [first_batch, end_batch) in the split layout, as byte ranges of its arrays.
struct SplitChunk {
  int first_batch = 0;
  int end_batch = 0;
  std::size_t image_offset = 0;  // bytes into the images array
  std::size_t image_bytes = 0;
  std::size_t label_offset = 0;  // bytes into the labels array
  std::size_t label_bytes = 0;
  std::uint64_t bytes() const { return image_bytes + label_bytes; }
};

/// Chunk of batches [first_batch, end_batch) in the packed layout: one range from the start of
/// its first block to the end of its last. Besides the images and labels it holds each block's gap
/// before its labels and the tail of every block but the last up to the block stride (the 16-byte
/// packing padding; none for MNIST at batch sizes that are multiples of 4).
struct PackedChunk {
  int first_batch = 0;
  int end_batch = 0;
  std::size_t offset = 0;  // bytes into the packed storage
  std::size_t bytes = 0;
};

class ChunkPlan {
 public:
  /// An empty plan (no batch): what a strategy holds before attach.
  ChunkPlan() = default;
  /// One chunk per batch.
  static ChunkPlan per_batch(const BatchGeometry& g) { return ChunkPlan(g, 1); }
  /// As many whole batches as fit in chunk_bytes, at least one, at most the epoch: for the split
  /// layout a batch is its images and labels; for the packed one a block stride. chunk_bytes
  /// must be > 0; no chunk but a single-batch one exceeds it.
  static ChunkPlan split(const BatchGeometry& g, std::size_t chunk_bytes);
  static ChunkPlan packed(const BatchGeometry& g, std::size_t chunk_bytes);

  int chunks() const { return batch_count(g_.batches(), per_); }
  int batches_per_chunk() const { return per_; }
  int chunk_of(int b) const { return b / per_; }
  /// Batch b is the first of its chunk: where the compute stream waits for that chunk.
  bool starts_chunk(int b) const { return b % per_ == 0; }
  /// Batch b is the last of its chunk: after its step, nothing reads the chunk any more.
  bool ends_chunk(int b) const { return b + 1 == end_batch(chunk_of(b)); }
  int first_batch(int c) const { return c * per_; }
  int end_batch(int c) const;
  /// Samples (rows) in chunk c: the sum of its batches' rows.
  std::int64_t rows(int c) const;

  SplitChunk split_chunk(int c) const;
  /// Sum of every split chunk's bytes: the whole epoch, images and labels.
  std::uint64_t split_epoch_bytes() const;

  PackedChunk packed_chunk(int c) const;
  /// Sum of every packed chunk's bytes: what one copy per chunk moves in an epoch.
  std::uint64_t packed_epoch_bytes() const;
  /// Room for the largest packed chunk (chunk 0: full batches, or the whole epoch): the size of a
  /// device slot that holds one chunk.
  std::size_t packed_slot_bytes() const;
  /// Where batch b's block starts in a slot that holds its chunk (a multiple of the block stride,
  /// so 16-byte aligned in a 16-byte-aligned slot).
  std::size_t packed_offset_in_chunk(int b) const;

 private:
  ChunkPlan(const BatchGeometry& g, int per) : g_(g), per_(per) {}
  static ChunkPlan whole_batches(const BatchGeometry& g, std::uint64_t batch_bytes,
                                 std::size_t chunk_bytes);
  PackedLayout layout() const { return PackedLayout{g_}; }
  BatchGeometry g_{0, 1, 0};
  int per_ = 1;
};

}  // namespace memstrat
