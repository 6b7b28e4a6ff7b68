#include "experiments/primitives/sizes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace memstrat {

namespace {
bool is_power_of_two(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The powers of two either side of v, for "use 64MiB or 128MiB" in messages.
std::string nearest_powers(std::size_t v) {
  std::size_t lo = kSizeGranule;
  while (lo * 2 <= v && lo * 2 > lo) lo *= 2;
  if (lo >= v) return format_size(static_cast<double>(lo));
  return format_size(static_cast<double>(lo)) + " or " + format_size(static_cast<double>(lo) * 2);
}
}  // namespace

std::size_t parse_size(const std::string& text) {
  const std::string what = "'" + text +
                           "' is not a size; write bytes or a number with a binary unit, e.g. "
                           "4096, 4KiB, 4K, 256MiB, 1GiB";
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) throw std::invalid_argument(what);
  const std::uint64_t number = std::stoull(text.substr(0, digits));
  const std::string unit = lower(text.substr(digits));
  int shift = -1;
  if (unit.empty() || unit == "b")
    shift = 0;
  else if (unit == "k" || unit == "kib")
    shift = 10;
  else if (unit == "m" || unit == "mib")
    shift = 20;
  else if (unit == "g" || unit == "gib")
    shift = 30;
  if (shift < 0) throw std::invalid_argument(what);
  if (number > (std::numeric_limits<std::uint64_t>::max() >> shift))
    throw std::invalid_argument(what);
  return static_cast<std::size_t>(number << shift);
}

std::string format_size(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024.0) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0 || bytes == std::floor(bytes))
    std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, int per_octave) {
  auto check_power = [](std::size_t v, const char* option) {
    if (v < kSizeGranule)
      throw std::invalid_argument(std::string(option) + " " + format_size(static_cast<double>(v)) +
                                  " is below the smallest transfer, 16 B");
    if (!is_power_of_two(v))
      throw std::invalid_argument(std::string(option) + " " + format_size(static_cast<double>(v)) +
                                  " is not a power of two; use " + nearest_powers(v));
  };
  check_power(min_bytes, "--min-size");
  check_power(max_bytes, "--max-size");
  if (min_bytes > max_bytes)
    throw std::invalid_argument("--min-size " + format_size(static_cast<double>(min_bytes)) +
                                " is larger than --max-size " +
                                format_size(static_cast<double>(max_bytes)) + "; swap them");
  if (per_octave < 1 || per_octave > kMaxSizesPerOctave)
    throw std::invalid_argument("--sizes-per-octave " + std::to_string(per_octave) +
                                " is out of range; use 1 (powers of two) to " +
                                std::to_string(kMaxSizesPerOctave));
  int octaves = 0;
  while ((min_bytes << octaves) < max_bytes) ++octaves;
  std::vector<std::size_t> sizes;
  for (int i = 0; i <= octaves * per_octave; ++i) {
    const double exact =
        static_cast<double>(min_bytes) * std::exp2(static_cast<double>(i) / per_octave);
    const auto granules = static_cast<std::size_t>(std::llround(exact / kSizeGranule));
    const std::size_t bytes = std::max<std::size_t>(1, granules) * kSizeGranule;
    if (sizes.empty() || bytes != sizes.back()) sizes.push_back(bytes);
  }
  return sizes;
}

}  // namespace memstrat
