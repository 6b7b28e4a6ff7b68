// multi_gpu_cases.h: what `memstrat primitives --gpus N` times on the N GPUs of one host, as
// plain data (no CUDA here, so the list and the arithmetic are tested on any machine):
//   the patterns (host->device alone and all at once, device->device by copy engine and by SM,
//   one way and both ways, one-to-all, all-to-one, NCCL all-reduce / all-gather / broadcast),
//   the cases each expands to at N GPUs (one per GPU, per ordered pair, per unordered pair or one
//   for all), the bytes a case moves at a size, and nccl-tests' bandwidth definitions:
//   algbw = bytes / time; busbw = algbw x 2(N-1)/N (all-reduce), (N-1)/N (all-gather), 1
//   (broadcast) (nccl-tests, doc/PERFORMANCE.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memstrat {

enum class MultiGpuPattern {
  H2dAlone,       // pinned host -> GPU g, the others idle; one case per GPU
  H2dAll,         // pinned host -> every GPU at once, each from its own pinned buffer; one case
  D2dCe,          // cudaMemcpyPeerAsync src -> dst on the source's stream; per ordered pair
  D2dSm,          // a kernel on dst reads src's memory over the peer link; per ordered pair
  D2dCeBothWays,  // a -> b and b -> a at once, copy engines; per unordered pair
  D2dSmBothWays,  // a -> b and b -> a at once, each read by a kernel on its destination
  OneToAll,       // GPU 0 -> every other GPU at once (copy engines); one case
  AllToOne,       // every other GPU -> GPU 0 at once (copy engines); one case
  NcclAllReduce,  // ncclAllReduce (sum, float), out of place, every GPU
  NcclAllGather,  // ncclAllGather (float), out of place: the size is the gathered output
  NcclBroadcast,  // ncclBroadcast from GPU 0 (float), out of place
};

struct MultiGpuPatternEntry {
  std::string_view name;         // the CLI name (-p)
  std::string_view description;  // one line: what exactly is timed
  MultiGpuPattern pattern;
};

/// Every pattern, in the order they run.
const std::vector<MultiGpuPatternEntry>& multi_gpu_patterns();
/// nullptr when unknown.
const MultiGpuPatternEntry* find_multi_gpu_pattern(std::string_view name);
/// "h2d-alone, h2d-all, ..." for messages.
std::string multi_gpu_pattern_names();

bool is_collective(MultiGpuPattern p);
/// Two or more streams, on one or several GPUs, run at once: the host clock times the whole
/// (each stream's own events give its own rate). Otherwise one stream's CUDA events time it.
bool is_host_timed(MultiGpuPattern p);

/// One measured instance of a pattern: which GPUs take part. src / dst: -1 where the pattern
/// has none (h2d-all, one-to-all's dst, the collectives; broadcast's src is its root 0).
struct MultiGpuCase {
  const MultiGpuPatternEntry* entry = nullptr;
  int src = -1;
  int dst = -1;
  /// "d2d-ce 0->1", "h2d-alone 1", "nccl-all-reduce x4": for output lines and errors.
  std::string label(int gpus) const;
};

/// The cases of `e` at `gpus` >= 2 GPUs, in a fixed order (GPUs ascending, pairs (a, b) by a
/// then b). Throws std::invalid_argument for gpus < 2.
std::vector<MultiGpuCase> multi_gpu_cases(const MultiGpuPatternEntry& e, int gpus);

/// Bytes each rank contributes to an all-gather whose output is `bytes`, in floats: bytes /
/// (4 gpus), rounded down (the size measured is then count x 4 x gpus).
std::size_t all_gather_count(std::size_t bytes, int gpus);
/// The size a case actually moves at the size asked for: `bytes`, except the all-gather's output
/// (all_gather_count x 4 x gpus) and the collectives' float granularity (a multiple of 4).
std::size_t measured_bytes(MultiGpuPattern p, std::size_t bytes, int gpus);

/// The bytes that cross, whose rate is the algorithm bandwidth: one transfer's size for one
/// stream (h2d-alone, one-way d2d) and the collectives (nccl-tests' algbw); the sum over the
/// streams that run at once otherwise (h2d-all: N x size; both ways: 2 x size; one-to-all and
/// all-to-one: (N - 1) x size).
double algbw_bytes(MultiGpuPattern p, std::size_t bytes, int gpus);
/// nccl-tests' busbw / algbw factor: all-reduce 2(N-1)/N, all-gather (N-1)/N, broadcast 1;
/// nullopt for the copies.
std::optional<double> bus_factor(MultiGpuPattern p, int gpus);

}  // namespace memstrat
