// sm_copy.h: a copy issued by the SMs instead of a copy engine: a grid-stride kernel of 16-byte
// coalesced loads and stores (one warp moves 512 contiguous bytes per instruction), with enough
// blocks resident to fill every SM, so that many loads are in flight over a slow link.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace memstrat {

inline constexpr int kSmCopyThreads = 256;

/// Blocks that fill the GPU: SM count x blocks of the copy kernel resident per SM.
int sm_copy_full_grid(int device);

/// dst[0, bytes) = src[0, bytes), enqueued on `stream`. `bytes` a multiple of 16, both pointers
/// 16-byte aligned; src may be device, mapped pinned host or managed memory. Launches
/// min(max_blocks, blocks needed for one 16-byte vector per thread) blocks.
void sm_copy(void* dst, const void* src, std::size_t bytes, int max_blocks, cudaStream_t stream);

}  // namespace memstrat
