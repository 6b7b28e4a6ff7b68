// record.h: the outcome of one primitive's sweep and its JSON Lines record (one line per
// primitive; format in docs/methodology.md, "Transfer primitives").
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/gpu_monitor.h"
#include "experiments/primitives/knees.h"
#include "experiments/primitives/measure.h"
#include "experiments/primitives/options.h"
#include "experiments/primitives/self_check.h"

namespace memstrat {

/// Primitive records are versioned apart from run records: they are a different record kind
/// ("record": "primitive").
inline constexpr int kPrimitiveSchemaVersion = 1;

struct PrimitiveOutcome {
  const PrimitiveEntry* entry = nullptr;
  TimedBy timed_by = TimedBy::CudaEvents;
  Direction direction = Direction::HostToDevice;
  std::string run_id;
  std::string started_at;
  std::string status = "ok";            // "ok" | "failed" | "waived"
  std::string error;                    // when failed
  std::string waived_reason;            // when waived
  std::vector<SizePoint> points;        // every size measured (so far, when failed)
  std::optional<CurveSummary> summary;  // when ok
  std::optional<SelfCheck> self_check;  // pinned-h2d only, when run
  std::string self_check_skipped;       // pinned-h2d only, why it was not run
  std::optional<GpuState> env_end;      // NVML's clocks etc. once it finished; none when waived
};

nlohmann::json primitive_record(const PrimitiveOutcome& o, const PrimitivesConfig& c, int device,
                                const std::vector<std::string>& argv, const nlohmann::json& env);

}  // namespace memstrat
