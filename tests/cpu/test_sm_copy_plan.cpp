// plan_sm_copy: the load width the SM copy kernel uses for a (dst, src, bytes) and the bytes it
// copies singly before and after the wide body. Pure address arithmetic: no device needed.
#include <gtest/gtest.h>

#include <cstdint>

#include "memory_strategies/sm_copy.h"

using namespace memstrat;

namespace {
const void* at(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }
void* at_mut(std::uintptr_t a) { return reinterpret_cast<void*>(a); }
}  // namespace

TEST(SmCopyPlan, WidestCommonAlignmentHeadBodyTail) {
  const std::uintptr_t base = 0x7f0000000000;  // 16-byte aligned (and 4 KiB)
  for (std::uintptr_t d = 0; d < 32; ++d)
    for (std::uintptr_t s = 0; s < 32; ++s)
      for (const std::size_t bytes : {0u, 1u, 3u, 15u, 16u, 17u, 31u, 100u, 4096u, 200003u}) {
        const SmCopyPlan p = plan_sm_copy(at_mut(base + d), at(base + 0x1000 + s), bytes);
        SCOPED_TRACE("dst+" + std::to_string(d) + " src+" + std::to_string(s) + " bytes " +
                     std::to_string(bytes));
        // The widest width at which both addresses are equally misaligned.
        std::size_t want = 16;
        while (want > 1 && (d % want) != (s % want)) want /= 2;
        ASSERT_EQ(p.width, want);
        ASSERT_EQ(p.head + p.body * p.width + p.tail, bytes);
        ASSERT_LT(p.head, p.width == 1 ? 1u : p.width);
        ASSERT_LT(p.tail, p.width == 1 ? 1u : p.width);
        if (p.body > 0) {
          ASSERT_EQ((base + d + p.head) % p.width, 0u) << "destination body aligned";
          ASSERT_EQ((base + 0x1000 + s + p.head) % p.width, 0u) << "source body aligned";
        }
      }
}

TEST(SmCopyPlan, BothAlignedIsAll16ByteLoadsPlusATail) {
  const SmCopyPlan p = plan_sm_copy(at_mut(0x10000), at(0x20000), 256 * 788 + 5);
  EXPECT_EQ(p.width, 16u);
  EXPECT_EQ(p.head, 0u);
  EXPECT_EQ(p.body, (256u * 788 + 5) / 16);
  EXPECT_EQ(p.tail, (256u * 788 + 5) % 16);
  const SmCopyPlan odd = plan_sm_copy(at_mut(0x10001), at(0x20002), 1000);
  EXPECT_EQ(odd.width, 1u);
  EXPECT_EQ(odd.body, 1000u);
}
