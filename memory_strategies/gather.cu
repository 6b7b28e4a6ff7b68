// gather.cu: gather_batch (gather.h).
//
// Kernel versions (one template, by the width of the copy word W):
//   gather_rows_kernel<uint4>         16-byte words: row_bytes % 16 == 0 and source and
//                                     destination images 16-byte aligned (MNIST: 784 and
//                                     3136 bytes per row both qualify)
//   gather_rows_kernel<unsigned int>  4-byte words under the same conditions for 4
//   gather_rows_kernel<unsigned char> bytewise, anything else
// One warp per row (grid-stride over rows): the lanes read consecutive words of one source
// row, so each warp load is one contiguous span of 32·W bytes: coalesced in device memory and
// full-width PCIe reads from mapped memory. Lane 0 copies the label.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.h"
#include "memory_strategies/gather.h"

namespace memstrat {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxBlocks = 1024;

template <typename W>
__global__ void gather_rows_kernel(const W* __restrict__ src,
                                   const std::int32_t* __restrict__ src_labels,
                                   std::int64_t samples, std::size_t row_words,
                                   const std::int32_t* __restrict__ index, int rows,
                                   W* __restrict__ dst, std::int32_t* __restrict__ dst_labels) {
  const int lane = threadIdx.x % 32;
  const int warp = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int warps = gridDim.x * kWarpsPerBlock;
  for (int r = warp; r < rows; r += warps) {
    const std::int32_t i = index[r];
    if (i < 0 || i >= samples) __trap();  // a corrupt order: fail loudly
    const W* from = src + static_cast<std::size_t>(i) * row_words;
    W* to = dst + static_cast<std::size_t>(r) * row_words;
    for (std::size_t k = lane; k < row_words; k += 32) to[k] = from[k];
    if (lane == 0) dst_labels[r] = src_labels[i];
  }
}

bool aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

template <typename W>
void launch(const GatherSource& src, const std::int32_t* index, int rows, void* dst_images,
            std::int32_t* dst_labels, cudaStream_t stream) {
  const int blocks = std::min(kMaxBlocks, (rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  gather_rows_kernel<W><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
      static_cast<const W*>(src.images), src.labels, src.samples, src.row_bytes / sizeof(W), index,
      rows, static_cast<W*>(dst_images), dst_labels);
  CUDA_CHECK_LAST();
}

}  // namespace

void gather_batch(const GatherSource& src, const std::int32_t* index, int rows, void* dst_images,
                  std::int32_t* dst_labels, cudaStream_t stream) {
  if (rows < 0) throw std::invalid_argument("gather_batch: negative row count");
  if (rows == 0) return;
  if (src.images == nullptr || src.labels == nullptr || index == nullptr || dst_images == nullptr ||
      dst_labels == nullptr || src.row_bytes == 0 || src.samples <= 0)
    throw std::invalid_argument("gather_batch: a null pointer or an empty source");
  auto fits = [&](std::uintptr_t w) {
    return src.row_bytes % w == 0 && aligned(src.images, w) && aligned(dst_images, w);
  };
  if (fits(16))
    launch<uint4>(src, index, rows, dst_images, dst_labels, stream);
  else if (fits(4))
    launch<unsigned int>(src, index, rows, dst_images, dst_labels, stream);
  else
    launch<unsigned char>(src, index, rows, dst_images, dst_labels, stream);
}

}  // namespace memstrat
