// registry.h: the one list of memory strategies. The CLI, the tests and the matrix runner all
// enumerate it. Adding a strategy = one new file + one line in registry.cpp: its name, a one-line
// description, the device capability it needs, a factory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memory_strategies/memory_strategy.h"

namespace memstrat {

struct StrategyEntry {
  std::string_view name;         // the CLI name
  std::string_view description;  // one line
  /// Empty when the device can run it, else the reason it is waived (not failed). The only
  /// capability check: attach() assumes it passed.
  std::string (*unsupported)(const DeviceCaps&);
  /// A new, unattached strategy (constructing allocates nothing; attach does).
  std::function<std::unique_ptr<MemoryStrategy>()> make;
};

const std::vector<StrategyEntry>& strategy_registry();
/// nullptr when unknown.
const StrategyEntry* find_strategy(std::string_view name);
/// "resident, pageable, ..." for messages.
std::string strategy_names();
/// e.make() once the device passed e.unsupported(caps); otherwise throws std::runtime_error with
/// the waiver reason. For paths that want a strategy or an error, not a waiver to report.
std::unique_ptr<MemoryStrategy> make_supported(const StrategyEntry& e, const DeviceCaps& caps);

}  // namespace memstrat
