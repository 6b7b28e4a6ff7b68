#include "experiments/primitives/self_check.h"

#include <cmath>
#include <vector>

#include "common/cuda_raii.h"
#include "common/run_record.h"

namespace memstrat {

double plain_pinned_copy_us(std::size_t bytes, int samples) {
  PinnedBuffer<unsigned char> src(bytes);
  DeviceBuffer<unsigned char> dst(bytes);
  Stream stream = Stream::create();
  Event start = Event::create(), stop = Event::create();
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> us;
  for (int i = 0; i < samples; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    us.push_back(1e3 * static_cast<double>(elapsed_ms(start, stop)));
  }
  return spread_of(us).median;
}

SelfCheck self_check(std::size_t bytes, double primitive_median_us, int samples) {
  SelfCheck c;
  c.bytes = bytes;
  c.samples = samples;
  c.primitive_median_us = primitive_median_us;
  c.plain_median_us = plain_pinned_copy_us(bytes, samples);
  c.relative_difference = (primitive_median_us - c.plain_median_us) / c.plain_median_us;
  c.passed = std::fabs(c.relative_difference) <= kSelfCheckTolerance;
  return c;
}

}  // namespace memstrat
