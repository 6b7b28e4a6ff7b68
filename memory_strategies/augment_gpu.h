// augment_gpu.h: gather_augment, the GPU form of write_rows (epoch_data.h) for a training set the
// GPU can address: one kernel on the caller's stream reads the uint8 source rows an index list
// names (the epoch's order), augments each sample (augment.h, keyed by (seed, epoch, row of the
// epoch)) and writes the batch in the transfer format (uint8, or float normalised as
// kernels::normalize_pixel does), with its labels. Same bytes as the host path, by construction
// (one source of arithmetic: augment_math.h) and by test (tests/gpu/test_augment_gpu.cu).
// augment_in_place is its form for a batch a copy brought to device memory raw: the copying
// strategies' GPU augmentation (augment_after_copy.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "memory_strategies/augment.h"
#include "memory_strategies/gather.h"           // GatherSource
#include "memory_strategies/memory_strategy.h"  // Transfer

namespace memstrat {

/// What the rows of one gather_augment are: their augmentation and its key, their position in
/// the epoch (row r of the call is row first_row + r of the epoch: its key's index) and the
/// format they are written in. `image_rows` x `image_cols` is the image shape (source rows hold
/// image_rows·image_cols uint8 pixels).
struct AugmentRows {
  Augment augment = Augment::None;
  std::uint64_t seed = 0;
  int epoch = 0;
  std::int64_t first_row = 0;
  int image_rows = 0;
  int image_cols = 0;
  Transfer transfer = Transfer::U8;
  /// When set (device-addressable), the key's epoch is read from here instead of `epoch`: work
  /// captured in a graph then augments each replay's epoch, which the replay uploaded.
  const std::int32_t* epoch_on_device = nullptr;
};

/// Enqueues on `stream`: for r in [0, rows), images row r = augment_image(a.augment, source row
/// index[r], key (a.seed, a.epoch, a.first_row + r)) in a.transfer's format, and labels[r] =
/// source labels[index[r]]. `src` holds uint8 images (row_bytes = image_rows·image_cols) in
/// memory the device can address; `index` (rows entries, device-addressable) must hold values in
/// [0, src.samples): the kernel traps on any other (as gather_batch). dst must not overlap the
/// source. Throws std::invalid_argument for a null pointer, an empty source or a shape that
/// disagrees with src.row_bytes.
void gather_augment(const GatherSource& src, const std::int32_t* index, int rows,
                    const AugmentRows& a, void* dst_images, std::int32_t* dst_labels,
                    cudaStream_t stream);

/// Enqueues on `stream`: the `rows` images at `images` (device memory, a.transfer's format, row r
/// the epoch's row a.first_row + r) replaced by augment_image(a.augment, that image, key (a.seed,
/// a.epoch, a.first_row + r)): the bytes write_rows writes for those rows, where the copy brought
/// them raw (augment_after_copy.h). An f32 row must hold normalize_pixel values (the host writes
/// no other). Nothing to do for Augment::None. Throws std::invalid_argument for a null batch or an
/// empty image shape.
void augment_in_place(void* images, int rows, const AugmentRows& a, cudaStream_t stream);

}  // namespace memstrat
