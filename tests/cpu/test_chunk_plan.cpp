// ChunkPlan: how an epoch is split into transfer units of whole batches. Split layout: um-prefetch
// (one batch per prefetch) and um-prefetch-coarse (--prefetch-chunk); packed layout: pinned-graph
// and double-buffer-graph (one copy per --copy-chunk). Every batch is in exactly one chunk,
// chunks are contiguous, in order, and together cover every byte of the epoch once; a packed
// chunk is one range whose blocks sit in a chunk slot at their distance from the chunk's first.
#include <gtest/gtest.h>

#include <stdexcept>

#include "memory_strategies/chunk_plan.h"

using namespace memstrat;

namespace {
constexpr std::size_t MiB = std::size_t{1} << 20;

// The batch-to-chunk mapping every plan keeps.
void expect_whole_batches(const ChunkPlan& p, const BatchGeometry& g) {
  int next_batch = 0;
  std::int64_t rows = 0;
  for (int c = 0; c < p.chunks(); ++c) {
    SCOPED_TRACE("chunk " + std::to_string(c));
    EXPECT_EQ(p.first_batch(c), next_batch);
    EXPECT_GT(p.end_batch(c), p.first_batch(c));
    EXPECT_LE(p.end_batch(c) - p.first_batch(c), p.batches_per_chunk());
    if (c + 1 < p.chunks()) {
      EXPECT_EQ(p.end_batch(c) - p.first_batch(c), p.batches_per_chunk())
          << "only the last is short";
    }
    std::int64_t chunk_rows = 0;
    for (int b = p.first_batch(c); b < p.end_batch(c); ++b) {
      EXPECT_EQ(p.chunk_of(b), c) << b;
      EXPECT_EQ(p.starts_chunk(b), b == p.first_batch(c)) << b;
      EXPECT_EQ(p.ends_chunk(b), b + 1 == p.end_batch(c)) << b;
      chunk_rows += g.rows(b);
    }
    EXPECT_EQ(p.rows(c), chunk_rows);
    next_batch = p.end_batch(c);
    rows += chunk_rows;
  }
  EXPECT_EQ(next_batch, g.batches());
  EXPECT_EQ(rows, g.samples);
}

// Chunk c's range (split or packed) holds the plan's batches of chunk c, and fits in the budget
// when it holds more than one batch.
template <typename Chunk>
void expect_chunk_of_plan(const Chunk& k, std::uint64_t bytes, const ChunkPlan& p, int c,
                          std::size_t budget) {
  EXPECT_EQ(k.first_batch, p.first_batch(c));
  EXPECT_EQ(k.end_batch, p.end_batch(c));
  if (k.end_batch - k.first_batch > 1) {
    EXPECT_LE(bytes, budget) << "a multi-batch chunk fits";
  }
}

// The split plan's byte ranges cover both arrays once, within the budget.
void expect_split_covers_the_epoch(const ChunkPlan& p, const BatchGeometry& g,
                                   std::size_t budget) {
  expect_whole_batches(p, g);
  std::size_t next_image = 0, next_label = 0;
  for (int c = 0; c < p.chunks(); ++c) {
    const SplitChunk k = p.split_chunk(c);
    SCOPED_TRACE("chunk " + std::to_string(c));
    expect_chunk_of_plan(k, k.bytes(), p, c, budget);
    EXPECT_EQ(k.image_offset, next_image);
    EXPECT_EQ(k.label_offset, next_label);
    std::uint64_t batch_bytes = 0;
    for (int b = k.first_batch; b < k.end_batch; ++b) batch_bytes += g.bytes(b);
    EXPECT_EQ(k.bytes(), batch_bytes);
    EXPECT_EQ(k.image_offset, g.image_offset(k.first_batch));
    next_image += k.image_bytes;
    next_label += k.label_bytes;
  }
  EXPECT_EQ(next_image, static_cast<std::size_t>(g.samples) * g.image_bytes_per_sample);
  EXPECT_EQ(next_label, static_cast<std::size_t>(g.samples) * 4);
  EXPECT_EQ(p.split_epoch_bytes(),
            static_cast<std::uint64_t>(g.samples) * (g.image_bytes_per_sample + 4));
}

// The packed plan's chunks are single ranges of whole blocks, in order, each within the budget
// (when it holds more than one batch) and within the slot, with every block of the chunk at its
// layout distance from the chunk's first block.
void expect_packed_covers_the_epoch(const ChunkPlan& p, const BatchGeometry& g,
                                    std::size_t budget) {
  expect_whole_batches(p, g);
  const PackedLayout L{g};
  std::uint64_t sum = 0, tails = 0;
  for (int c = 0; c < p.chunks(); ++c) {
    const PackedChunk k = p.packed_chunk(c);
    SCOPED_TRACE("chunk " + std::to_string(c));
    expect_chunk_of_plan(k, k.bytes, p, c, budget);
    EXPECT_EQ(k.offset, L.block_offset(k.first_batch));
    const int last = k.end_batch - 1;
    EXPECT_EQ(k.offset + k.bytes, L.block_offset(last) + L.block_bytes(last))
        << "ends with its last block";
    if (c + 1 < p.chunks()) {
      EXPECT_LE(k.offset + k.bytes, p.packed_chunk(c + 1).offset);
    }
    EXPECT_LE(k.bytes, p.packed_slot_bytes());
    for (int b = k.first_batch; b < k.end_batch; ++b) {
      EXPECT_EQ(p.packed_offset_in_chunk(b), L.block_offset(b) - k.offset) << b;
      EXPECT_EQ(p.packed_offset_in_chunk(b) % PackedLayout::kAlign, 0u) << b;
      EXPECT_LE(p.packed_offset_in_chunk(b) + L.block_bytes(b), k.bytes) << b;
    }
    sum += k.bytes;
    for (int b = k.first_batch; b + 1 < k.end_batch; ++b)
      tails += L.block_stride() - L.block_bytes(b);
  }
  EXPECT_EQ(p.packed_epoch_bytes(), sum);
  // Beyond the blocks: the tail of every block but a chunk's last, up to the stride (< 16 B).
  EXPECT_EQ(p.packed_epoch_bytes(), L.epoch_bytes() + tails);
  EXPECT_LT(tails, 16u * static_cast<std::uint64_t>(g.batches()));
}
}  // namespace

