// gather.h: gather_batch, the GPU side of a shuffled epoch for strategies whose data set the
// GPU can address (resident: device memory; zero-copy: mapped host memory; um family: managed
// memory): a kernel on the caller's stream copies the rows named by an index list into one
// contiguous batch (images in the transfer format, labels), so the MLP reads a dense batch
// whatever the order. It moves bytes only: augmentation stays on the host (batch_producer.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace memstrat {

/// The data set a gather reads: `samples` rows of `row_bytes` (features, or 4·features for
/// f32) and their labels, in memory the device can address (device, mapped or managed).
struct GatherSource {
  const void* images = nullptr;
  const std::int32_t* labels = nullptr;
  std::int64_t samples = 0;
  std::size_t row_bytes = 0;
};

/// Enqueues on `stream`: for r in [0, rows), images row r = source row index[r] and
/// labels[r] = source labels[index[r]]. `index` (rows entries, device-addressable; typically
/// the epoch's order, uploaded once per epoch, plus b·batch) must hold values in
/// [0, samples): the kernel traps on any other value (a sticky launch failure, never a silent
/// read of other memory). dst must not overlap the source. 16-byte vector copies when the
/// row size and all three image pointers allow it, else 4-byte, else bytewise.
void gather_batch(const GatherSource& src, const std::int32_t* index, int rows, void* dst_images,
                  std::int32_t* dst_labels, cudaStream_t stream);

}  // namespace memstrat
