#include "experiments/primitives/device_pattern.h"

#include <algorithm>

#include "experiments/primitives/pattern.h"

namespace memstrat {

namespace {
constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // grid-stride beyond: enough to saturate device memory

int blocks_for(std::size_t words) {
  return static_cast<int>(
      std::clamp<std::size_t>((words + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

__global__ void fill_kernel(std::uint32_t* p, std::size_t words, std::uint32_t key) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride)
    p[i] = pattern_word(i, key);
}

// result[0]: smallest wrong index (atomicMin), result[1]: wrong words (atomicAdd); one atomic
// pair per thread that saw a wrong word, so a completely wrong buffer is still checked quickly.
__global__ void check_kernel(const std::uint32_t* p, std::size_t words, std::uint32_t key,
                             unsigned long long* result) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long first = ~0ull, wrong = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    if (p[i] == pattern_word(i, key)) continue;
    if (wrong++ == 0) first = i;
  }
  if (wrong) {
    atomicMin(&result[0], first);
    atomicAdd(&result[1], wrong);
  }
}
}  // namespace

void fill_pattern_device(std::uint32_t* p, std::size_t words, std::uint32_t seed,
                         cudaStream_t stream) {
  if (words == 0) return;
  fill_kernel<<<blocks_for(words), kThreads, 0, stream>>>(p, words, pattern_key(seed));
  CUDA_CHECK_LAST();
}

DevicePatternCheck DevicePatternCheck::create() {
  DevicePatternCheck c;
  c.result_ = DeviceBuffer<unsigned long long>(2);
  c.host_ = PinnedBuffer<unsigned long long>(2);
  c.got_ = PinnedBuffer<std::uint32_t>(1);
  return c;
}

std::string DevicePatternCheck::run(const std::uint32_t* p, std::size_t bytes, std::uint32_t seed,
                                    cudaStream_t stream) {
  const std::size_t words = bytes / sizeof(std::uint32_t);
  if (words == 0) return "";
  CUDA_CHECK(cudaMemsetAsync(result_.data(), 0xFF, sizeof(unsigned long long), stream));
  CUDA_CHECK(cudaMemsetAsync(result_.data() + 1, 0, sizeof(unsigned long long), stream));
  check_kernel<<<blocks_for(words), kThreads, 0, stream>>>(p, words, pattern_key(seed),
                                                           result_.data());
  CUDA_CHECK_LAST();
  CUDA_CHECK(cudaMemcpyAsync(host_.data(), result_.data(), 2 * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (host_[1] == 0) return "";
  const auto first = static_cast<std::size_t>(host_[0]);
  CUDA_CHECK(
      cudaMemcpyAsync(got_.data(), p + first, sizeof(std::uint32_t), cudaMemcpyDefault, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return pattern_mismatch(first, got_[0], seed, static_cast<std::size_t>(host_[1]), words);
}

}  // namespace memstrat
