// multi_gpu_bench.h: the device side of `memstrat primitives --gpus N`: per GPU one stream per
// peer (so that copies to different peers can use different copy engines), a source and a
// destination buffer, a pinned host source, peer access between every pair that allows it, and
// NCCL communicators (ncclCommInitAll) for the collectives. One sample of a case (a pattern with
// its GPUs, multi_gpu_cases.h) at a size is timed here and its data checked afterwards:
//   copies move the pattern of pattern.h (each GPU's and each host buffer's own seed), written
//   once; destinations are cleared before every sample, so a copy that did not happen is seen;
//   collectives move floats whose results are exact (small integers): all-reduce input on rank
//   r is (i mod 251) + r, all-gather's is 256 r + (i mod 251) + 1, broadcast's (i mod 251) + 0.5.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experiments/primitives/multi_gpu_cases.h"

namespace memstrat {

/// One sample: `us` is the time of one repetition (the host clock over `iters` repetitions of
/// every stream's work divided by iters, or one stream's event pair); `stream_us` each stream's
/// own event time per repetition, in the order multi_gpu_bench.cu documents per pattern
/// (h2d-all: GPU 0..N-1; both ways: a->b then b->a; one-to-all: to 1..N-1; all-to-one: from
/// 1..N-1); empty for a single stream and the collectives.
struct MultiGpuSample {
  double us = 0;
  std::vector<double> stream_us;
};

class MultiGpuBench {
 public:
  /// Allocates on GPUs 0..gpus-1 for sizes up to max_bytes: what `patterns` need (the host
  /// sources only for the host patterns, the all-to-one landing area only for it, NCCL only for
  /// the collectives). Throws on a CUDA or NCCL error.
  MultiGpuBench(int gpus, std::size_t max_bytes, const std::vector<const MultiGpuPatternEntry*>& patterns);
  ~MultiGpuBench();
  MultiGpuBench(const MultiGpuBench&) = delete;
  MultiGpuBench& operator=(const MultiGpuBench&) = delete;

  int gpus() const;
  /// "" when `c` can run here, else why it is waived: no peer access between its GPUs (the SM
  /// forms), or no NCCL in this build (the collectives).
  std::string unsupported(const MultiGpuCase& c) const;
  /// canAccessPeer[a][b] as cudaDeviceCanAccessPeer said (a copy-engine copy between GPUs without
  /// it goes through host memory).
  const std::vector<std::vector<bool>>& peer_access() const;

  /// Writes the sources `c` reads (once per case, before its samples).
  void prepare(const MultiGpuCase& c);
  /// Zeroes every destination `c` writes at `bytes` and waits for it (sample() starts so).
  void clear(const MultiGpuCase& c, std::size_t bytes);
  /// Clears the destinations of `c` (outside the timed region), then times `iters` repetitions.
  MultiGpuSample sample(const MultiGpuCase& c, std::size_t bytes, int iters);
  /// After a sample: "" when every destination holds what `c` should have put there.
  std::string verify(const MultiGpuCase& c, std::size_t bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memstrat
