// augment_gpu.cu: gather_augment (augment_gpu.h).
//
// Kernel versions (two templates, by the format they write):
//   gather_augment_kernel<std::uint8_t>   the augmented pixels (--transfer u8)
//   gather_augment_kernel<float>          normalize_pixel of them (--transfer f32)
//   augment_in_place_kernel<std::uint8_t> a copied uint8 batch, augmented where it lies
//   augment_in_place_kernel<float>        a copied f32 batch: each value read back to its pixel
//                                         (pixel_of), augmented, normalised again
// One block per sample (grid-stride over the rows): the block stages its source image in shared
// memory with coalesced loads, thread 0 draws the sample's parameters (augment_math.h) into
// shared memory, then the threads write one output pixel each, in row-major order (coalesced
// stores; in place: after every thread has staged its pixels). The arithmetic is augment_math.h's, compiled here under the rules it states: this
// file is built with -fmad=false -prec-div=true -ftz=false and never with -use_fast_math
// (CMakeLists.txt).
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "common/cuda_check.h"
#include "kernels/common/pixel_norm.h"  // normalize_pixel: the host's f32 expression
#include "memory_strategies/augment_gpu.h"
#include "memory_strategies/augment_math.h"

namespace memstrat {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

__device__ inline void store(std::uint8_t* dst, std::size_t i, std::uint8_t v) { dst[i] = v; }
__device__ inline void store(float* dst, std::size_t i, std::uint8_t v) {
  dst[i] = kernels::normalize_pixel(v);
}
/// The pixel a stored value stands for: a uint8 as is; an f32 value normalize_pixel(v) back to v
/// (v/255 is within half an ulp of its float, so x·255 rounds to v for every v in 0..255).
__device__ inline std::uint8_t pixel_of(std::uint8_t x) { return x; }
__device__ inline std::uint8_t pixel_of(float x) {
  return static_cast<std::uint8_t>(__float2int_rn(x * 255.0f));
}

/// Draws (thread 0 of the block) the parameters of the sample in epoch row `row` into the shared
/// `map` / shift; the caller synchronises the block before pixel_out reads them.
__device__ inline void draw(const AugmentRows& a, std::int64_t row, augment_math::WarpMap& map,
                            int& shift_dx, int& shift_dy) {
  const int epoch = a.epoch_on_device != nullptr ? *a.epoch_on_device : a.epoch;
  if (a.augment == Augment::Heavy)
    map = augment_math::warp_map(augment_math::heavy_params(a.seed, epoch, row), a.image_rows,
                                 a.image_cols);
  else if (a.augment == Augment::Light) {
    const Shift s = augment_math::light_shift(a.seed, epoch, row);
    shift_dx = s.dx;
    shift_dy = s.dy;
  }
}

/// Output pixel p of the staged source `image` under the drawn parameters.
__device__ inline std::uint8_t pixel_out(const std::uint8_t* image, const AugmentRows& a, int p,
                                         const augment_math::WarpMap& map, int shift_dx,
                                         int shift_dy) {
  const int h = a.image_rows, w = a.image_cols;
  const int y = p / w, x = p % w;
  switch (a.augment) {
    case Augment::Heavy:
      return augment_math::warp_sample(image, h, w, map, augment_math::warp_u(map, x),
                                       augment_math::warp_v(map, y));
    case Augment::Light:
      return augment_math::shift_pixel(image, h, w, Shift{shift_dx, shift_dy}, y, x);
    default: return image[p];
  }
}

template <typename Out>
__global__ void __launch_bounds__(kThreads)
    gather_augment_kernel(const std::uint8_t* __restrict__ src,
                          const std::int32_t* __restrict__ src_labels, std::int64_t samples,
                          const std::int32_t* __restrict__ index, int rows, AugmentRows a,
                          Out* __restrict__ dst, std::int32_t* __restrict__ dst_labels) {
  extern __shared__ std::uint8_t image[];  // one source image
  __shared__ augment_math::WarpMap map;
  __shared__ int shift_dx, shift_dy;  // Shift's default initialisers are not allowed here
  const int pixels = a.image_rows * a.image_cols;
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t i = index[r];
    if (i < 0 || i >= samples) __trap();  // a corrupt order: fail loudly
    const std::uint8_t* from = src + static_cast<std::size_t>(i) * pixels;
    for (int p = threadIdx.x; p < pixels; p += blockDim.x) image[p] = from[p];
    if (threadIdx.x == 0) {
      draw(a, a.first_row + r, map, shift_dx, shift_dy);  // key: the sample's row of the epoch
      dst_labels[r] = src_labels[i];
    }
    __syncthreads();
    Out* to = dst + static_cast<std::size_t>(r) * pixels;
    for (int p = threadIdx.x; p < pixels; p += blockDim.x)
      store(to, p, pixel_out(image, a, p, map, shift_dx, shift_dy));
    __syncthreads();  // the image and the draws are rewritten for the next row
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    augment_in_place_kernel(T* __restrict__ images, int rows, AugmentRows a) {
  extern __shared__ std::uint8_t image[];  // the row's pixels, as copied
  __shared__ augment_math::WarpMap map;
  __shared__ int shift_dx, shift_dy;
  const int pixels = a.image_rows * a.image_cols;
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    T* row = images + static_cast<std::size_t>(r) * pixels;
    for (int p = threadIdx.x; p < pixels; p += blockDim.x) image[p] = pixel_of(row[p]);
    if (threadIdx.x == 0) draw(a, a.first_row + r, map, shift_dx, shift_dy);
    __syncthreads();  // every pixel staged before any is overwritten
    for (int p = threadIdx.x; p < pixels; p += blockDim.x)
      store(row, p, pixel_out(image, a, p, map, shift_dx, shift_dy));
    __syncthreads();
  }
}

template <typename Out>
void launch(const GatherSource& src, const std::int32_t* index, int rows, const AugmentRows& a,
            void* dst_images, std::int32_t* dst_labels, cudaStream_t stream) {
  const int blocks = std::min(kMaxBlocks, rows);
  const std::size_t shared = src.row_bytes;
  gather_augment_kernel<Out><<<blocks, kThreads, shared, stream>>>(
      static_cast<const std::uint8_t*>(src.images), src.labels, src.samples, index, rows, a,
      static_cast<Out*>(dst_images), dst_labels);
  CUDA_CHECK_LAST();
}

}  // namespace

