#include "common/nvtx.h"

#include <nvtx3/nvToolsExtCudaRt.h>

namespace memstrat {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Run: return "run";
    case Phase::Setup: return "setup";
    case Phase::Epoch: return "epoch";
    case Phase::Batch: return "batch";
    case Phase::H2D: return "h2d";
    case Phase::Prefetch: return "prefetch";
    case Phase::Advise: return "advise";
    case Phase::HostPrep: return "host-prep";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Update: return "update";
    case Phase::Eval: return "eval";
    case Phase::Produce: return "produce";
  }
  return "?";
}

uint32_t phase_colour(Phase p) {
  switch (p) {
    case Phase::Run: return 0xFF607D8B;       // blue grey
    case Phase::Setup: return 0xFF9E9E9E;     // grey
    case Phase::Epoch: return 0xFF3F51B5;     // indigo
    case Phase::Batch: return 0xFF90CAF9;     // light blue
    case Phase::H2D: return 0xFFF44336;       // red: bytes moving
    case Phase::Prefetch: return 0xFFFF9800;  // orange
    case Phase::Advise: return 0xFFFFEB3B;    // yellow
    case Phase::HostPrep: return 0xFF795548;  // brown: CPU work
    case Phase::Forward: return 0xFF4CAF50;   // green
    case Phase::Backward: return 0xFF009688;  // teal
    case Phase::Update: return 0xFF8BC34A;    // light green
    case Phase::Eval: return 0xFF9C27B0;      // purple
    case Phase::Produce: return 0xFFA1887F;   // light brown: CPU work, like host-prep
  }
  return 0xFFFFFFFF;
}

nvtxDomainHandle_t nvtx_domain() {
  static nvtxDomainHandle_t d = [] {
    nvtxDomainHandle_t h = nvtxDomainCreateA("memstrat");
    for (uint32_t c = static_cast<uint32_t>(Phase::Run); c <= static_cast<uint32_t>(kLastPhase);
         ++c)
      nvtxDomainNameCategoryA(h, c, phase_name(static_cast<Phase>(c)));
    return h;
  }();
  return d;
}

NvtxRange::NvtxRange(Phase phase, const char* name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = static_cast<uint32_t>(phase);
  a.colorType = NVTX_COLOR_ARGB;
  a.color = phase_colour(phase);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx(nvtx_domain(), &a);
}

NvtxRange::~NvtxRange() { nvtxDomainRangePop(nvtx_domain()); }

void nvtx_name_stream(cudaStream_t s, const char* name) { nvtxNameCudaStreamA(s, name); }

}  // namespace memstrat
