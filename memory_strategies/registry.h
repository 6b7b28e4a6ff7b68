// registry.h: the one list of memory strategies. The CLI, the tests and the matrix runner all
// enumerate it. Adding a strategy = one new file + one line in registry.cpp: its name, a one-line
// description, the device capability it needs, the per-strategy options it reads, a factory,
// the launch forms it runs per scenario and why not the others, for a best form the naive form
// it improves, and whether the step reads its batches in place from host memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memory_strategies/batch_geometry.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

enum class OptionKind {
  Integer,  // a whole number in [min, max]
  HintSet,  // a comma-separated subset of `choices`, or "none"
};

/// An option only some strategies read (a field of StrategyOptions), declared once so that the
/// CLI's help, a machine-readable description and the matrix runner read the same facts.
struct StrategyOption {
  std::string_view name;     // the CLI long option without dashes, e.g. "depth"
  std::string_view meaning;  // one line
  OptionKind kind = OptionKind::Integer;
  int min = 0;  // Integer: the inclusive range
  int max = 0;
  std::vector<std::string_view> choices;  // HintSet: the hint names
  std::string_view default_value;         // as typed on the command line
  /// The option's value in `opt`, spelled as on the command line: ties the declaration to the
  /// StrategyOptions field it stands for (StrategyOptions{} must give default_value).
  std::string (*value)(const StrategyOptions& opt) = nullptr;
  /// The allowed values for a reader: "2..64", or "comma-separated subset of a,b,c, or none".
  std::string allowed() const;
};

/// The launch forms a strategy runs in each scenario (--launch-form), as its data path allows
/// them (MemoryStrategy::launch_forms says the same once attached; tests/gpu/test_launch_forms.cu
/// holds each strategy to it). A kernel form also needs the single-launch step (launch_request.h).
struct LaunchFormTable {
  EpochFormSet static_forms;
  EpochFormSet refresh_forms;
  EpochFormSet stream_forms;  // empty where the strategy never runs the stream scenario
  EpochFormSet in(Scenario s) const;
};

struct StrategyEntry {
  std::string_view name;         // the CLI name
  std::string_view description;  // one line
  /// Empty when the device can run it, else the reason it is waived (not failed). The only
  /// capability check: attach() assumes it passed.
  std::string (*unsupported)(const DeviceCaps&);
  /// The per-strategy options it reads; empty when it reads only the common ones.
  std::vector<StrategyOption> options;
  /// A new, unattached strategy (constructing allocates nothing; attach does).
  std::function<std::unique_ptr<MemoryStrategy>()> make;
  /// The launch forms it runs per scenario, and why its data path allows no other ("" when it
  /// runs every form in static and refresh; the stream scenario's reason is common to all).
  LaunchFormTable launch_forms;
  std::string_view launch_note;
  /// A best form names the naive strategy it improves (its description says how); empty for a
  /// naive form. Listings, the matrix and the report pair the two by it.
  std::string_view improves = {};
  /// True when the step reads the batch in place from host memory (mapped: zero-copy), so that
  /// every read the step makes of it crosses the bus. The step choice (mlp_config, choose_step)
  /// then keeps --fused on from the single-launch step, which reads the batch several times;
  /// not where the GPU gathers the batch into device memory (gathers_on_gpu, gather_input.h).
  bool batch_in_host_memory = false;
  /// What the run's options (its scenario, --augment) need beyond `unsupported`: empty when the
  /// strategy runs them on a device with `caps`, else why not. A reason that holds even on a
  /// device with every capability (DeviceCaps::every(): a scenario the strategy never runs, e.g.
  /// because a graph replays fixed addresses) refuses the options before any device work
  /// (refusal_reason); one that depends on the device waives the run there (waiver_reason).
  /// nullptr: every scenario, every option.
  std::string (*unsupported_with)(const StrategyOptions&, const DeviceCaps&) = nullptr;
  /// Thread blocks the strategy keeps running beside the step (zero-copy-staged's staging
  /// kernel); the single-launch step leaves as many block slots of its grid free
  /// (MlpConfig::step_free_blocks): a full step grid leaves an SM no registers for another
  /// kernel, so the two would take turns. nullptr: none.
  int (*blocks_beside_step)(const StrategyOptions&) = nullptr;
  /// The scenarios in which it takes --augment-device gpu: the GPU augments each epoch, from the
  /// set where it lies (gather_augment) or after the copy (gpu_augment_after_copy). Empty: host
  /// augmentation only.
  std::vector<Scenario> gpu_augment = {};
  /// The device memory its data path allocates at attach for options `opt` and data of geometry
  /// `g` (the strategy class's device_footprint, next to its attach): what --device-budget
  /// must hold (device_footprint below). Set for every entry.
  std::uint64_t (*device_footprint)(const StrategyOptions& opt, const BatchGeometry& g) = nullptr;
  /// A data path across GPUs that, on one GPU (and in the emulation), is the named strategy's
  /// (the peer-fanout forms: resident's, the set read in place); empty for every other. The
  /// matrix runner's `strategy = "all"` leaves such a strategy out (on one GPU it would repeat
  /// that strategy's cells); a matrix names it to run it (`memstrat describe`: one_gpu_as).
  std::string_view one_gpu_as = {};
  /// How it takes --augment-device gpu (gpu_augment): false, the GPU gathers and augments from
  /// the uint8 set where it lies; true, a copying strategy whose copies carry the raw rows and
  /// whose batches the GPU augments in device memory after the copy (augment_after_copy.h).
  bool gpu_augment_after_copy = false;
};

