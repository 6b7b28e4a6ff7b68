// sizes.h: transfer sizes for the primitive sweeps: parse "4KiB"/"256M"/"4096", print them, and
// build the log-spaced list between two powers of two.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace memstrat {

/// Smallest transfer a primitive moves: the SM copy kernel moves 16-byte vectors.
inline constexpr std::size_t kSizeGranule = 16;
inline constexpr int kMaxSizesPerOctave = 16;

/// "4096", "4K", "4KiB", "256M", "256MiB", "1G", "1GiB" (binary units, case-insensitive, a 'B'
/// alone allowed: "512B"). Throws std::invalid_argument saying what a size looks like.
std::size_t parse_size(const std::string& text);

/// 4096 -> "4 KiB", 268435456 -> "256 MiB", 5792 -> "5.66 KiB", 100 -> "100 B".
std::string format_size(double bytes);

/// min·2^(i/per_octave) for i = 0 .. per_octave·log2(max/min), each rounded to a multiple of
/// kSizeGranule (duplicates dropped). min and max must be powers of two >= kSizeGranule with
/// min <= max, per_octave in 1..kMaxSizesPerOctave; otherwise std::invalid_argument naming the
/// option (--min-size, --max-size, --sizes-per-octave) and a valid value.
std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, int per_octave);

}  // namespace memstrat
