// registry.h: the one list of memory strategies. The CLI, the tests and the matrix runner all
// enumerate it. Adding a strategy = one new file + one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memory_strategies/memory_strategy.h"

namespace memstrat {

struct StrategyEntry {
  std::string_view name;         // the CLI name
  std::string_view description;  // one line
  /// Empty when the device can run it, else the reason it is waived (not failed).
  std::string (*unsupported)(const DeviceCaps&);
  std::unique_ptr<MemoryStrategy> (*make)();
};

const std::vector<StrategyEntry>& strategy_registry();
/// nullptr when unknown.
const StrategyEntry* find_strategy(std::string_view name);
/// "resident, pageable, ..." for messages.
std::string strategy_names();

}  // namespace memstrat
