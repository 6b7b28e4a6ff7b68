// test_sm_copy.cu: SmCopy (the SM copy kernel) against memcpy: every load width (16, 8, 4, 2,
// 1 B) through the alignments of destination and source, heads and tails, 0 and 1 byte, sizes
// from one element to many passes of the full grid, from device, mapped pinned host and managed
// memory, and with a capped grid; the bytes around the destination range stay
// untouched; the copy also works when captured in a CUDA graph and replayed on new source data.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/sm_copy.h"

using namespace memstrat;

namespace {

constexpr unsigned char kGuard = 0xCD;
constexpr std::size_t kSlack = 64;  // room for offsets and guard bytes around each copy

enum class Source { Device, Mapped, Managed };
const char* to_string(Source s) {
  return s == Source::Device ? "device" : s == Source::Mapped ? "mapped" : "managed";
}

// A source of `bytes` random bytes (+ kSlack) in one kind of memory, as a device-readable
// pointer, with its host copy to compare against.
class SourceBuffer {
 public:
  SourceBuffer(Source kind, std::size_t bytes, std::uint32_t seed) : host_(bytes + kSlack) {
    std::mt19937 rng(seed);
    for (auto& b : host_) b = static_cast<unsigned char>(rng());
    switch (kind) {
      case Source::Device:
        device_ = DeviceBuffer<unsigned char>(host_.size());
        CUDA_CHECK(cudaMemcpy(device_.data(), host_.data(), host_.size(), cudaMemcpyHostToDevice));
        ptr_ = device_.data();
        break;
      case Source::Mapped: {
        mapped_ = PinnedBuffer<unsigned char>(host_.size(), cudaHostAllocMapped);
        std::memcpy(mapped_.data(), host_.data(), host_.size());
        void* p = nullptr;
        CUDA_CHECK(cudaHostGetDevicePointer(&p, mapped_.data(), 0));
        ptr_ = static_cast<unsigned char*>(p);
        break;
      }
      case Source::Managed:
        managed_ = ManagedBuffer<unsigned char>(host_.size());
        std::memcpy(managed_.data(), host_.data(), host_.size());  // written by the CPU
        ptr_ = managed_.data();
        break;
    }
  }
  const unsigned char* device_ptr() const { return ptr_; }
  const std::vector<unsigned char>& host() const { return host_; }
  unsigned char* mapped_host() { return mapped_.data(); }  // Source::Mapped only

 private:
  std::vector<unsigned char> host_;
  DeviceBuffer<unsigned char> device_;
  PinnedBuffer<unsigned char> mapped_;
  ManagedBuffer<unsigned char> managed_;
  const unsigned char* ptr_ = nullptr;
};

class SmCopyGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    stream_ = Stream::create();
    copy_ = SmCopy::create();
  }

  // Copies src[soff, soff + bytes) to dst[doff, doff + bytes) with SmCopy and checks the whole
  // destination buffer: the range equals the source bytes, every other byte is still kGuard.
  // Returns "" or the first problem.
  std::string copy_and_check(const SourceBuffer& src, std::size_t soff, unsigned char* dst,
                             std::size_t cap, std::size_t doff, std::size_t bytes) {
    CUDA_CHECK(cudaMemsetAsync(dst, kGuard, cap, stream_));
    copy_(dst + doff, src.device_ptr() + soff, bytes, stream_);
    std::vector<unsigned char> got(cap);
    CUDA_CHECK(cudaMemcpyAsync(got.data(), dst, cap, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (std::size_t i = 0; i < cap; ++i) {
      const bool inside = i >= doff && i < doff + bytes;
      const unsigned char want = inside ? src.host()[soff + (i - doff)] : kGuard;
      if (got[i] != want)
        return "byte " + std::to_string(i) + (inside ? " (copied)" : " (guard)") + ": got " +
               std::to_string(got[i]) + ", want " + std::to_string(want);
    }
    return "";
  }

  Stream stream_;
  SmCopy copy_;
};

}  // namespace

TEST_F(SmCopyGpu, GridFillsTheDevice) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  EXPECT_GE(copy_.max_blocks(), sms);
  EXPECT_EQ(copy_.max_blocks() % sms, 0);
}