void gather_augment(const GatherSource& src, const std::int32_t* index, int rows,
                    const AugmentRows& a, void* dst_images, std::int32_t* dst_labels,
                    cudaStream_t stream) {
  if (rows < 0) throw std::invalid_argument("gather_augment: negative row count");
  if (rows == 0) return;
  if (src.images == nullptr || src.labels == nullptr || index == nullptr ||
      dst_images == nullptr || dst_labels == nullptr || src.samples <= 0)
    throw std::invalid_argument("gather_augment: a null pointer or an empty source");
  if (a.image_rows <= 0 || a.image_cols <= 0 ||
      src.row_bytes != static_cast<std::size_t>(a.image_rows) * a.image_cols)
    throw std::invalid_argument(
        "gather_augment: the source rows are not uint8 images of image_rows x image_cols");
  if (src.row_bytes > 48 * 1024)
    throw std::invalid_argument("gather_augment: images of more than 48 KiB are not supported");
  if (a.transfer == Transfer::U8)
    launch<std::uint8_t>(src, index, rows, a, dst_images, dst_labels, stream);
  else
    launch<float>(src, index, rows, a, dst_images, dst_labels, stream);
}

void augment_in_place(void* images, int rows, const AugmentRows& a, cudaStream_t stream) {
  if (rows < 0) throw std::invalid_argument("augment_in_place: negative row count");
  if (rows == 0 || a.augment == Augment::None) return;
  if (images == nullptr) throw std::invalid_argument("augment_in_place: a null batch");
  if (a.image_rows <= 0 || a.image_cols <= 0)
    throw std::invalid_argument("augment_in_place: an empty image shape");
  const std::size_t pixels = static_cast<std::size_t>(a.image_rows) * a.image_cols;
  if (pixels > 48 * 1024)
    throw std::invalid_argument("augment_in_place: images of more than 48 KiB are not supported");
  const int blocks = std::min(kMaxBlocks, rows);
  if (a.transfer == Transfer::U8)
    augment_in_place_kernel<std::uint8_t><<<blocks, kThreads, pixels, stream>>>(
        static_cast<std::uint8_t*>(images), rows, a);
  else
    augment_in_place_kernel<float><<<blocks, kThreads, pixels, stream>>>(
        static_cast<float*>(images), rows, a);
  CUDA_CHECK_LAST();
}

}  // namespace memstrat
