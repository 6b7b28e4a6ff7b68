#include "memory_strategies/packed_host_blocks.h"

#include <utility>

namespace memstrat {

void PackedHostBlocks::attach(HostEpochSource& source, unsigned flags) {
  layout_ = source.packed();
  owner_.reset();
  mapped_ = nullptr;
  own_ = PinnedBuffer<std::uint8_t>(layout_.total_bytes(), flags);
  host_ = own_.data();
  if (flags & cudaHostAllocMapped) mapped_ = mapped_device_pointer(host_);
  source.bind_packed(host_);
}

void PackedHostBlocks::attach(HostEpochSource& source, std::uint8_t* host,
                              std::shared_ptr<const void> owner) {
  layout_ = source.packed();
  own_.reset();
  mapped_ = nullptr;
  owner_ = std::move(owner);
  host_ = host;
  source.bind_packed(host_);
}

const std::uint8_t* PackedHostBlocks::mapped_chunk(const PackedChunk& k) const {
  return mapped_ == nullptr ? nullptr : mapped_ + k.offset;
}

std::size_t PackedHostBlocks::copy(const PackedChunk& k, void* dst, cudaStream_t s) const {
  CUDA_CHECK(cudaMemcpyAsync(dst, host_ + k.offset, k.bytes, cudaMemcpyHostToDevice, s));
  return k.bytes;
}

}  // namespace memstrat
