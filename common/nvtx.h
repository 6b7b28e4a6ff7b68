// nvtx.h: the memstrat NVTX domain, one category and colour per phase, RAII ranges
// (NvtxRange) and stream naming. Naming scheme: docs/profiling.md.
#pragma once

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <string>

namespace memstrat {

/// Every NVTX range belongs to one phase; the phase picks the category and the colour.
enum class Phase : uint32_t {
  Run = 1,     // the whole run, named after the strategy
  Setup,       // attach, allocation, graph capture
  Epoch,       // "epoch N"
  Batch,       // "batch i"
  H2D,         // explicit copies
  Prefetch,    // cudaMemPrefetchAsync
  Advise,      // cudaMemAdvise
  HostPrep,    // host writes the epoch's data (refresh scenario)
  Forward,
  Backward,
  Update,
  Eval,
  Produce,     // a host worker gathers, augments and formats one batch (stream scenario)
};
/// The last phase: categories are Phase::Run .. kLastPhase.
inline constexpr Phase kLastPhase = Phase::Produce;

const char* phase_name(Phase p);
uint32_t phase_colour(Phase p);  // ARGB

/// The `memstrat` domain (created once, names the categories).
nvtxDomainHandle_t nvtx_domain();

/// Push/pop range in the memstrat domain. Cheap when no tool is attached.
class NvtxRange {
 public:
  NvtxRange(Phase phase, const char* name);
  NvtxRange(Phase phase, const std::string& name) : NvtxRange(phase, name.c_str()) {}
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

/// Name a stream so Nsight Systems shows "compute", "copy 0", ... instead of a number.
void nvtx_name_stream(cudaStream_t s, const char* name);

}  // namespace memstrat
