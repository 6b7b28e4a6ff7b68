// bias_grad.cu: db[j] = sum_i dZ[i][j] (see layer_kernels.h).
//
// Kernel versions in this file:
//   bias_grad_kernel  one block per 32-column chunk, 32×16 threads. Thread (x, y) sums rows
//       y, y+16, y+32, ... of column x in that order (reads coalesced along a row); the 16
//       partials of a column are then added by a fixed shared-memory tree.
//
// Deterministic: the summation order depends only on M (never on timing, pointers or N);
// no atomics. Accumulation in fp32.
#include <cstddef>
#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat::kernels {
namespace {

constexpr int kCols = 32;
constexpr int kRows = 16;  // power of two (tree reduction)
static_assert((kRows & (kRows - 1)) == 0, "kRows must be a power of two");

__global__ void __launch_bounds__(kCols* kRows)
    bias_grad_kernel(const float* __restrict__ dZ, float* __restrict__ db, int M, int N) {
  __shared__ float part[kRows][kCols + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int j = blockIdx.x * kCols + tx;
  float s = 0.f;
  if (j < N) {
    for (int i = ty; i < M; i += kRows) s += dZ[static_cast<std::size_t>(i) * N + j];
  }
  part[ty][tx] = s;
  __syncthreads();
#pragma unroll
  for (int h = kRows / 2; h > 0; h /= 2) {
    if (ty < h) part[ty][tx] += part[ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && j < N) db[j] = part[0][tx];
}

}  // namespace

void bias_grad(const float* dZ, float* db, int M, int N, cudaStream_t s) {
  if (M < 0 || N < 0) throw std::invalid_argument("bias_grad: negative matrix dimension");
  if (N == 0) return;  // M == 0 is allowed: db = 0 (an empty sum)
  const unsigned blocks = static_cast<unsigned>((N + kCols - 1) / kCols);
  bias_grad_kernel<<<blocks, dim3(kCols, kRows), 0, s>>>(dZ, db, M, N);
  CUDA_CHECK_LAST();
}

}  // namespace memstrat::kernels
