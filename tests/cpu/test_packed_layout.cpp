// The packed host layout (one 16-byte-aligned block per batch: images, then labels): offsets and
// alignment for any batch size and sample size, and exactly the bytes of the split layout for
// every batch, static and refresh, written in place by EpochWriter / HostEpochSource.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/host_epoch_source.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;
using memstrat::testing::synthetic_dataset;

namespace {
StrategyOptions opts(Transfer t, Scenario s, int batch) {
  StrategyOptions o;
  o.transfer = t;
  o.scenario = s;
  o.batch = batch;
  o.seed = 5;
  return o;
}

// Host storage for the packed layout, 16-byte aligned by its element type.
struct Aligned {
  explicit Aligned(std::size_t bytes) : v((bytes + 15) / 16 + 1) {}
  void* data() { return v.data(); }
  const std::uint8_t* bytes() const { return reinterpret_cast<const std::uint8_t*>(v.data()); }
  std::vector<std::max_align_t> v;  // max_align_t is 16-byte aligned on the platforms we build for
};

// Batch b's images and labels from the split layout equal those of block b.
void expect_same_batches(const PackedLayout& L, const std::uint8_t* images,
                         const std::int32_t* labels, const std::uint8_t* blocks,
                         const std::string& what) {
  const BatchGeometry& g = L.geom;
  for (int b = 0; b < g.batches(); ++b) {
    const std::uint8_t* blk = blocks + L.block_offset(b);
    ASSERT_EQ(0, std::memcmp(blk, images + g.image_offset(b), g.image_bytes(b)))
        << what << ": images of batch " << b;
    ASSERT_EQ(0, std::memcmp(blk + L.label_offset(b), labels + g.first(b), g.label_bytes(b)))
        << what << ": labels of batch " << b;
  }
}
}  // namespace

TEST(PackedLayout, BlocksAreAlignedDisjointAndInOrderForAnyBatchAndSampleSize) {
  struct Case {
    std::int64_t samples;
    int batch;
    std::size_t per_sample;
  };
  // MNIST u8/f32 at batch 256 (ragged last batch), odd batches, batch 1, a batch larger than
  // the data, and a 25-byte sample (5x5 u8) whose images need a gap before the labels.
  for (const Case c : {Case{60000, 256, 784}, Case{60000, 256, 3136}, Case{60000, 1007, 784},
                       Case{60000, 3, 784}, Case{1001, 1, 784}, Case{100, 256, 784},
                       Case{1001, 7, 25}, Case{1001, 33, 25}, Case{1000, 5, 100}}) {
    const PackedLayout L{BatchGeometry{c.samples, c.batch, c.per_sample}};
    const BatchGeometry& g = L.geom;
    SCOPED_TRACE("samples " + std::to_string(c.samples) + " batch " + std::to_string(c.batch) +
                 " bytes/sample " + std::to_string(c.per_sample));
    std::uint64_t payload = 0, sum = 0;
    for (int b = 0; b < g.batches(); ++b) {
      EXPECT_EQ(L.block_offset(b) % 16, 0u) << b;
      EXPECT_EQ(L.label_offset(b) % 16, 0u) << b;
      EXPECT_GE(L.label_offset(b), g.image_bytes(b)) << b;
      EXPECT_LT(L.label_offset(b), g.image_bytes(b) + 16) << b;
      EXPECT_EQ(L.block_bytes(b), L.label_offset(b) + g.label_bytes(b)) << b;
      EXPECT_LE(L.block_bytes(b), L.block_stride()) << b;
      const std::size_t end = L.block_offset(b) + L.block_bytes(b);
      if (b + 1 < g.batches()) {
        EXPECT_LE(end, L.block_offset(b + 1)) << b;
      }
      EXPECT_LE(end, L.total_bytes()) << b;
      payload += g.bytes(b);
      sum += L.block_bytes(b);
    }
    EXPECT_EQ(L.block_stride() % 16, 0u);
    EXPECT_EQ(L.total_bytes() % 16, 0u);
    EXPECT_EQ(L.epoch_bytes(), sum);
    EXPECT_EQ(payload, static_cast<std::uint64_t>(c.samples) * (c.per_sample + 4));
    // The only extra bytes a block copy moves are the gap before the labels (< 16 per batch).
    EXPECT_LT(L.epoch_bytes() - payload, 16u * static_cast<std::uint64_t>(g.batches()));
    if (c.per_sample % 16 == 0) {
      EXPECT_EQ(L.epoch_bytes(), payload) << "no gap when rows align";
    }
  }
}

TEST(PackedLayout, MnistNumbers) {
  const PackedLayout L{BatchGeometry{60000, 256, 784}};
  EXPECT_EQ(L.geom.batches(), 235);
  EXPECT_EQ(L.block_stride(), 256u * 788);
  EXPECT_EQ(L.label_offset(234), 96u * 784);  // 60000 = 234 * 256 + 96
  EXPECT_EQ(L.block_bytes(234), 96u * 788);
  EXPECT_EQ(L.total_bytes(), 234u * 256 * 788 + 96 * 788);
  EXPECT_EQ(L.epoch_bytes(), 60000u * 788);
  EXPECT_EQ(L.geom.epoch_bytes(), L.epoch_bytes()) << "no gaps for MNIST: the split layout's bytes";
  EXPECT_EQ(L.geom.labelled_bytes(196), 60000u * 200);  // 784 float32 bytes a row, as uint8
  const PackedLayout empty{BatchGeometry{0, 256, 784}};
  EXPECT_EQ(empty.total_bytes(), 0u);
  EXPECT_EQ(empty.epoch_bytes(), 0u);
}