TEST(ChunkPlan, PerBatchIsOneChunkPerBatch) {
  const BatchGeometry g{60000, 256, 784};
  const ChunkPlan p = ChunkPlan::per_batch(g);
  EXPECT_EQ(p.chunks(), 235);
  EXPECT_EQ(p.batches_per_chunk(), 1);
  for (int b = 0; b < g.batches(); ++b) {
    const SplitChunk k = p.split_chunk(b);
    ASSERT_EQ(k.first_batch, b);
    ASSERT_EQ(k.image_offset, g.image_offset(b));
    ASSERT_EQ(k.image_bytes, g.image_bytes(b));
    ASSERT_EQ(k.label_offset, static_cast<std::size_t>(g.first(b)) * 4);
    ASSERT_EQ(k.label_bytes, g.label_bytes(b));
    ASSERT_EQ(p.packed_chunk(b).bytes, PackedLayout{g}.block_bytes(b));
  }
  expect_split_covers_the_epoch(p, g, g.bytes(0));
  expect_packed_covers_the_epoch(p, g, g.bytes(0));
}

TEST(ChunkPlan, SplitChunksAreWholeBatchesWithinTheBudget) {
  // MNIST u8 at batch 256: 201728 B per batch, 8 MiB holds 41 of them: 6 chunks, the last one
  // 30 batches ending in the 96-row batch.
  const BatchGeometry u8{60000, 256, 784};
  const ChunkPlan p = ChunkPlan::split(u8, 8 * MiB);
  EXPECT_EQ(p.batches_per_chunk(), 41);
  EXPECT_EQ(p.chunks(), 6);
  EXPECT_EQ(p.split_chunk(5).first_batch, 205);
  EXPECT_EQ(p.split_chunk(5).end_batch, 235);
  EXPECT_EQ(p.split_chunk(5).image_bytes, (29u * 256 + 96) * 784);
  EXPECT_EQ(p.rows(5), 29 * 256 + 96);
  expect_split_covers_the_epoch(p, u8, 8 * MiB);
  // f32, odd batch sizes, budgets from below one batch to above the epoch.
  for (const BatchGeometry g : {BatchGeometry{60000, 256, 3136}, BatchGeometry{60000, 1007, 784},
                                BatchGeometry{60000, 3, 784}, BatchGeometry{1001, 7, 25}})
    for (const std::size_t budget :
         {std::size_t{1}, std::size_t{100000}, MiB, 8 * MiB, 1024 * MiB}) {
      SCOPED_TRACE("batch " + std::to_string(g.batch) + " budget " + std::to_string(budget));
      expect_split_covers_the_epoch(ChunkPlan::split(g, budget), g, budget);
    }
}

TEST(ChunkPlan, BudgetBelowOneBatchGivesSingleBatchesAboveTheEpochOneChunk) {
  const BatchGeometry g{60000, 256, 784};
  const ChunkPlan small = ChunkPlan::split(g, 1000);
  EXPECT_EQ(small.batches_per_chunk(), 1);
  EXPECT_EQ(small.chunks(), 235);
  const ChunkPlan big = ChunkPlan::split(g, std::size_t{1} << 30);
  EXPECT_EQ(big.chunks(), 1);
  EXPECT_EQ(big.batches_per_chunk(), 235);
  EXPECT_EQ(big.split_chunk(0).bytes(), 60000u * 788);
  EXPECT_TRUE(big.ends_chunk(234));
  EXPECT_FALSE(big.ends_chunk(233));
  EXPECT_THROW(ChunkPlan::split(g, 0), std::invalid_argument);
  EXPECT_THROW(ChunkPlan::packed(g, 0), std::invalid_argument);
}

