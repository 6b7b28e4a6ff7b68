// grid_stride.cuh: the launch shape shared by the grid-stride elementwise kernels
// (normalize_u8.cu, epilogue.cu, layerwise/sgd_update.cu): 256-thread blocks, at most 4096
// blocks, every thread stepping by the whole grid; and the pointer-alignment test that picks
// their float4 versions.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace memstrat::kernels::grid_stride {

inline constexpr int kThreads = 256;
inline constexpr std::size_t kMaxBlocks = 4096;  // grid-stride beyond this

inline unsigned blocks_for(std::size_t work) {
  return static_cast<unsigned>(std::min<std::size_t>((work + kThreads - 1) / kThreads, kMaxBlocks));
}

inline bool aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

}  // namespace memstrat::kernels::grid_stride
