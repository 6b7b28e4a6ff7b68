// rank_sum.cu: rank_sum (see rank_sum.h).
//
// Kernel versions in this file (grid-stride): rank_sum_kernel, scalar. The sum is a chain of
// plain float additions (no multiply, so no contraction into FMA can change it), the same chain
// as cpu_ref::rank_sum, so the CPU reference is bitwise equal.
#include "kernels/common/rank_sum.h"

#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/common/grid_stride.cuh"

namespace memstrat::kernels {
namespace {

using namespace grid_stride;  // NOLINT(build/namespaces): this file's launch shape

__global__ void rank_sum_kernel(const float* gathered, int ranks, std::size_t count,
                                float* out) {
  for (std::size_t i = thread_index(); i < count; i += thread_stride()) {
    float s = gathered[i];
    for (int r = 1; r < ranks; ++r) s += gathered[static_cast<std::size_t>(r) * count + i];
    out[i] = s;
  }
}

}  // namespace

void rank_sum(const float* gathered, int ranks, std::size_t count, float* out, cudaStream_t s) {
  if (ranks < 1) throw std::invalid_argument("rank_sum: ranks must be >= 1");
  if (count == 0) return;
  rank_sum_kernel<<<blocks_for(count), kThreads, 0, s>>>(gathered, ranks, count, out);
  CUDA_CHECK_LAST();
}

}  // namespace memstrat::kernels
