// rank_sum.h: rank_sum, how data-parallel training (--reduce exact, --emulate-gpus) combines the
// shards' gradients: N gathered gradient buffers summed element by element in rank order,
// (((g_0 + g_1) + g_2) + ... + g_{N-1}). The order is fixed, so the result does not depend on how
// the buffers were gathered (NCCL's algorithm, topology) nor on which GPU sums them: every GPU
// of a run and the one-GPU emulation get the same bits. CPU reference: cpu_ref::rank_sum.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace memstrat::kernels {

/// out[i] = gathered[0·count + i] + gathered[1·count + i] + ... + gathered[(ranks-1)·count + i],
/// added left to right (rank 0 first, no leading zero). ranks >= 1; out may alias slot 0 but no
/// other slot. Enqueued on `s`; checks the launch.
void rank_sum(const float* gathered, int ranks, std::size_t count, float* out, cudaStream_t s);

}  // namespace memstrat::kernels
