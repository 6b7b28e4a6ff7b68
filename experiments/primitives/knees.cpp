#include "experiments/primitives/knees.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace memstrat {

double gbps(std::size_t bytes, double us) {
  return us > 0 ? static_cast<double>(bytes) / (us * 1e3) : 0.0;
}

double knee_bytes(const std::vector<std::size_t>& bytes, const std::vector<double>& gbps,
                  double fraction) {
  if (bytes.empty() || bytes.size() != gbps.size())
    throw std::invalid_argument("knee_bytes: sizes and bandwidths must be non-empty and match");
  const double level = fraction * *std::max_element(gbps.begin(), gbps.end());
  if (gbps[0] >= level) return static_cast<double>(bytes[0]);
  for (std::size_t i = 1; i < bytes.size(); ++i) {
    if (gbps[i] < level) continue;
    const double x0 = std::log2(static_cast<double>(bytes[i - 1]));
    const double x1 = std::log2(static_cast<double>(bytes[i]));
    const double t = (level - gbps[i - 1]) / (gbps[i] - gbps[i - 1]);
    return std::exp2(x0 + t * (x1 - x0));
  }
  return static_cast<double>(bytes.back());  // unreachable: the maximum reaches any level <= 1
}

CurveSummary summarize_curve(const std::vector<std::size_t>& bytes,
                             const std::vector<double>& median_us) {
  if (bytes.empty() || bytes.size() != median_us.size())
    throw std::invalid_argument("summarize_curve: sizes and times must be non-empty and match");
  std::vector<double> bw(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) bw[i] = gbps(bytes[i], median_us[i]);
  CurveSummary s;
  const auto peak = std::max_element(bw.begin(), bw.end());
  s.peak_gbps = *peak;
  s.peak_bytes = bytes[static_cast<std::size_t>(peak - bw.begin())];
  s.knee50_bytes = knee_bytes(bytes, bw, 0.5);
  s.knee90_bytes = knee_bytes(bytes, bw, 0.9);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] == kLatencyBytes) s.latency_4k_us = median_us[i];
  return s;
}

}  // namespace memstrat
