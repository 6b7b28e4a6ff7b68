// pattern.h: the data every primitive moves and checks. Word i of a buffer written with key k
// is (i ^ k) | 1: it depends on the position (a shifted or truncated copy fails), on the key
// (each sample can use a new one, so stale data from an earlier sample fails) and is never 0
// (a cleared destination fails). It costs one xor and one or per word, so a timed host write
// of the pattern runs at store bandwidth, not at the speed of a hash.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace memstrat {

/// The key of the sample with this seed: an odd multiplier spreads consecutive seeds over all 32
/// bits. Two keys that differ only in bit 0 would give the same words (the | 1); that needs seeds
/// about 2.4e8 apart, far more samples than a sweep takes.
__host__ __device__ inline std::uint32_t pattern_key(std::uint32_t seed) {
  return seed * 0x9E3779B1u;
}

/// Word i of the pattern with key `key`. Positions repeat after 2^32 words (16 GiB).
__host__ __device__ inline std::uint32_t pattern_word(std::size_t i, std::uint32_t key) {
  return (static_cast<std::uint32_t>(i) ^ key) | 1u;
}

/// Host: write the pattern of `seed` into words [0, words) of p.
void fill_pattern_host(std::uint32_t* p, std::size_t words, std::uint32_t seed);

/// Host: "" when p holds the pattern of `seed`, else where it first differs and how many
/// words are wrong.
std::string check_pattern_host(const std::uint32_t* p, std::size_t words, std::uint32_t seed);

/// The message both checks give for a wrong buffer.
std::string pattern_mismatch(std::size_t first_word, std::uint32_t got, std::uint32_t seed,
                             std::size_t wrong_words, std::size_t words);

}  // namespace memstrat
