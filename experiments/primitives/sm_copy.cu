#include "experiments/primitives/sm_copy.h"

#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.h"

namespace memstrat {

namespace {
__global__ void __launch_bounds__(kSmCopyThreads)
    sm_copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, std::size_t vectors) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += stride)
    dst[i] = src[i];
}
}  // namespace

int sm_copy_full_grid(int device) {
  int sms = 0, per_sm = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sm_copy_kernel, kSmCopyThreads, 0));
  return std::max(1, sms * per_sm);
}

void sm_copy(void* dst, const void* src, std::size_t bytes, int max_blocks, cudaStream_t stream) {
  if (bytes % sizeof(uint4) != 0)
    throw std::invalid_argument("sm_copy: size must be a multiple of 16 bytes");
  const std::size_t vectors = bytes / sizeof(uint4);
  if (vectors == 0) return;
  const std::size_t needed = (vectors + kSmCopyThreads - 1) / kSmCopyThreads;
  const int blocks =
      static_cast<int>(std::min<std::size_t>(needed, static_cast<std::size_t>(max_blocks)));
  sm_copy_kernel<<<blocks, kSmCopyThreads, 0, stream>>>(static_cast<uint4*>(dst),
                                                        static_cast<const uint4*>(src), vectors);
  CUDA_CHECK_LAST();
}

}  // namespace memstrat
