// record.h: RunRecord, the typed results record of one training run. Session fills it, the
// console printers read it, and to_json() writes it as one JSON Lines record whose shape is
// docs/schema/run_record.schema.json (schema version: common/run_record.h's kSchemaVersion).
// A field that is optional here is absent or null in the JSON, as the schema says; a run that
// failed carries what it had measured so far.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/profiler/profiler.h"
#include "common/host_dataset.h"
#include "common/run_record.h"
#include "experiments/core/device_budget.h"
#include "experiments/core/run_config.h"
#include "experiments/core/trainer.h"

namespace memstrat {

/// config.dataset: what the run trained on.
struct DatasetInfo {
  std::string name;  // "mnist" | "fashion-mnist"
  std::string path;
  std::int64_t train_samples = 0;
  std::int64_t test_samples = 0;
};

/// How the Mlp runs a step, as it decided when it was built (config.fused, config.step, ...).
struct StepRecord {
  bool fused = false;
  std::string step;  // "single-launch" | "cublaslt-fused" | "layer-by-layer"
  std::optional<std::string> single_launch_off_reason;  // none when the single-launch step runs
  std::optional<std::string> fused_off_reason;          // none when fused
};

/// Whether the Trainer runs each epoch in one launch, and of what (config.epoch_launch,
/// epoch_launch_off_reason, epoch_form).
struct EpochLaunchChoice {
  bool on = false;                        // one launch per epoch: form kernel or graph
  std::optional<std::string> off_reason;  // none when on
  EpochForm form = EpochForm::PerBatch;
};

/// The set-up window: building the stream, Mlp, strategy and Trainer.
struct SetupRecord {
  double ms = 0;            // host clock
  WindowCounters counters;  // only its API calls are recorded
};

struct EpochRecord {
  EpochResult train;        // the Trainer's timing, the strategy's figures, training loss
  EvalResult test;          // evaluated after the epoch, outside the timed region
  WindowCounters counters;  // the profiler's window of this epoch
};

/// Steady-state statistics over epochs 2..N (all epochs when N == 1).
struct Summary {
  std::size_t steady_epochs = 0;
  Spread wall_ms;
  double gpu_ms_median = 0;
  double epoch1_wall_ms = 0;
  double samples_per_s = 0;  // training samples / median steady epoch
};
Summary summarize(const std::vector<EpochRecord>& epochs, std::int64_t n_train);

/// What only a finished run has.
struct RunTotals {
  Summary summary;
  EvalResult final_test;                 // after the last epoch
  std::optional<ApiCounts> api_totals;   // every runtime call of the process; none without --profile
  std::vector<std::string> profiler_notes;
};

enum class RunStatus { Ok, Failed };

struct RunRecord {
  std::string run_id;
  std::string started_at;
  RunStatus status = RunStatus::Ok;
  std::string error;  // why, when failed
  std::vector<std::string> argv;
  Environment env;
  RunConfig config;   // as asked
  DatasetInfo dataset;
  std::optional<StepRecord> step;                 // once the Mlp exists
  std::optional<EpochLaunchChoice> epoch_launch;  // once the Trainer exists
  std::optional<SetupRecord> setup;               // once set-up finished
  std::vector<EpochRecord> epochs;                // every epoch that finished
  std::optional<RunTotals> totals;                // once every epoch ran
  std::optional<GpuState> env_end;                // NVML's clocks etc. after the last epoch
  std::optional<DeviceBudgetRecord> device_budget;  // --device-budget, once its memory is held

  /// A new record (status ok): run id, start time, argv and config from `cfg`, the dataset.
  static RunRecord start(const RunConfig& cfg, const HostDataset& data, Environment env);
  nlohmann::json to_json() const;
};

}  // namespace memstrat
