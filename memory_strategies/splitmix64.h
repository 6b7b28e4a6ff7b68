// splitmix64.h: splitmix64, the generator behind every seeded draw of the suite (the epoch
// shuffle, the augmentations), on the host and on the GPU (MEMSTRAT_HD). Tiny, portable,
// well-mixed; reproduced from Python by the baselines.
#pragma once

#include <cstdint>

#include "memory_strategies/hd.h"

namespace memstrat {

/// Advances `state` and returns its next value.
MEMSTRAT_HD inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace memstrat
