// AugmentAfterCopy (memory_strategies/augment_after_copy.h) without a GPU: when a copying strategy
// augments after its copy, what the wrapper adds to the device footprint, and that the registry's
// copying entries are made wrapped and forward what they are (their loss curves and bytes with
// the augmentation on the GPU: tests/gpu/test_augment_gpu.cu).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "memory_strategies/augment_after_copy.h"
#include "memory_strategies/registry.h"

using namespace memstrat;

namespace {
StrategyOptions options(Scenario sc, Augment a, AugmentDevice d) {
  StrategyOptions o;
  o.scenario = sc;
  o.augment = a;
  o.augment_device = d;
  return o;
}
}  // namespace

TEST(AugmentAfterCopy, AugmentsWhereTheGpuAugmentsSomething) {
  for (const Augment a : {Augment::None, Augment::Light, Augment::Heavy}) {
    EXPECT_FALSE(augments_after_copy(options(Scenario::Static, a, AugmentDevice::Gpu)));
    EXPECT_FALSE(augments_after_copy(options(Scenario::Refresh, a, AugmentDevice::Host)));
    EXPECT_FALSE(augments_after_copy(options(Scenario::Stream, a, AugmentDevice::Host)));
    // refresh augments with its light shift whatever --augment says (the stream's option)
    EXPECT_TRUE(augments_after_copy(options(Scenario::Refresh, a, AugmentDevice::Gpu)));
    EXPECT_EQ(augments_after_copy(options(Scenario::Stream, a, AugmentDevice::Gpu)),
              a != Augment::None);
  }
}

TEST(AugmentAfterCopy, AddsTheEpochNumberToTheDeviceFootprintWhereItAugments) {
  EXPECT_EQ(AugmentAfterCopy::device_bytes(
                options(Scenario::Refresh, Augment::Light, AugmentDevice::Gpu)),
            4u);
  EXPECT_EQ(AugmentAfterCopy::device_bytes(
                options(Scenario::Stream, Augment::Heavy, AugmentDevice::Gpu)),
            4u);
  EXPECT_EQ(AugmentAfterCopy::device_bytes(
                options(Scenario::Stream, Augment::Heavy, AugmentDevice::Host)),
            0u);
  EXPECT_EQ(AugmentAfterCopy::device_bytes(
                options(Scenario::Static, Augment::Light, AugmentDevice::Gpu)),
            0u);
}

TEST(AugmentAfterCopy, TheCopyingEntriesAreMadeWrappedAndForwardWhatTheyAre) {
  int copying = 0;
  for (const StrategyEntry& e : strategy_registry()) {
    if (!e.gpu_augment_after_copy) continue;
    ++copying;
    EXPECT_FALSE(e.gpu_augment.empty()) << e.name;
    const std::unique_ptr<MemoryStrategy> s = e.make();  // allocates nothing
    EXPECT_NE(dynamic_cast<AugmentAfterCopy*>(s.get()), nullptr) << e.name;
    EXPECT_EQ(s->name(), e.name);  // the forms it forwards: test_registry's declarations
  }
  EXPECT_EQ(copying, 6) << "pageable, pinned, double-buffer and their best forms";
  EXPECT_THROW(AugmentAfterCopy(nullptr), std::invalid_argument);
}
