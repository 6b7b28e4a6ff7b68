// BatchProducer's GPU hand-off (release_after): the GPU reads each slot late (a spin kernel
// first), so a producer that refilled a slot before the stream released it would change what
// the GPU reads. Slots are mapped memory read in place (zero-copy's path) or pinned memory
// copied to a device buffer (the pinned / double-buffer path); either way every batch the GPU
// saw must checksum to the bytes write_rows gives for it. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "memory_strategies/batch_producer.h"
#include "memory_strategies/epoch_data.h"
#include "tests/gpu/kernel_test_support.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;

namespace {

enum class SlotKind { Mapped, PinnedCopied };

class ProducerGpu : public kernel_testing::WithGpuStream<::testing::TestWithParam<SlotKind>> {};

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

// out[0] += Σ bytes[i]·(i+1), out[1] += Σ labels[r]·(r+1): one block per batch is plenty.
__global__ void checksum_kernel(const std::uint8_t* bytes, std::size_t n,
                                const std::int32_t* labels, int rows, unsigned long long* out) {
  unsigned long long s = 0, l = 0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) s += bytes[i] * (i + 1);
  for (int r = threadIdx.x; r < rows; r += blockDim.x)
    l += static_cast<unsigned long long>(labels[r]) * (r + 1);
  atomicAdd(out, s);
  atomicAdd(out + 1, l);
}

std::pair<unsigned long long, unsigned long long> host_checksum(const std::uint8_t* bytes,
                                                                std::size_t n,
                                                                const std::int32_t* labels,
                                                                int rows) {
  unsigned long long s = 0, l = 0;
  for (std::size_t i = 0; i < n; ++i) s += bytes[i] * (i + 1);
  for (int r = 0; r < rows; ++r) l += static_cast<unsigned long long>(labels[r]) * (r + 1);
  return {s, l};
}

}  // namespace

TEST_P(ProducerGpu, TheGpuReadsEveryBatchIntactUnderReleaseAfter) {
  int dev = 0, can_map = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, dev));
  if (GetParam() == SlotKind::Mapped && !can_map) GTEST_SKIP() << "cannot map host memory";

  constexpr int kBatch = 256, kSlots = 2, kEpochs = 2;
  const HostDataset d = memstrat::testing::synthetic_dataset(5000);
  const std::size_t slot_bytes = kBatch * 784;
  const unsigned flags = GetParam() == SlotKind::Mapped ? cudaHostAllocMapped : 0;
  std::vector<PinnedBuffer<std::uint8_t>> images;
  std::vector<PinnedBuffer<std::int32_t>> labels;
  std::vector<SlotMemory> slots;
  for (int s = 0; s < kSlots; ++s) {
    images.emplace_back(slot_bytes, flags);
    labels.emplace_back(kBatch, flags);
    slots.push_back({images.back().data(), labels.back().data()});
  }
  ProducerConfig cfg;
  cfg.workers = 4;
  cfg.batch = kBatch;
  cfg.augment = Augment::Heavy;
  cfg.transfer = Transfer::U8;
  cfg.seed = 3;
  cfg.gpu_release = true;
  BatchProducer p(d, cfg, slots);

  DeviceBuffer<std::uint8_t> dev_images(slot_bytes);  // PinnedCopied: the batch buffer
  DeviceBuffer<std::int32_t> dev_labels(kBatch);
  const int batches = p.batches();
  DeviceBuffer<unsigned long long> sums(2 * static_cast<std::size_t>(batches) * kEpochs);
  CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, sums.bytes(), stream_));
  const unsigned long long spin_ns = 200000;

  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    p.begin_epoch(epoch);
    for (int b = 0; b < batches; ++b) {
      const int s = p.wait_ready(b);
      const std::uint8_t* x = nullptr;
      const std::int32_t* y = nullptr;
      spin_kernel<<<1, 1, 0, stream_>>>(spin_ns);  // the GPU is late to read the slot
      CUDA_CHECK_LAST();
      if (GetParam() == SlotKind::Mapped) {
        x = mapped_device_pointer(images[s].data());
        y = mapped_device_pointer(labels[s].data());
      } else {
        CUDA_CHECK(cudaMemcpyAsync(dev_images.data(), images[s].data(), p.rows(b) * 784,
                                   cudaMemcpyHostToDevice, stream_));
        CUDA_CHECK(cudaMemcpyAsync(dev_labels.data(), labels[s].data(), p.rows(b) * 4,
                                   cudaMemcpyHostToDevice, stream_));
        x = dev_images.data();
        y = dev_labels.data();
        p.release_after(s, stream_);  // the copy is all that reads the slot
      }
      const std::size_t at = 2 * (static_cast<std::size_t>(epoch - 1) * batches + b);
      checksum_kernel<<<1, 256, 0, stream_>>>(x, p.rows(b) * 784, y, p.rows(b), sums.data() + at);
      CUDA_CHECK_LAST();
      if (GetParam() == SlotKind::Mapped) p.release_after(s, stream_);  // the kernel read it
    }
  }
  const std::vector<unsigned long long> got =
      kernel_testing::to_host(sums.data(), sums.size(), stream_);

  std::vector<std::uint8_t> img(d.n_train() * 784), scratch(784);
  std::vector<std::int32_t> lab(d.n_train());
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    EpochOrder order(d.n_train(), 3);
    order.set_epoch(epoch);
    write_rows({&d, order.order(), Augment::Heavy, Transfer::U8, 3, epoch}, 0, d.n_train(),
               img.data(), lab.data(), scratch.data());
    for (int b = 0; b < batches; ++b) {
      const auto [s, l] = host_checksum(img.data() + b * slot_bytes, p.rows(b) * 784,
                                        lab.data() + b * kBatch, p.rows(b));
      const std::size_t at = 2 * (static_cast<std::size_t>(epoch - 1) * batches + b);
      EXPECT_EQ(got[at], s) << "epoch " << epoch << " batch " << b << " images";
      EXPECT_EQ(got[at + 1], l) << "epoch " << epoch << " batch " << b << " labels";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Slots, ProducerGpu,
                         ::testing::Values(SlotKind::Mapped, SlotKind::PinnedCopied),
                         [](const ::testing::TestParamInfo<SlotKind>& i) {
                           return std::string(i.param == SlotKind::Mapped ? "mapped"
                                                                          : "pinned_copied");
                         });
