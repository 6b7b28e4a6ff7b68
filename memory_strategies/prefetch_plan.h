// prefetch_plan.h: PrefetchPlan, how a managed-memory strategy splits an epoch into prefetches.
// A chunk is a run of whole batches; prefetching it is one cudaMemPrefetchAsync of its images
// and one of its labels (the split layout's two arrays). Chunks are whole batches so that the
// compute stream can wait for "the chunk that holds batch b" with one event.
//   per_batch  one batch per chunk (um-prefetch, um-advise)
//   coarse     as many whole batches as fit in a byte budget, at least one (um-prefetch-coarse)
#pragma once

#include <cstddef>
#include <cstdint>

#include "memory_strategies/batch_geometry.h"

namespace memstrat {

/// One prefetch: batches [first_batch, end_batch), as byte ranges of the two arrays.
struct PrefetchChunk {
  int first_batch = 0;
  int end_batch = 0;
  std::size_t image_offset = 0;  // bytes into the images array
  std::size_t image_bytes = 0;
  std::size_t label_offset = 0;  // bytes into the labels array
  std::size_t label_bytes = 0;
  std::uint64_t bytes() const { return image_bytes + label_bytes; }
};

/// A run of consecutive data-set rows [first, first + count).
struct RowRun {
  std::int32_t first = 0;
  std::int32_t count = 0;
};
/// The rows a gathered batch reads, as runs of consecutive indices: rows[0..n) copied into
/// `sorted` (room for n) and sorted, then merged; the runs go to `runs` (room for n) and their
/// number is returned. One prefetch per run is what a managed strategy issues to move a
/// scattered batch ahead of its gather. No allocation.
int row_runs(const std::int32_t* rows, int n, std::int32_t* sorted, RowRun* runs);

class PrefetchPlan {
 public:
  /// One chunk per batch.
  static PrefetchPlan per_batch(const BatchGeometry& g) { return PrefetchPlan(g, 1); }
  /// floor(chunk_bytes / bytes of a full batch) batches per chunk, at least one: no chunk but a
  /// single-batch one exceeds chunk_bytes. chunk_bytes must be > 0.
  static PrefetchPlan coarse(const BatchGeometry& g, std::size_t chunk_bytes);

  int chunks() const { return batch_count(g_.batches(), per_); }
  int batches_per_chunk() const { return per_; }
  int chunk_of(int b) const { return b / per_; }
  /// Batch b is the first of its chunk: where the compute stream waits for that chunk.
  bool starts_chunk(int b) const { return b % per_ == 0; }
  PrefetchChunk chunk(int c) const;
  /// Sum of every chunk's bytes: the whole epoch, images and labels.
  std::uint64_t epoch_bytes() const;

 private:
  PrefetchPlan(const BatchGeometry& g, int per) : g_(g), per_(per) {}
  BatchGeometry g_;
  int per_ = 1;
};

}  // namespace memstrat
