// The stream scenario's slots without a GPU: the size of one slot (one block: a full batch's
// images, then its labels, each part 16-byte aligned) and the bound on all of them together
// that the CLI checks before any device work.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "memory_strategies/stream_slots.h"

using namespace memstrat;

TEST(StreamSlots, OneSlotIsOneAlignedBlock) {
  // MNIST u8: 256 x 784 = 200704 bytes of images (a multiple of 16), then 1024 of labels.
  EXPECT_EQ(stream_slot_bytes(256, 784), 200704u + 1024u);
  // f32, batch 1007: 1007 x 3136 = 3157952 (multiple of 16), labels 4028 -> 4032.
  EXPECT_EQ(stream_slot_bytes(1007, 3136), 3157952u + 4032u);
  // Odd row size: images 13 x 7 = 91 -> 96, labels 52: 148 -> 160.
  EXPECT_EQ(stream_slot_bytes(13, 7), 160u);
  for (const int batch : {1, 3, 255, 1000})
    EXPECT_EQ(stream_slot_bytes(batch, 784) % 16, 0u) << batch;
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
