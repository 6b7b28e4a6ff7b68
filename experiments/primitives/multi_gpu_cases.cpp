#include "experiments/primitives/multi_gpu_cases.h"

#include <stdexcept>

namespace memstrat {

const std::vector<MultiGpuPatternEntry>& multi_gpu_patterns() {
  using P = MultiGpuPattern;
  static const std::vector<MultiGpuPatternEntry> list = {
      {"h2d-alone", "pinned host -> GPU g (cudaMemcpyAsync), the other GPUs idle; each GPU",
       P::H2dAlone},
      {"h2d-all",
       "pinned host -> every GPU at once, each from its own pinned buffer; per-GPU rate from its "
       "own events, algbw = N x size / host time",
       P::H2dAll},
      {"d2d-ce", "GPU a -> GPU b, cudaMemcpyPeerAsync on a's stream (copy engine); each ordered pair",
       P::D2dCe},
      {"d2d-sm",
       "GPU a -> GPU b, a kernel on b reads a's memory over the peer link (SM copy); each "
       "ordered pair",
       P::D2dSm},
      {"d2d-ce-both", "a -> b and b -> a at once, copy engines; each pair; algbw = 2 x size / time",
       P::D2dCeBothWays},
      {"d2d-sm-both",
       "a -> b and b -> a at once, each read by a kernel on its destination; each pair",
       P::D2dSmBothWays},
      {"one-to-all", "GPU 0 -> every other GPU at once (copy engines); algbw = (N-1) x size / time",
       P::OneToAll},
      {"all-to-one", "every other GPU -> GPU 0 at once (copy engines); algbw = (N-1) x size / time",
       P::AllToOne},
      {"nccl-all-reduce",
       "ncclAllReduce sum of floats, out of place, all GPUs (busbw = algbw x 2(N-1)/N)",
       P::NcclAllReduce},
      {"nccl-all-gather",
       "ncclAllGather of floats, out of place; size = the gathered output (busbw = algbw x "
       "(N-1)/N)",
       P::NcclAllGather},
      {"nccl-broadcast", "ncclBroadcast of floats from GPU 0, out of place (busbw = algbw)",
       P::NcclBroadcast},
  };
  return list;
}

const MultiGpuPatternEntry* find_multi_gpu_pattern(std::string_view name) {
  for (const auto& e : multi_gpu_patterns())
    if (e.name == name) return &e;
  return nullptr;
}

std::string multi_gpu_pattern_names() {
  std::string s;
  for (const auto& e : multi_gpu_patterns()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

bool is_collective(MultiGpuPattern p) {
  return p == MultiGpuPattern::NcclAllReduce || p == MultiGpuPattern::NcclAllGather ||
         p == MultiGpuPattern::NcclBroadcast;
}

bool is_host_timed(MultiGpuPattern p) {
  return !(p == MultiGpuPattern::H2dAlone || p == MultiGpuPattern::D2dCe ||
           p == MultiGpuPattern::D2dSm);
}

std::string MultiGpuCase::label(int gpus) const {
  const std::string name(entry->name);
  switch (entry->pattern) {
    case MultiGpuPattern::H2dAlone:
      return name + " " + std::to_string(dst);
    case MultiGpuPattern::D2dCe:
    case MultiGpuPattern::D2dSm:
      return name + " " + std::to_string(src) + "->" + std::to_string(dst);
    case MultiGpuPattern::D2dCeBothWays:
    case MultiGpuPattern::D2dSmBothWays:
      return name + " " + std::to_string(src) + "<->" + std::to_string(dst);
    default:
      return name + " x" + std::to_string(gpus);
  }
}

std::vector<MultiGpuCase> multi_gpu_cases(const MultiGpuPatternEntry& e, int gpus) {
  if (gpus < 2)
    throw std::invalid_argument("multi-GPU patterns need at least 2 GPUs, not " +
                                std::to_string(gpus));
  std::vector<MultiGpuCase> out;
  switch (e.pattern) {
    case MultiGpuPattern::H2dAlone:
      for (int g = 0; g < gpus; ++g) out.push_back({&e, -1, g});
      break;
    case MultiGpuPattern::D2dCe:
    case MultiGpuPattern::D2dSm:
      for (int a = 0; a < gpus; ++a)
        for (int b = 0; b < gpus; ++b)
          if (a != b) out.push_back({&e, a, b});
      break;
    case MultiGpuPattern::D2dCeBothWays:
    case MultiGpuPattern::D2dSmBothWays:
      for (int a = 0; a < gpus; ++a)
        for (int b = a + 1; b < gpus; ++b) out.push_back({&e, a, b});
      break;
    case MultiGpuPattern::OneToAll:
    case MultiGpuPattern::NcclBroadcast:
      out.push_back({&e, 0, -1});
      break;
    case MultiGpuPattern::AllToOne:
      out.push_back({&e, -1, 0});
      break;
    case MultiGpuPattern::H2dAll:
    case MultiGpuPattern::NcclAllReduce:
    case MultiGpuPattern::NcclAllGather:
      out.push_back({&e, -1, -1});
      break;
  }
  return out;
}

std::size_t all_gather_count(std::size_t bytes, int gpus) {
  return bytes / (sizeof(float) * static_cast<std::size_t>(gpus));
}

std::size_t measured_bytes(MultiGpuPattern p, std::size_t bytes, int gpus) {
  if (p == MultiGpuPattern::NcclAllGather)
    return all_gather_count(bytes, gpus) * sizeof(float) * static_cast<std::size_t>(gpus);
  if (is_collective(p)) return bytes / sizeof(float) * sizeof(float);
  return bytes;
}

double algbw_bytes(MultiGpuPattern p, std::size_t bytes, int gpus) {
  const double b = static_cast<double>(measured_bytes(p, bytes, gpus));
  switch (p) {
    case MultiGpuPattern::H2dAll:
      return gpus * b;
    case MultiGpuPattern::D2dCeBothWays:
    case MultiGpuPattern::D2dSmBothWays:
      return 2 * b;
    case MultiGpuPattern::OneToAll:
    case MultiGpuPattern::AllToOne:
      return (gpus - 1) * b;
    default:
      return b;
  }
}

std::optional<double> bus_factor(MultiGpuPattern p, int gpus) {
  const double n = gpus;
  switch (p) {
    case MultiGpuPattern::NcclAllReduce:
      return 2 * (n - 1) / n;
    case MultiGpuPattern::NcclAllGather:
      return (n - 1) / n;
    case MultiGpuPattern::NcclBroadcast:
      return 1.0;
    default:
      return std::nullopt;
  }
}

}  // namespace memstrat
