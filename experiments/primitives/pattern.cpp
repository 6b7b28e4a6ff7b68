#include "experiments/primitives/pattern.h"

#include <cstdio>

namespace memstrat {

void fill_pattern_host(std::uint32_t* p, std::size_t words, std::uint32_t seed) {
  const std::uint32_t key = pattern_key(seed);
  for (std::size_t i = 0; i < words; ++i) p[i] = pattern_word(i, key);
}

std::string check_pattern_host(const std::uint32_t* p, std::size_t words, std::uint32_t seed) {
  const std::uint32_t key = pattern_key(seed);
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (p[i] == pattern_word(i, key)) continue;
    if (wrong++ == 0) first = i;
  }
  return wrong == 0 ? "" : pattern_mismatch(first, p[first], seed, wrong, words);
}

std::string pattern_mismatch(std::size_t first_word, std::uint32_t got, std::uint32_t seed,
                             std::size_t wrong_words, std::size_t words) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%zu of %zu words wrong; first at byte %zu: 0x%08x, expected 0x%08x", wrong_words,
                words, first_word * sizeof(std::uint32_t), got,
                pattern_word(first_word, pattern_key(seed)));
  return buf;
}

}  // namespace memstrat
