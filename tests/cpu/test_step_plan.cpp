// test_step_plan.cpp: the work split of the single-launch step (kernels::plan_step) and the
// workspace it needs. The plan decides every fp32 summation order of the step, so it must be
// a pure function of (rows, in, hidden) within the bounds the kernel assumes; these run
// without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/common/pixel_norm.h"
#include "kernels/single_launch/step_launcher.h"

namespace {

namespace k = memstrat::kernels;

TEST(StepPlan, StaysWithinTheKernelsBoundsForEveryBatchSize) {
  for (int hidden : {4, 20, 256, 1024}) {
    for (int in : {4, 36, 784}) {
      const std::size_t ws = k::step_partial_floats(1100, in, hidden);
      for (int rows = 1; rows <= 1100; ++rows) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " in " + std::to_string(in) + " hidden " +
                     std::to_string(hidden));
        const k::StepPlan p = k::plan_step(rows, in, hidden);
        ASSERT_EQ(p.rows, rows);
        ASSERT_TRUE(p.a_tr == 1 || p.a_tr == 2 || p.a_tr == 4 || p.a_tr == 8);
        ASSERT_GE(4 * p.a_tr, rows < 32 ? 4 : 32) << "tile rows";
        ASSERT_GE(p.a_chunks, 1);
        ASSERT_LE(p.a_chunks, in / 4) << "a chunk must hold at least one K quad";
        ASSERT_TRUE(p.b_wpr == 1 || p.b_wpr == 2 || p.b_wpr == 4 || p.b_wpr == 8);
        ASSERT_TRUE(p.c_split == 1 || p.c_split == 2 || p.c_split == 4 || p.c_split == 8);
        ASSERT_LE(static_cast<std::size_t>(p.a_chunks) * rows * hidden, ws) << "workspace";
        const k::StepPlan again = k::plan_step(rows, in, hidden);
        ASSERT_EQ(again.a_chunks, p.a_chunks);
        ASSERT_EQ(again.a_tr, p.a_tr);
      }
    }
  }
}

TEST(StepPlan, SmallBatchesSpreadOverManyWarps) {
  // batch 8, hidden 256: one 8×64 row of tiles (4 tiles); K split 32 ways -> 128 warp items.
  const k::StepPlan b8 = k::plan_step(8, 784, 256);
  EXPECT_EQ(b8.a_tr, 2);
  EXPECT_EQ(b8.a_chunks, 32);
  EXPECT_EQ(b8.b_wpr, 8);
  EXPECT_EQ(b8.c_split, 1);
  // batch 256: 8×16 tiles of 32×16, 16 chunks -> 2048 items; 8 warps per row; K (256 rows)
  // split 4 ways in phase C.
  const k::StepPlan b256 = k::plan_step(256, 784, 256);
  EXPECT_EQ(b256.a_tr, 8);
  EXPECT_EQ(b256.a_chunks, 16);
  EXPECT_EQ(b256.b_wpr, 8);
  EXPECT_EQ(b256.c_split, 4);
}

// The tall phase-C tile (launchers for StepLauncher::kTallRows rows and more) changes only c_split:
// its tiles are twice as wide, so K is split one step further; phases A and B are the same.
TEST(StepPlan, TallPhaseCTileSplitsKOneStepFurther) {
  for (const int rows : {1, 8, 100, 128, 256, 600, 1024}) {
    const k::StepPlan n = k::plan_step(rows, 784, 256), t = k::plan_step(rows, 784, 256, true);
    EXPECT_EQ(t.a_tr, n.a_tr) << rows;
    EXPECT_EQ(t.a_chunks, n.a_chunks) << rows;
    EXPECT_EQ(t.b_wpr, n.b_wpr) << rows;
    EXPECT_EQ(t.c_split, rows >= 256 ? 8 : rows >= 128 ? 4 : 2) << rows;
  }
  EXPECT_EQ(k::plan_step(1024, 784, 256, false).c_split, 8);
}

// The kernel normalises a uint8 pixel with pixel_norm (kernels/pixel_norm.h: 2^23 + v built
// from the bits, then fmaf(v, hi, v·lo)) instead of converting and dividing. That must equal the
// division of normalize_u8 / normalize_pixel bit for bit for every value at every byte
// position of the loaded word (a plain multiply by fl(1/255) differs for 126 values).
TEST(StepPlan, PixelNormalisationWithoutDivisionIsExact) {
  int differ_mul = 0;
  for (int v = 0; v < 256; ++v) {
    const float want = k::normalize_pixel(static_cast<std::uint8_t>(v));
    for (int byte = 0; byte < 4; ++byte) {
      // v at `byte`, other bytes set to something else.
      const unsigned word = (0xA5C3E1F7u & ~(0xFFu << (8 * byte))) | (static_cast<unsigned>(v) << (8 * byte));
      const float got = memstrat::kernels::pixel_norm(word, byte);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "pixel " << v << " byte " << byte;
    }
    const float q = static_cast<float>(v) * (1.0f / 255.0f);
    differ_mul += std::memcmp(&q, &want, sizeof(float)) != 0;
  }
  EXPECT_GT(differ_mul, 0) << "a plain multiply would do";
}

TEST(StepPlan, UnsupportedShapesSayWhy) {
  EXPECT_EQ(k::step_unsupported(784, 256, 10), "");
  EXPECT_NE(k::step_unsupported(785, 256, 10).find("multiple of 4"), std::string::npos);
  EXPECT_NE(k::step_unsupported(784, 258, 10).find("multiple of 4"), std::string::npos);
  EXPECT_NE(k::step_unsupported(784, 256, 17).find("classes"), std::string::npos);
  EXPECT_NE(k::step_unsupported(784, 4096, 10).find("shared memory"), std::string::npos);
  EXPECT_NE(k::step_unsupported(0, 256, 10), "");
}

}  // namespace
