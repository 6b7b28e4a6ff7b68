// batch_geometry.h: where batch b sits in one epoch's data, in the two host layouts a strategy
// can choose:
//   split  (BatchGeometry) all images in sample order, then, in a separate array, all labels:
//          a batch is two ranges, so moving it takes two copies.
//   packed (PackedLayout)  per batch one block: its images, then its labels, each part starting
//          on a 16-byte boundary, blocks kAlign-aligned: a batch is one range, one copy.
// Both hold exactly the same bytes per batch (EpochWriter writes either).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace memstrat {

/// Number of batches of `batch` rows over n samples (the last one may be partial).
inline int batch_count(std::int64_t n, int batch) {
  return static_cast<int>((n + batch - 1) / batch);
}

/// Where batch b sits in an epoch's contiguous sample order (the split layout).
struct BatchGeometry {
  std::int64_t samples = 0;
  int batch = 0;
  std::size_t image_bytes_per_sample = 0;
  int batches() const { return batch_count(samples, batch); }
  std::int64_t first(int b) const { return static_cast<std::int64_t>(b) * batch; }
  int rows(int b) const {
    return static_cast<int>(std::min<std::int64_t>(batch, samples - first(b)));
  }
  std::size_t image_offset(int b) const { return first(b) * image_bytes_per_sample; }
  std::size_t image_bytes(int b) const { return rows(b) * image_bytes_per_sample; }
  std::size_t label_bytes(int b) const { return rows(b) * sizeof(std::int32_t); }
  /// What one explicit copy of batch b moves: its images plus its labels.
  std::uint64_t bytes(int b) const { return image_bytes(b) + label_bytes(b); }
  /// Every sample's image, of `row_bytes` bytes, and label: a whole set or epoch in one format.
  std::uint64_t labelled_bytes(std::size_t row_bytes) const {
    return static_cast<std::uint64_t>(samples) * (row_bytes + sizeof(std::int32_t));
  }
  /// The whole epoch as the batches hold it: every image in this geometry's format, every label.
  std::uint64_t epoch_bytes() const { return labelled_bytes(image_bytes_per_sample); }
};

/// The packed layout: block b = [images of batch b][gap to kAlign][labels of batch b]. Every
/// block starts at a multiple of kAlign from the start of the storage, so a kAlign-aligned
/// allocation (every CUDA allocation is) gives 16-byte-aligned images and labels for every
/// batch, whatever the batch size: a copy kernel can move any block with 16-byte loads.
struct PackedLayout {
  static constexpr std::size_t kAlign = 16;
  static std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

  BatchGeometry geom;

  /// Offset of batch b's labels inside its block: right after its images, rounded up to kAlign
  /// (no gap for MNIST: 784 B and 3136 B per sample are multiples of 16).
  std::size_t label_offset(int b) const { return align_up(geom.image_bytes(b)); }
  /// What one copy of block b moves: images, the gap (if any), labels.
  std::size_t block_bytes(int b) const { return label_offset(b) + geom.label_bytes(b); }
  /// Room for the largest block (batch 0 is always full-size or the only batch): the distance
  /// between consecutive blocks and the size of a device slot that holds one.
  std::size_t block_stride() const { return geom.batches() == 0 ? 0 : align_up(block_bytes(0)); }
  std::size_t block_offset(int b) const { return static_cast<std::size_t>(b) * block_stride(); }
  /// Bytes of the whole epoch in this layout (the host allocation).
  std::size_t total_bytes() const {
    const int last = geom.batches() - 1;
    return last < 0 ? 0 : block_offset(last) + align_up(block_bytes(last));
  }
  /// Sum of block_bytes over the epoch: what one copy per batch moves in an epoch.
  std::uint64_t epoch_bytes() const {
    std::uint64_t s = 0;
    for (int b = 0; b < geom.batches(); ++b) s += block_bytes(b);
    return s;
  }
};

}  // namespace memstrat
