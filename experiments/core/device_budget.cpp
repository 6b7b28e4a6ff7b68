#include "experiments/core/device_budget.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/cuda_check.h"
#include "experiments/core/trainer.h"
#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample
#include "memory_strategies/registry.h"

namespace memstrat {

namespace {
/// 0.05 as typed (the shortest form that reads back as the same double).
std::string as_typed(double v) { return nlohmann::json(v).dump(); }

std::string gib_text(std::uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.3g GiB", static_cast<double>(bytes) / static_cast<double>(1ull << 30));
  return s;
}
}  // namespace

std::uint64_t gib_bytes(double gib) {
  return static_cast<std::uint64_t>(std::floor(gib * static_cast<double>(1ull << 30)));
}

std::string budget_refusal(const RunConfig& c, std::int64_t samples, int features) {
  if (!c.device_budget_gib) return "";
  const StrategyOptions opt = strategy_options(c);
  const std::uint64_t budget = gib_bytes(*c.device_budget_gib);
  const std::uint64_t need = device_footprint(*c.strategy, opt, samples, features);
  if (need <= budget) return "";
  const std::string name(c.strategy->name);
  const std::uint64_t set =
      BatchGeometry{samples, 0, transfer_bytes_per_sample(features, c.transfer)}.epoch_bytes();
  // The strategies that keep this run's data within the budget (those that run its scenario).
  std::string fit;
  for (const StrategyEntry& e : strategy_registry())
    if (refusal_reason(e, opt).empty() && device_footprint(e, opt, samples, features) <= budget)
      fit += (fit.empty() ? "" : ", ") + std::string(e.name);
  const std::string budget_text = "--device-budget " + as_typed(*c.device_budget_gib) + " GiB";
  if (need >= set)
    return name + ": the data set (" + gib_text(need) + " on the device, " +
           std::to_string(samples) + " samples in " + std::string(to_string(c.transfer)) +
           ") does not fit in " + budget_text + "; use a streaming strategy" +
           (fit.empty() ? std::string(" with a smaller --batch") : " (" + fit + ")");
  return name + ": its device buffers (" + gib_text(need) + " at --batch " +
         std::to_string(c.batch) + ") do not fit in " + budget_text +
         "; use a smaller --batch, --depth or --copy-chunk" +
         (fit.empty() ? std::string() : ", or a strategy that fits (" + fit + ")");
}

std::uint64_t budget_margin_bytes(const RunConfig& c, const HostDataset& data) {
  return kBudgetRuntimeMargin +
         Trainer::setup_device_bytes(data.n_train(), data.n_test(), data.features(),
                                     batch_count(data.n_train(), c.batch));
}

nlohmann::json DeviceBudgetRecord::to_json() const {
  return {{"gib", gib},
          {"budget_bytes", budget_bytes},
          {"margin_bytes", margin_bytes},
          {"data_footprint_bytes", data_footprint_bytes},
          {"free_before_hold_bytes", free_before_hold_bytes},
          {"held_bytes", held_bytes},
          {"free_after_hold_bytes", free_after_hold_bytes},
          {"free_after_run_bytes",
           free_after_run_bytes ? nlohmann::json(*free_after_run_bytes) : nlohmann::json(nullptr)}};
}

DeviceBudgetHold DeviceBudgetHold::take(DeviceBudgetRecord& rec) {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  rec.free_before_hold_bytes = free;
  const std::uint64_t keep = rec.budget_bytes + rec.margin_bytes;
  if (keep > free)
    throw BudgetRefused("--device-budget " + as_typed(rec.gib) + " GiB: the device has " +
                        gib_text(free) + " free after the model's allocations, less than the " +
                        "budget and the margin beside it (" + gib_text(rec.margin_bytes) +
                        " for the trainer's buffers and the CUDA libraries); use at most " +
                        gib_text(free - std::min<std::uint64_t>(free, rec.margin_bytes)));
  DeviceBudgetHold h;
  if (free - keep > 0) h.held_ = DeviceBuffer<std::uint8_t>(free - keep);
  rec.held_bytes = h.held_.bytes();
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  rec.free_after_hold_bytes = free;
  return h;
}

}  // namespace memstrat
