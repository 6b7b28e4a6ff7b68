// Registry: the one list the CLI, tests and matrix runner enumerate.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "memory_strategies/registry.h"

using namespace memstrat;

TEST(Registry, HasTheEightDesignStrategiesInOrder) {
  std::vector<std::string> names;
  for (const auto& e : strategy_registry()) names.emplace_back(e.name);
  const std::vector<std::string> want = {"resident", "pageable", "pinned", "double-buffer",
                                         "zero-copy", "um", "um-prefetch", "um-advise"};
  EXPECT_EQ(names, want);
}

TEST(Registry, NamesUniqueDescriptionsPresentFactoriesMakeTheNamedStrategy) {
  std::set<std::string_view> seen;
  for (const auto& e : strategy_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    EXPECT_GT(e.description.size(), 20u) << e.name;
    auto s = e.make();  // constructing allocates nothing (attach does)
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->name(), e.name);
  }
}

TEST(Registry, FindStrategy) {
  ASSERT_NE(find_strategy("pinned"), nullptr);
  EXPECT_EQ(find_strategy("pinned")->name, "pinned");
  EXPECT_EQ(find_strategy("Pinned"), nullptr);
  EXPECT_EQ(find_strategy(""), nullptr);
  EXPECT_NE(strategy_names().find("um-advise"), std::string::npos);
}

TEST(Registry, WaiverReasonsFollowDeviceCaps) {
  DeviceCaps full;
  full.concurrent_managed_access = full.managed_memory = full.can_map_host_memory = true;
  DeviceCaps none;  // all false
  for (const auto& e : strategy_registry()) {
    EXPECT_EQ(e.unsupported(full), "") << e.name;
  }
  EXPECT_EQ(find_strategy("resident")->unsupported(none), "");
  EXPECT_NE(find_strategy("zero-copy")->unsupported(none), "");
  EXPECT_NE(find_strategy("um")->unsupported(none), "");
  DeviceCaps managed_only = none;
  managed_only.managed_memory = true;
  EXPECT_EQ(find_strategy("um")->unsupported(managed_only), "");
  EXPECT_NE(find_strategy("um-prefetch")->unsupported(managed_only).find("concurrentManagedAccess"),
            std::string::npos);
}

TEST(Registry, MakeSupportedRefusesWhatTheDeviceCannotRun) {
  DeviceCaps none;  // all false
  try {
    make_supported(*find_strategy("zero-copy"), none);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("canMapHostMemory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_supported(*find_strategy("um-advise"), none), std::runtime_error);
  const auto s = make_supported(*find_strategy("resident"), none);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "resident");
}
