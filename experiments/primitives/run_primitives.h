// run_primitives.h: `memstrat primitives`: measure the selected transfer primitives over the size
// sweep on one GPU, print progress and a summary table, append one record per primitive.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "experiments/primitives/options.h"

namespace memstrat {

/// Needs a usable device (`a.device` checked by the caller) and validated options. Returns the
/// exit code: 0 all measured (or waived) and verified, self-check passed or not applicable;
/// 1 a primitive failed (wrong data, CUDA error, managed-memory guard) or the self-check failed;
/// 3 every selected primitive is waived on this device. With a.gpus > 1: run_multi_gpu_primitives
/// (run_multi_gpu.h) on GPUs 0..N-1.
int run_primitives(const PrimitivesArgs& a, const std::vector<std::string>& argv, std::ostream& out,
                   std::ostream& err);

}  // namespace memstrat