TEST_F(SmCopyGpu, MatchesMemcpyForEveryAlignmentAndSizeFromEveryMemoryKind) {
  const std::vector<std::size_t> small = {0,  1,  2,  3,  5,   7,   8,    15,   16,
                                          17, 31, 32, 33, 100, 255, 4095, 4096, 4097};
  // A u8 batch of 256 rows with its labels (+5), and 1 MiB + 3.
  const std::vector<std::size_t> large = {256 * 788 + 5, (1u << 20) + 3};
  const std::vector<std::size_t> offsets = {0, 1, 2, 3, 4, 6, 8, 12, 15};
  const std::size_t cap = large.back() + kSlack;
  DeviceBuffer<unsigned char> dst(cap);
  for (const Source kind : {Source::Device, Source::Mapped, Source::Managed}) {
    const SourceBuffer src(kind, large.back(), 17);
    for (const std::size_t bytes : small)
      for (const std::size_t doff : offsets)
        for (const std::size_t soff : offsets) {
          const std::string err = copy_and_check(src, soff, dst.data(), bytes + 32, doff, bytes);
          ASSERT_EQ(err, "")
              << to_string(kind) << " bytes " << bytes << " dst+" << doff << " src+" << soff
              << " width " << plan_sm_copy(dst.data() + doff, src.device_ptr() + soff, bytes).width;
        }
    for (const std::size_t bytes : large)
      for (const std::size_t doff : {0, 1, 4, 8})
        for (const std::size_t soff : {0, 1, 4, 8}) {
          const std::string err = copy_and_check(src, soff, dst.data(), bytes + 32, doff, bytes);
          ASSERT_EQ(err, "") << to_string(kind) << " bytes " << bytes << " dst+" << doff << " src+"
                             << soff;
        }
  }
}

// Far more elements than one pass of the full grid: the unrolled grid-stride loop, its
// remainder loop and the tail all run.
TEST_F(SmCopyGpu, ManyPassesOfTheFullGrid) {
  const std::size_t pass = static_cast<std::size_t>(copy_.max_blocks()) * SmCopy::kThreads * 16;
  const std::size_t bytes = 9 * pass + 3 * SmCopy::kThreads * 16 + 13;
  const SourceBuffer src(Source::Device, bytes, 5);
  DeviceBuffer<unsigned char> dst(bytes + kSlack);
  for (const std::size_t off : {0, 8, 3}) {
    const std::string err = copy_and_check(src, off, dst.data(), bytes + 32, off, bytes);
    ASSERT_EQ(err, "") << "offset " << off;
  }
}

// Captured once, replayed twice: each replay reads the mapped source as it is then (what an
// epoch graph of zero-copy-staged relies on when the host rewrites the data between epochs).
TEST_F(SmCopyGpu, CapturedInAGraphReadsTheSourceAtEachReplay) {
  const std::size_t bytes = 256 * 788 + 5;
  SourceBuffer src(Source::Mapped, bytes, 9);
  DeviceBuffer<unsigned char> dst(bytes);
  const GraphExec exec = capture_graph(stream_, cudaStreamCaptureModeGlobal, [&] {
    copy_(dst.data(), src.device_ptr(), bytes, stream_);
  });
  for (int replay = 0; replay < 2; ++replay) {
    std::vector<unsigned char> want(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
      want[i] = static_cast<unsigned char>(i * 7 + replay * 13);
    std::memcpy(src.mapped_host(), want.data(), bytes);  // the GPU is idle here
    CUDA_CHECK(cudaGraphLaunch(exec.get(), stream_));
    std::vector<unsigned char> got(bytes);
    CUDA_CHECK(cudaMemcpyAsync(got.data(), dst.data(), bytes, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    EXPECT_EQ(got, want) << "replay " << replay;
  }
}

// A capped grid (zero-copy-staged's --stage-blocks, running beside the step): the same bytes
// as memcpy from mapped memory, at every width, over many passes of its small grid.
TEST_F(SmCopyGpu, CappedGridMatchesMemcpy) {
  for (const int blocks : {1, 8}) {
    copy_ = SmCopy::create(blocks);
    EXPECT_EQ(copy_.max_blocks(), blocks);
    const std::size_t pass = static_cast<std::size_t>(blocks) * SmCopy::kThreads * 16;
    for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4097},
                                    std::size_t{256 * 788 + 5}, 9 * pass + 13}) {
      const SourceBuffer src(Source::Mapped, bytes, 21);
      DeviceBuffer<unsigned char> dst(bytes + kSlack);
      for (const std::size_t off : {0, 8, 3}) {
        const std::string err = copy_and_check(src, off, dst.data(), bytes + 32, off, bytes);
        ASSERT_EQ(err, "") << blocks << " blocks, " << bytes << " bytes, offset " << off;
      }
    }
  }
  EXPECT_THROW(SmCopy::create(-1), std::invalid_argument);
}

TEST(SmCopyGpuErrors, UsingAnUncreatedCopierThrows) {
  const SmCopy none;
  EXPECT_THROW(none(nullptr, nullptr, 16, nullptr), std::logic_error);
}
