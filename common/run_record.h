// run_record.h: the pieces of a results record (docs/results_schema.md): environment block,
// run id and timestamps, steady-state summary statistics, and the atomic JSON Lines append.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace memstrat {

inline constexpr int kSchemaVersion = 1;

/// GPU, driver/runtime, PCIe link, host, git revision. Needs a CUDA device.
nlohmann::json environment_json(int device);
/// Only what needs no GPU (host, git, version): for records of runs that failed early.
nlohmann::json host_environment_json();

std::string iso_utc_now();
/// "20261121T233012Z-4f3a9c1e": sortable, unique per run.
std::string make_run_id();

struct Spread {
  double median = 0, min = 0, max = 0, p25 = 0, p75 = 0;
};
/// Median, min, max and quartiles (linear interpolation). Empty input -> all zero.
Spread spread_of(std::vector<double> v);

/// Append one record as a single line with one write() on an O_APPEND descriptor, then fsync,
/// so concurrent writers and crashes never leave a partial line. Throws on failure.
void append_jsonl(const std::string& path, const nlohmann::json& record);

}  // namespace memstrat
