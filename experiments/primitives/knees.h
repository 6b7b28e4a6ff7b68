// knees.h: what a bandwidth-vs-size curve says in four numbers: the peak, the sizes where the
// curve first reaches 50% and 90% of it (knees, interpolated in log-size) and the latency at
// 4 KiB. analysis/primitives.py computes the same from the records.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace memstrat {

inline constexpr std::size_t kLatencyBytes = 4096;

struct CurveSummary {
  double peak_gbps = 0;
  std::size_t peak_bytes = 0;
  /// Where the curve first reaches 50% / 90% of its peak, scanning up from the smallest size:
  /// log2(size) interpolated linearly between the last point below and the first at or above
  /// the level. The smallest size when it already reaches the level (the knee lies at or
  /// below the range measured).
  double knee50_bytes = 0;
  double knee90_bytes = 0;
  /// Median time of a 4 KiB transfer; none when 4 KiB was not measured.
  std::optional<double> latency_4k_us;
};

/// GB/s (1e9 bytes per second) of `bytes` moved in `us` microseconds.
double gbps(std::size_t bytes, double us);

/// First size (bytes, interpolated in log2) at which gbps reaches `fraction` of its maximum.
/// `bytes` ascending, same length as `gbps`, not empty; fraction in (0, 1].
double knee_bytes(const std::vector<std::size_t>& bytes, const std::vector<double>& gbps,
                  double fraction);

/// Summary of a curve given per size its median time (µs). `bytes` ascending, not empty.
CurveSummary summarize_curve(const std::vector<std::size_t>& bytes,
                             const std::vector<double>& median_us);

}  // namespace memstrat