const std::vector<StrategyEntry>& strategy_registry();
/// nullptr when unknown.
const StrategyEntry* find_strategy(std::string_view name);
/// "resident, pageable, ..." for messages.
std::string strategy_names();
/// The best forms of naive strategy `name` (entries whose `improves` is `name`), in registry order.
std::vector<const StrategyEntry*> best_forms_of(std::string_view name);
/// The per-strategy options strategy `name` reads; throws std::invalid_argument when unknown.
const std::vector<StrategyOption>& strategy_options(std::string_view name);
/// Why `e` cannot run with options `opt` on a device with `caps` (its capability, then what the
/// options need); empty when it can.
std::string waiver_reason(const StrategyEntry& e, const StrategyOptions& opt, const DeviceCaps& caps);
/// Why no device can run `e` with options `opt`; empty when some device can. Needs no GPU.
std::string refusal_reason(const StrategyEntry& e, const StrategyOptions& opt);
/// Why `e` cannot take --augment-device gpu with options `opt` (its gpu_augment scenarios; the
/// static scenario augments nothing, nor does the stream scenario's --augment none); empty when
/// it can, or when opt asks for host augmentation. Needs no GPU; part of refusal_reason.
std::string augment_device_refusal(const StrategyEntry& e, const StrategyOptions& opt);
/// "resident, zero-copy in refresh and stream; pinned-graph in refresh": who takes
/// --augment-device gpu, from gpu_augment, the strategies of the same scenarios named together
/// in registry order (for --help and augment_device_refusal's messages).
std::string gpu_augment_takers();
/// Why `e` does not run launch form `f` in `opt`'s scenario (its declaration, launch_forms);
/// empty when it does. Needs no GPU. The step a kernel form needs is checked apart
/// (launch_request.h).
std::string launch_form_refusal(const StrategyEntry& e, const StrategyOptions& opt, EpochForm f);
/// The device memory `e` allocates for its data with options `opt` on a training set of
/// `samples` samples of `features` pixels (opt.batch rows a batch, opt.transfer bytes a pixel).
/// Needs no GPU.
std::uint64_t device_footprint(const StrategyEntry& e, const StrategyOptions& opt,
                               std::int64_t samples, int features);
/// e.make() once the device passed e.unsupported(caps); otherwise throws std::runtime_error with
/// the waiver reason. For paths that want a strategy or an error, not a waiver to report.
std::unique_ptr<MemoryStrategy> make_supported(const StrategyEntry& e, const DeviceCaps& caps);

}  // namespace memstrat