// The copy chunks of the graph forms: k = max(1, chunk bytes / block stride) whole blocks.
TEST(ChunkPlan, PackedChunksAreKWholeBlocksInOneRange) {
  // u8 b256: a block is 201728 B (stride too: 788·256 is a multiple of 16); 8 MiB: k = 41,
  // 6 chunks, the last of 30 batches ending in the 96-row one; one copy moves exactly the
  // images and labels.
  const BatchGeometry u8{60000, 256, 784};
  const ChunkPlan p = ChunkPlan::packed(u8, 8 * MiB);
  EXPECT_EQ(p.batches_per_chunk(), 41);
  EXPECT_EQ(p.chunks(), 6);
  EXPECT_EQ(p.packed_chunk(1).offset, 41u * 201728);
  EXPECT_EQ(p.packed_chunk(0).bytes, 41u * 201728);
  EXPECT_EQ(p.packed_chunk(5).bytes, 29u * 201728 + 96 * 788);
  EXPECT_EQ(p.packed_slot_bytes(), 41u * 201728);
  EXPECT_EQ(p.packed_offset_in_chunk(42), 201728u);  // chunk 1's second block
  EXPECT_EQ(p.packed_epoch_bytes(), 60000u * 788);
  expect_packed_covers_the_epoch(p, u8, 8 * MiB);
  // 1 MiB: k = 5 (1048576 / 201728 = 5.2); 47 chunks, the last of 5 batches (235 = 47·5).
  const ChunkPlan one = ChunkPlan::packed(u8, MiB);
  EXPECT_EQ(one.batches_per_chunk(), 5);
  EXPECT_EQ(one.chunks(), 47);
  // f32 b1024: a block is 1024·3140 = 3215360 B > 1 MiB: one batch per chunk.
  const BatchGeometry f32{60000, 1024, 3136};
  const ChunkPlan single = ChunkPlan::packed(f32, MiB);
  EXPECT_EQ(single.batches_per_chunk(), 1);
  EXPECT_EQ(single.chunks(), f32.batches());
  EXPECT_EQ(single.packed_slot_bytes(), 3215360u);
  expect_packed_covers_the_epoch(single, f32, MiB);
  // A chunk bigger than the epoch: one chunk of every batch, the slot the whole epoch.
  const ChunkPlan all = ChunkPlan::packed(u8, 1024 * MiB);
  EXPECT_EQ(all.chunks(), 1);
  EXPECT_EQ(all.batches_per_chunk(), 235);
  EXPECT_EQ(all.packed_slot_bytes(), 60000u * 788);
  expect_packed_covers_the_epoch(all, u8, 1024 * MiB);
}

TEST(ChunkPlan, PackedChunksOfOddBatchesCarryTheBlockTails) {
  // u8 b1007: a block is 1007·788 = 793516 B, its stride 793520: 8 MiB holds k = 10, 60 batches
  // in 6 chunks; each chunk's copy also moves the 4-byte tail of its first 9 blocks.
  const BatchGeometry g{60000, 1007, 784};
  const ChunkPlan p = ChunkPlan::packed(g, 8 * MiB);
  EXPECT_EQ(p.batches_per_chunk(), 10);
  EXPECT_EQ(p.chunks(), 6);
  EXPECT_EQ(p.packed_chunk(0).bytes, 9u * 793520 + 793516);
  EXPECT_EQ(p.packed_epoch_bytes(), 60000u * 788 + 6 * 9 * 4);
  for (const BatchGeometry h : {g, BatchGeometry{60000, 1007, 3136}, BatchGeometry{60000, 3, 784},
                                BatchGeometry{1001, 7, 25}, BatchGeometry{1001, 33, 25},
                                BatchGeometry{100, 256, 784}})
    for (const std::size_t budget : {std::size_t{1}, std::size_t{4000}, MiB, 8 * MiB}) {
      SCOPED_TRACE("batch " + std::to_string(h.batch) + " bytes/sample " +
                   std::to_string(h.image_bytes_per_sample) + " budget " + std::to_string(budget));
      expect_packed_covers_the_epoch(ChunkPlan::packed(h, budget), h, budget);
    }
}

TEST(ChunkPlan, AnEmptyPlanHasNoChunks) {
  const ChunkPlan p;
  EXPECT_EQ(p.chunks(), 0);
  EXPECT_EQ(p.packed_epoch_bytes(), 0u);
  EXPECT_EQ(p.packed_slot_bytes(), 0u);
  EXPECT_EQ(p.split_epoch_bytes(), 0u);
}
