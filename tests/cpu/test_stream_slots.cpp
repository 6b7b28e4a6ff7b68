// The stream scenario's slots without a GPU: the size of one slot (one block: a full batch's
// images, then its labels at a 16-byte boundary, rounded up to 64 KiB so that no two slots share
// a page) and the bound on all of them together that the CLI checks before any device work.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "memory_strategies/stream_slots.h"

using namespace memstrat;

namespace {
std::uint64_t pages(std::uint64_t bytes) { return (bytes + 65535) / 65536 * 65536; }
}  // namespace

TEST(StreamSlots, OneSlotIsOneBlockOnItsOwnPages) {
  // MNIST u8: 256 x 784 = 200704 bytes of images (a multiple of 16), then 1024 of labels.
  EXPECT_EQ(stream_slot_bytes(256, 784), pages(200704u + 1024u));
  EXPECT_EQ(stream_slot_bytes(256, 784), 4u * 65536u);
  // f32, batch 1007: 1007 x 3136 = 3157952 (multiple of 16), labels 4028.
  EXPECT_EQ(stream_slot_bytes(1007, 3136), pages(3157952u + 4028u));
  // Odd row size: images 13 x 7 = 91 -> 96, labels 52.
  EXPECT_EQ(stream_slot_bytes(13, 7), 65536u);
  // Exactly one page of data stays one page.
  EXPECT_EQ(stream_slot_bytes(16, 4092), 65536u);
  EXPECT_EQ(stream_slot_bytes(16, 4093), 2u * 65536u);
  for (const int batch : {1, 3, 255, 1000})
    EXPECT_EQ(stream_slot_bytes(batch, 784) % kSlotAlign, 0u) << batch;
}

TEST(StreamSlots, TheSlotsTogetherAreBounded) {
  const std::uint64_t slot = stream_slot_bytes(4096, 3136);  // 12.9 MB
  const int fits = static_cast<int>(kMaxSlotBytes / slot);
  EXPECT_NO_THROW(check_stream_slots(fits, 4096, 3136));
  try {
    check_stream_slots(fits + 1, 4096, 3136);
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--prefetch " + std::to_string(fits + 1)), std::string::npos) << m;
    EXPECT_NE(m.find("--batch"), std::string::npos) << m;
    EXPECT_NE(m.find("2048 MiB"), std::string::npos) << m;
  }
  // The defaults are far inside it: 8 slots of a batch of 256 u8 images.
  EXPECT_NO_THROW(check_stream_slots(8, 256, 784));
  EXPECT_NO_THROW(check_stream_slots(kMaxPrefetch, 256, 784));
}
