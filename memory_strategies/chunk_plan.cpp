#include "memory_strategies/chunk_plan.h"

#include <algorithm>
#include <stdexcept>

namespace memstrat {

ChunkPlan ChunkPlan::whole_batches(const BatchGeometry& g, std::uint64_t batch_bytes,
                                   std::size_t chunk_bytes) {
  if (chunk_bytes == 0) throw std::invalid_argument("ChunkPlan: chunk size must be > 0");
  const std::uint64_t per =
      std::max<std::uint64_t>(1, chunk_bytes / std::max<std::uint64_t>(1, batch_bytes));
  return ChunkPlan(g, static_cast<int>(std::min<std::uint64_t>(per, std::max(1, g.batches()))));
}

ChunkPlan ChunkPlan::split(const BatchGeometry& g, std::size_t chunk_bytes) {
  return whole_batches(g, g.batches() == 0 ? 1 : g.bytes(0), chunk_bytes);
}

ChunkPlan ChunkPlan::packed(const BatchGeometry& g, std::size_t chunk_bytes) {
  return whole_batches(g, PackedLayout{g}.block_stride(), chunk_bytes);
}

int ChunkPlan::end_batch(int c) const { return std::min(g_.batches(), first_batch(c) + per_); }

std::int64_t ChunkPlan::rows(int c) const {
  return std::min(g_.samples, g_.first(end_batch(c))) - g_.first(first_batch(c));
}

SplitChunk ChunkPlan::split_chunk(int c) const {
  SplitChunk k;
  k.first_batch = first_batch(c);
  k.end_batch = end_batch(c);
  const auto first = static_cast<std::size_t>(g_.first(k.first_batch));
  const auto n = static_cast<std::size_t>(rows(c));
  k.image_offset = first * g_.image_bytes_per_sample;
  k.image_bytes = n * g_.image_bytes_per_sample;
  k.label_offset = first * sizeof(std::int32_t);
  k.label_bytes = n * sizeof(std::int32_t);
  return k;
}

std::uint64_t ChunkPlan::split_epoch_bytes() const {
  std::uint64_t s = 0;
  for (int c = 0; c < chunks(); ++c) s += split_chunk(c).bytes();
  return s;
}

PackedChunk ChunkPlan::packed_chunk(int c) const {
  const PackedLayout L = layout();
  PackedChunk k;
  k.first_batch = first_batch(c);
  k.end_batch = end_batch(c);
  const int last = k.end_batch - 1;
  k.offset = L.block_offset(k.first_batch);
  k.bytes = L.block_offset(last) + L.block_bytes(last) - k.offset;
  return k;
}

std::uint64_t ChunkPlan::packed_epoch_bytes() const {
  std::uint64_t s = 0;
  for (int c = 0; c < chunks(); ++c) s += packed_chunk(c).bytes;
  return s;
}

std::size_t ChunkPlan::packed_slot_bytes() const {
  return chunks() == 0 ? 0 : packed_chunk(0).bytes;
}

std::size_t ChunkPlan::packed_offset_in_chunk(int b) const {
  const PackedLayout L = layout();
  return L.block_offset(b) - L.block_offset(first_batch(chunk_of(b)));
}

}  // namespace memstrat
