// run_multi_gpu.h: `memstrat primitives --gpus N`: every selected multi-GPU pattern
// (multi_gpu_cases.h) on GPUs 0..N-1, each case over the size sweep with warm-up and timed
// samples, every sample's data checked; a line per size, a summary table, and one JSON Lines
// record per case ("record": "multi-gpu-primitive"; docs/methodology.md, "Several GPUs").
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "experiments/primitives/options.h"

namespace memstrat {

/// Host-timed cases repeat their work this many times per sample (as nccl-tests' iterations), so
/// that the host clock's and the launches' microseconds are spread over several transfers.
inline constexpr int kHostTimedIters = 10;

/// Needs N usable GPUs (checked by the caller) and validated options (c.patterns set). Returns
/// the exit code: 0 every case measured (or waived) and verified; 1 a case failed (wrong data,
/// CUDA or NCCL error); 3 every case is waived.
int run_multi_gpu_primitives(const PrimitivesArgs& a, const PrimitivesConfig& c,
                             const std::vector<std::string>& argv, std::ostream& out,
                             std::ostream& err);

}  // namespace memstrat
