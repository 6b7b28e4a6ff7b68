// sm_copy.cu: the SM copy kernel and its launcher.
//
// One kernel per load width (16, 8, 4, 2, 1 bytes), chosen by plan_sm_copy from the two
// addresses. Each thread of the grid-stride loop issues kUnroll independent loads before it
// stores any of them, so a large copy keeps kUnroll x 16 B per thread in flight (what hides the
// ~microsecond latency of a read that crosses PCIe); consecutive threads read consecutive
// elements, so every warp's request is one contiguous 512 B run. The loads are streaming
// (__ldcs, evict-first): the source is read exactly once. The stores are ordinary, so the
// destination stays in L2 for whatever reads it next.
#include "memory_strategies/sm_copy.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.h"

namespace memstrat {

namespace {

constexpr int kUnroll = 4;

template <typename T>
__global__ void __launch_bounds__(SmCopy::kThreads)
    sm_copy_kernel(unsigned char* __restrict__ dst, const unsigned char* __restrict__ src,
                   std::size_t head, std::size_t body, std::size_t tail) {
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  T* d = reinterpret_cast<T*>(dst + head);
  const T* s = reinterpret_cast<const T*>(src + head);
  std::size_t i = tid;
  for (; i + (kUnroll - 1) * stride < body; i += kUnroll * stride) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(s + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * stride] = v[u];
  }
  for (; i < body; i += stride) d[i] = __ldcs(s + i);
  // Fewer than sizeof(T) bytes each side of the body: one byte per thread of the first block.
  if (tid < head) dst[tid] = src[tid];
  if (tid < tail) {
    const std::size_t o = head + body * sizeof(T) + tid;
    dst[o] = src[o];
  }
}

template <typename T>
void launch(const SmCopyPlan& p, int max_blocks, void* dst, const void* src, cudaStream_t stream) {
  const std::size_t need =
      std::max<std::size_t>(1, (p.body + SmCopy::kThreads - 1) / SmCopy::kThreads);
  const int grid =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(max_blocks), need));
  sm_copy_kernel<T><<<grid, SmCopy::kThreads, 0, stream>>>(static_cast<unsigned char*>(dst),
                                                           static_cast<const unsigned char*>(src),
                                                           p.head, p.body, p.tail);
  CUDA_CHECK_LAST();
}

}  // namespace

SmCopyPlan plan_sm_copy(const void* dst, const void* src, std::size_t bytes) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  SmCopyPlan p;
  p.width = 16;
  while (p.width > 1 && ((d ^ s) & (p.width - 1)) != 0) p.width /= 2;
  p.head = std::min(bytes, (p.width - d % p.width) % p.width);
  p.body = (bytes - p.head) / p.width;
  p.tail = bytes - p.head - p.body * p.width;
  return p;
}

SmCopy SmCopy::create(int max_blocks) {
  if (max_blocks < 0) throw std::invalid_argument("SmCopy: max_blocks must be >= 0");
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Every width's kernel prefers the largest shared-memory carveout. The copy uses no shared
  // memory, so with the default preference an SM that a copy block reaches first may configure
  // a small carveout, and then no block of a kernel that needs shared memory (the single-launch
  // step) starts on that SM until the copy block ends: a step launched just after a copy waited
  // for the whole copy (H200, zero-copy-staged f32 b1024: the step started when the copy beside
  // it ended). Setting the attribute also loads each kernel now, not at its first use.
  for (const void* k : {reinterpret_cast<const void*>(sm_copy_kernel<uint4>),
                        reinterpret_cast<const void*>(sm_copy_kernel<uint2>),
                        reinterpret_cast<const void*>(sm_copy_kernel<unsigned int>),
                        reinterpret_cast<const void*>(sm_copy_kernel<unsigned short>),
                        reinterpret_cast<const void*>(sm_copy_kernel<unsigned char>)})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sm_copy_kernel<uint4>, kThreads, 0));
  SmCopy c;
  c.max_blocks_ = std::max(1, sms * std::max(1, per_sm));
  if (max_blocks > 0) c.max_blocks_ = std::min(c.max_blocks_, max_blocks);
  return c;
}

void SmCopy::operator()(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) const {
  if (bytes == 0) return;
  if (max_blocks_ == 0) throw std::logic_error("SmCopy used before SmCopy::create()");
  const SmCopyPlan p = plan_sm_copy(dst, src, bytes);
  switch (p.width) {
    case 16:
      launch<uint4>(p, max_blocks_, dst, src, stream);
      break;
    case 8:
      launch<uint2>(p, max_blocks_, dst, src, stream);
      break;
    case 4:
      launch<unsigned int>(p, max_blocks_, dst, src, stream);
      break;
    case 2:
      launch<unsigned short>(p, max_blocks_, dst, src, stream);
      break;
    default:
      launch<unsigned char>(p, max_blocks_, dst, src, stream);
      break;
  }
}

}  // namespace memstrat
