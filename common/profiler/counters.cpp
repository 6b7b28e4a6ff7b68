#include "common/profiler/counters.h"

namespace memstrat {

std::uint64_t ApiCounts::count(std::string_view name) const {
  auto it = calls.find(std::string(name));
  return it == calls.end() ? 0 : it->second;
}

std::uint64_t ApiCounts::total() const {
  std::uint64_t t = 0;
  for (const auto& [name, n] : calls) {
    (void)name;
    t += n;
  }
  return t;
}

}  // namespace memstrat