TEST(PackedLayout, WriterPutsTheSplitLayoutsBytesInEveryBlock) {
  for (const int side : {28, 5}) {  // 784 B (aligned rows) and 25 B (a gap before the labels)
    const HostDataset d = synthetic_dataset(1001, 7, side);
    for (const Transfer t : {Transfer::U8, Transfer::F32})
      for (const Scenario s : {Scenario::Static, Scenario::Refresh})
        for (const int batch : {256, 1007, 7, 1}) {
          const EpochWriter w(d, opts(t, s, batch));
          const PackedLayout L{BatchGeometry{w.samples(), batch, w.image_bytes_per_sample()}};
          std::vector<std::uint8_t> images(w.image_bytes());
          std::vector<std::int32_t> labels(static_cast<std::size_t>(w.samples()));
          Aligned blocks(L.total_bytes());
          for (const int epoch : {1, 2}) {
            const std::string what = "side " + std::to_string(side) + " " +
                                     std::string(to_string(t)) + " " + std::string(to_string(s)) +
                                     " batch " + std::to_string(batch) + " epoch " +
                                     std::to_string(epoch);
            w.write(epoch, images.data(), labels.data());
            w.write_packed(epoch, blocks.data(), L);
            expect_same_batches(L, images.data(), labels.data(), blocks.bytes(), what);
          }
        }
  }
}

TEST(PackedLayout, WriterRefusesALayoutOfOtherData) {
  const HostDataset d = synthetic_dataset(100, 7, 28);
  const EpochWriter w(d, opts(Transfer::U8, Scenario::Static, 10));
  Aligned blocks(PackedLayout{BatchGeometry{100, 10, 3136}}.total_bytes());
  EXPECT_THROW(w.write_packed(1, blocks.data(), PackedLayout{BatchGeometry{100, 10, 3136}}),
               std::invalid_argument);
  EXPECT_THROW(w.write_packed(1, blocks.data(), PackedLayout{BatchGeometry{99, 10, 784}}),
               std::invalid_argument);
}

// HostEpochSource bound to packed storage: static data written once at bind, refresh data at
// every begin_epoch; views point into the right block with the labels after the images.
TEST(PackedLayout, HostEpochSourceWritesAndViewsPackedStorage) {
  const HostDataset d = synthetic_dataset(1001, 7, 28);
  for (const Scenario s : {Scenario::Static, Scenario::Refresh}) {
    const StrategyOptions o = opts(Transfer::U8, s, 100);
    HostEpochSource src;
    src.configure(d, o, nullptr);
    const PackedLayout L = src.packed();
    ASSERT_EQ(L.geom.batches(), 11);
    Aligned blocks(L.total_bytes());
    src.bind_packed(blocks.data());

    const EpochWriter ref(d, o);
    std::vector<std::uint8_t> images(ref.image_bytes());
    std::vector<std::int32_t> labels(static_cast<std::size_t>(ref.samples()));
    ref.write(1, images.data(), labels.data());
    if (s == Scenario::Static)  // written at bind, as part of set-up
      expect_same_batches(L, images.data(), labels.data(), blocks.bytes(), "static bind");
    for (const int epoch : {1, 2, 3}) {
      EXPECT_EQ(src.begin_epoch(epoch), s == Scenario::Refresh);
      ref.write(epoch, images.data(), labels.data());
      expect_same_batches(L, images.data(), labels.data(), blocks.bytes(),
                          std::string(to_string(s)) + " epoch " + std::to_string(epoch));
    }
    for (int b = 0; b < L.geom.batches(); ++b) {
      const BatchView v = src.packed_epoch_view(blocks.data(), b);
      EXPECT_EQ(v.x_u8, blocks.bytes() + L.block_offset(b));
      EXPECT_EQ(reinterpret_cast<const std::uint8_t*>(v.y), v.x_u8 + L.label_offset(b));
      EXPECT_EQ(v.x_f32, nullptr);
      EXPECT_EQ(v.rows, b < 10 ? 100 : 1);
      EXPECT_EQ(v.first_sample, 100 * b);
      const BatchView slot = src.packed_slot_view(blocks.data(), b);
      EXPECT_EQ(slot.x_u8, blocks.bytes());
      EXPECT_EQ(slot.rows, v.rows);
    }
  }
}

TEST(PackedLayout, BindRefusesStorageThatIsNot16ByteAligned) {
  const HostDataset d = synthetic_dataset(64, 7, 28);
  HostEpochSource src;
  src.configure(d, opts(Transfer::U8, Scenario::Static, 16), nullptr);
  Aligned blocks(src.packed().total_bytes() + 16);
  EXPECT_THROW(src.bind_packed(static_cast<std::uint8_t*>(blocks.data()) + 4),
               std::invalid_argument);
}
