#include "memory_strategies/packed_host_blocks.h"

namespace memstrat {

void PackedHostBlocks::attach(HostEpochSource& source, unsigned flags) {
  layout_ = source.packed();
  host_ = PinnedBuffer<std::uint8_t>(layout_.total_bytes(), flags);
  if (flags & cudaHostAllocMapped) {
    void* p = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&p, host_.data(), 0));
    mapped_ = static_cast<const std::uint8_t*>(p);
  }
  source.bind_packed(host_.data());
}

const std::uint8_t* PackedHostBlocks::mapped_chunk(const PackedChunk& k) const {
  return mapped_ == nullptr ? nullptr : mapped_ + k.offset;
}

std::size_t PackedHostBlocks::copy(const PackedChunk& k, void* dst, cudaStream_t s) const {
  CUDA_CHECK(cudaMemcpyAsync(dst, host_.data() + k.offset, k.bytes, cudaMemcpyHostToDevice, s));
  return k.bytes;
}

}  // namespace memstrat
