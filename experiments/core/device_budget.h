// device_budget.h: --device-budget GiB, the device memory a run's data path may use. Two parts:
//  - before any device work, a pure check: the strategy's declared footprint for the data
//    (StrategyEntry::device_footprint) must fit the budget, else the run is refused (exit 2);
//  - in set-up, after the Mlp's allocations and before the strategy's attach, one cudaMalloc
//    holds every free byte but the budget and a margin (DeviceBudgetHold), so the strategy
//    really has only the budget. The margin is what the run allocates after the strategy, outside
//    the data path: the Trainer's buffers (Trainer::setup_device_bytes, computed) and
//    kBudgetRuntimeMargin for what the CUDA libraries allocate on their own during the run
//    (cuBLAS workspaces, graph instantiation, local memory of kernels, allocation rounding).
//    The record keeps the bytes free after the run (device_budget.free_after_run_bytes): what the
//    margin left unused.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/cuda_raii.h"
#include "common/host_dataset.h"
#include "experiments/core/run_config.h"

namespace memstrat {

/// What the margin keeps for the CUDA libraries' own allocations during the run.
inline constexpr std::uint64_t kBudgetRuntimeMargin = 256ull << 20;

/// Bytes of `gib` GiB (2^30 bytes each), rounded down.
std::uint64_t gib_bytes(double gib);

/// Why the run's strategy, with the run's options, cannot keep its data on `data`'s training set
/// within the budget; "" when it can or the run has no budget. Pure: no device needed.
std::string budget_refusal(const RunConfig& c, std::int64_t samples, int features);

/// The margin beside the budget for `c` on `data`: the Trainer's set-up buffers plus
/// kBudgetRuntimeMargin.
std::uint64_t budget_margin_bytes(const RunConfig& c, const HostDataset& data);

/// The record's device_budget object: what was asked, set aside and held.
struct DeviceBudgetRecord {
  double gib = 0;
  std::uint64_t budget_bytes = 0;
  std::uint64_t margin_bytes = 0;
  std::uint64_t data_footprint_bytes = 0;  // the strategy's declared footprint
  std::uint64_t free_before_hold_bytes = 0;  // cudaMemGetInfo after the Mlp's allocations
  std::uint64_t held_bytes = 0;
  std::uint64_t free_after_hold_bytes = 0;
  std::optional<std::uint64_t> free_after_run_bytes;  // after the last epoch
  nlohmann::json to_json() const;
};

/// The budget is more than the device has free: a usage error (exit 2), thrown from set-up.
class BudgetRefused : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Holds free device memory but `budget + margin` in one cudaMalloc, released when destroyed.
class DeviceBudgetHold {
 public:
  DeviceBudgetHold() = default;
  /// Fills rec.free_before_hold_bytes, held_bytes and free_after_hold_bytes. Throws BudgetRefused
  /// when the device has less than budget + margin free.
  static DeviceBudgetHold take(DeviceBudgetRecord& rec);

 private:
  DeviceBuffer<std::uint8_t> held_;
};

}  // namespace memstrat
