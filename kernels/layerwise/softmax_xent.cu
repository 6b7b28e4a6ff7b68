// softmax_xent.cu: row-wise softmax + cross-entropy, its gradient, and first-maximum
// argmax accuracy (see layer_kernels.h).
//
// Kernel versions in this file:
//   softmax_xent_warp_kernel  one warp per row (8 rows per 256-thread block), any C. Lane l
//       handles columns l, l+32, ...; max/argmax and the exp-sum are combined across lanes
//       with a fixed xor-butterfly, so the result depends only on the row's values and C.
//
// Numerics: subtract the row maximum before exp; loss = log(sum exp(x - max)) - (x[label] - max)
// (= logsumexp - logit[label]); dlogits = (softmax - onehot) * grad_scale.
// Accurate expf/logf (no fast-math intrinsics). No atomics: deterministic.
// A label outside [0, C) gives loss NaN, correct 0 and no -1 term (loud, never out of bounds).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;
constexpr unsigned kFull = 0xffffffffu;

// (mx, arg) <- the first maximum of the two candidates; arg < 0 means "no element yet".
__device__ __forceinline__ void merge_max(float& mx, int& arg, float omx, int oarg) {
  if (oarg < 0) return;
  if (arg < 0 || omx > mx || (omx == mx && oarg < arg)) {
    mx = omx;
    arg = oarg;
  }
}

__global__ void __launch_bounds__(kWarp* kRowsPerBlock)
    softmax_xent_warp_kernel(const float* __restrict__ logits,
                             const std::int32_t* __restrict__ labels, float* __restrict__ dlogits,
                             float* __restrict__ sample_loss,
                             std::int32_t* __restrict__ sample_correct, int M, int C,
                             float grad_scale) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= M) return;  // the whole warp leaves together: the shuffles below stay full-warp
  const float* x = logits + static_cast<std::size_t>(row) * C;

  float mx = -INFINITY;
  int arg = -1;
  for (int j = lane; j < C; j += kWarp) merge_max(mx, arg, x[j], j);
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) {
    const float omx = __shfl_xor_sync(kFull, mx, off);
    const int oarg = __shfl_xor_sync(kFull, arg, off);
    merge_max(mx, arg, omx, oarg);
  }

  float sum = 0.f;
  for (int j = lane; j < C; j += kWarp) sum += expf(x[j] - mx);
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) sum += __shfl_xor_sync(kFull, sum, off);

  const int label = labels[row];
  const bool valid = label >= 0 && label < C;
  if (lane == 0) {
    if (sample_loss != nullptr) sample_loss[row] = valid ? logf(sum) - (x[label] - mx) : NAN;
    if (sample_correct != nullptr) sample_correct[row] = (valid && arg == label) ? 1 : 0;
  }
  if (dlogits != nullptr) {
    float* d = dlogits + static_cast<std::size_t>(row) * C;
    for (int j = lane; j < C; j += kWarp) {
      const float p = expf(x[j] - mx) / sum;
      d[j] = (j == label ? p - 1.f : p) * grad_scale;
    }
  }
}

}  // namespace

void softmax_xent(const float* logits, const std::int32_t* labels, float* dlogits,
                  float* sample_loss, std::int32_t* sample_correct, int M, int C, float grad_scale,
                  cudaStream_t s) {
  if (M < 0 || C < 0) throw std::invalid_argument("softmax_xent: negative dimension");
  if (M == 0) return;
  if (C == 0) throw std::invalid_argument("softmax_xent: C must be > 0");
  const unsigned blocks = static_cast<unsigned>((M + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_xent_warp_kernel<<<blocks, kWarp * kRowsPerBlock, 0, s>>>(
      logits, labels, dlogits, sample_loss, sample_correct, M, C, grad_scale);
  CUDA_CHECK_LAST();
}

}  // namespace memstrat::kernels
