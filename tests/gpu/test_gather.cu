// gather_batch (memory_strategies/gather.h) against a CPU gather: every copy width (16-byte,
// 4-byte, bytewise, chosen by row size and alignment), full and partial batches, sources in
// device, mapped (zero-copy) and managed memory, and nothing written past the batch.
// Skips without a CUDA device (and each memory kind the device lacks).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "memory_strategies/epoch_data.h"  // shuffled_order
#include "memory_strategies/gather.h"
#include "tests/gpu/kernel_test_support.h"

using namespace memstrat;
using memstrat::kernel_testing::to_host;

namespace {

enum class Where { Device, Mapped, Managed };

class Gather : public kernel_testing::WithGpuStream<::testing::TestWithParam<Where>> {};

/// The data set `samples` rows of `row_bytes` random bytes (+ labels) in the kind of memory
/// under test; `images` / `labels` are the device-side addresses.
struct Source {
  DeviceBuffer<std::uint8_t> dev_images;
  DeviceBuffer<std::int32_t> dev_labels;
  PinnedBuffer<std::uint8_t> host_images;
  PinnedBuffer<std::int32_t> host_labels;
  ManagedBuffer<std::uint8_t> um_images;
  ManagedBuffer<std::int32_t> um_labels;
  const void* images = nullptr;
  const std::int32_t* labels = nullptr;
};

void fill_source(Source& s, Where where, const std::vector<std::uint8_t>& img,
                 const std::vector<std::int32_t>& lab, cudaStream_t stream) {
  switch (where) {
    case Where::Device:
      s.dev_images = DeviceBuffer<std::uint8_t>(img.size());
      s.dev_labels = DeviceBuffer<std::int32_t>(lab.size());
      kernel_testing::copy_to(s.dev_images.data(), img, stream);
      kernel_testing::copy_to(s.dev_labels.data(), lab, stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      s.images = s.dev_images.data();
      s.labels = s.dev_labels.data();
      return;
    case Where::Mapped: {
      s.host_images = PinnedBuffer<std::uint8_t>(img.size(), cudaHostAllocMapped);
      s.host_labels = PinnedBuffer<std::int32_t>(lab.size(), cudaHostAllocMapped);
      std::memcpy(s.host_images.data(), img.data(), img.size());
      std::memcpy(s.host_labels.data(), lab.data(), lab.size() * 4);
      void* p = nullptr;
      CUDA_CHECK(cudaHostGetDevicePointer(&p, s.host_images.data(), 0));
      s.images = p;
      CUDA_CHECK(cudaHostGetDevicePointer(&p, s.host_labels.data(), 0));
      s.labels = static_cast<const std::int32_t*>(p);
      return;
    }
    case Where::Managed:
      s.um_images = ManagedBuffer<std::uint8_t>(img.size());
      s.um_labels = ManagedBuffer<std::int32_t>(lab.size());
      std::memcpy(s.um_images.data(), img.data(), img.size());
      std::memcpy(s.um_labels.data(), lab.data(), lab.size() * 4);
      s.images = s.um_images.data();
      s.labels = s.um_labels.data();
      return;
  }
}

std::string skip_reason(Where where) {
  int dev = 0, v = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (where == Where::Mapped) {
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, dev));
    if (!v) return "the device cannot map host memory";
  }
  if (where == Where::Managed) {
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrManagedMemory, dev));
    if (!v) return "the device has no managed memory";
  }
  return "";
}

}  // namespace

TEST_P(Gather, MatchesACpuGatherForEveryCopyWidth) {
  if (const std::string why = skip_reason(GetParam()); !why.empty()) GTEST_SKIP() << why;
  constexpr std::int64_t kSamples = 1000;
  struct Case {
    std::size_t row_bytes;
    std::size_t dst_offset;  // bytes: moves the destination off 16/4-byte alignment
    const char* path;
  };
  // 784 / 3136: MNIST u8 / f32 rows (16-byte path); 12: 4-byte path; 13: bytewise; 784 at an
  // odd destination: bytewise; 3136 at +4: 4-byte.
  const Case cases[] = {{784, 0, "x16"}, {3136, 0, "x16"}, {12, 0, "x4"},
                        {13, 0, "x1"},   {784, 1, "x1"},   {3136, 4, "x4"}};
  const std::vector<std::int32_t> order = shuffled_order(kSamples, 17);
  for (const Case& c : cases) {
    std::mt19937 rng(static_cast<unsigned>(c.row_bytes));
    std::vector<std::uint8_t> img(kSamples * c.row_bytes);
    for (auto& b : img) b = static_cast<std::uint8_t>(rng());
    std::vector<std::int32_t> lab(kSamples);
    for (auto& l : lab) l = static_cast<std::int32_t>(rng() % 1000);
    Source src;
    fill_source(src, GetParam(), img, lab, stream_);
    DeviceBuffer<std::int32_t> d_order(order.size());
    kernel_testing::copy_to(d_order.data(), order, stream_);
    const GatherSource gs{src.images, src.labels, kSamples, c.row_bytes};

    for (auto [first, rows] : {std::pair<int, int>{512, 256}, {923, 77}, {0, 1}}) {
      // Room for the batch plus 64 guard bytes (and 4 guard labels) that must stay 0xFF.
      const std::size_t bytes = rows * c.row_bytes;
      DeviceBuffer<std::uint8_t> dst(c.dst_offset + bytes + 64);
      DeviceBuffer<std::int32_t> dst_labels(rows + 4);
      kernel_testing::poison(dst.data(), dst.size(), stream_);
      kernel_testing::poison(dst_labels.data(), dst_labels.size(), stream_);
      gather_batch(gs, d_order.data() + first, rows, dst.data() + c.dst_offset, dst_labels.data(),
                   stream_);
      const std::vector<std::uint8_t> got = to_host(dst.data(), dst.size(), stream_);
      const std::vector<std::int32_t> got_labels =
          to_host(dst_labels.data(), dst_labels.size(), stream_);
      std::vector<std::uint8_t> want(dst.size(), 0xFF);
      std::vector<std::int32_t> want_labels(dst_labels.size(), -1);
      for (int r = 0; r < rows; ++r) {
        const std::int32_t i = order[first + r];
        std::memcpy(want.data() + c.dst_offset + r * c.row_bytes, img.data() + i * c.row_bytes,
                    c.row_bytes);
        want_labels[r] = lab[i];
      }
      const std::string what = std::string(c.path) + " row_bytes " + std::to_string(c.row_bytes) +
                               " rows " + std::to_string(rows);
      EXPECT_TRUE(kernel_testing::bitwise_equal(got, want, what));
      EXPECT_TRUE(kernel_testing::bitwise_equal(got_labels, want_labels, what + " labels"));
    }
  }
}

TEST_P(Gather, RejectsBadArgumentsOnTheHost) {
  const std::int32_t* idx = reinterpret_cast<const std::int32_t*>(16);
  const GatherSource ok{idx, idx, 10, 784};
  std::int32_t lab = 0;
  EXPECT_THROW(gather_batch(ok, idx, -1, &lab, &lab, stream_), std::invalid_argument);
  EXPECT_THROW(gather_batch(GatherSource{}, idx, 4, &lab, &lab, stream_), std::invalid_argument);
  gather_batch(ok, idx, 0, &lab, &lab, stream_);  // nothing to do, nothing launched
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

INSTANTIATE_TEST_SUITE_P(Memory, Gather,
                         ::testing::Values(Where::Device, Where::Mapped, Where::Managed),
                         [](const ::testing::TestParamInfo<Where>& i) {
                           return std::string(i.param == Where::Device   ? "device"
                                              : i.param == Where::Mapped ? "mapped"
                                                                         : "managed");
                         });
