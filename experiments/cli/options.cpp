#include "experiments/cli/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>
#include <ostream>
#include <stdexcept>
#include <utility>

#include "common/build_info.h"
#include "common/run_record.h"  // is_utf8
#include "experiments/core/data_parallel_request.h"
#include "memory_strategies/registry.h"
#include "memory_strategies/replicated_set.h"  // kMaxReplicate
#include "memory_strategies/stream_slots.h"  // the ranges of --workers, --prefetch

namespace memstrat {

namespace {
using nlohmann::json;

/// Where a number typed as `s` starts for std::from_chars, which takes no leading '+'.
const char* number_start(const std::string& s) {
  return s.size() > 1 && s[0] == '+' && s[1] >= '0' && s[1] <= '9' ? s.data() + 1 : s.data();
}

/// A whole number in decimal that fits T: refuses what strtoull-style parsing would wrap or
/// saturate ("-1" or 2^64 as an unsigned seed) or read in another base ("0x10", "010"), and
/// hands the number on in plain decimal.
template <typename T>
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        T v{};
        const char* end = s.data() + s.size();
        const auto [stop, ec] = std::from_chars(number_start(s), end, v);
        if (ec != std::errc() || stop != end)
          return "'" + s + "' is not a whole number in " +
                 std::to_string(std::numeric_limits<T>::min()) + ".." +
                 std::to_string(std::numeric_limits<T>::max());
        s = std::to_string(v);
        return "";
      },
      "");
}

/// A number that stays finite, and above `min` where `min` is exclusive, once it is the float
/// the run uses: "nan", 1e39 (infinite as a float) and, for --lr, 1e-50 (0 as a float) are
/// refused, which a range check on the typed value lets through. Read as CLI11 reads it
/// (strtold, then the float).
CLI::Validator finite_float(double min, bool min_exclusive) {
  return CLI::Validator(
      [min, min_exclusive](std::string& s) -> std::string {
        char* stop = nullptr;
        const long double typed = std::strtold(s.c_str(), &stop);
        if (s.empty() || stop != s.c_str() + s.size() || std::isnan(typed))
          return "'" + s + "' is not a number";
        const float f = static_cast<float>(typed);
        if (!std::isfinite(f))
          return "'" + s + "' is beyond the range of a 32-bit float (at most about 3.4e38)";
        if (min_exclusive && !(f > min))
          return "'" + s + "' is " + json(f).dump() + " as a 32-bit float; use a value > " +
                 json(min).dump() + " (at least about 1.2e-38)";
        return "";
      },
      "");
}

/// --device-budget: a positive, finite number of GiB (no more than a byte count in 64 bits).
std::optional<double> parse_device_budget(const std::string& s) {
  char* stop = nullptr;
  const double v = std::strtod(s.c_str(), &stop);
  if (s.empty() || stop != s.c_str() + s.size() || !std::isfinite(v) || !(v > 0) || v > 1e9)
    throw std::invalid_argument("--device-budget: '" + s +
                                "' is not a positive number of GiB (e.g. 2 or 0.5; at most 1e9)");
  return v;
}

/// Declares `train` options to CLI11 and, in the same call, records what `describe` reports.
class TrainOptions {
 public:
  TrainOptions(CLI::App& app, std::vector<OptionInfo>& table) : app_(app), table_(table) {}

  /// One of `values` (name -> value), checked by name; --help shows the names.
  template <typename T>
  void choice(const std::string& names, T& field, std::vector<std::pair<std::string, T>> values,
              const char* record_key, const std::string& help) {
    std::vector<std::string> keys;
    std::string current;
    for (const auto& [name, value] : values) {
      keys.push_back(name);
      if (value == field) current = name;
    }
    CLI::Option* o = app_.add_option_function<std::string>(
        names,
        [&field, values](const std::string& s) {
          for (const auto& [name, value] : values)
            if (name == s) field = value;
        },
        help);
    o->check(CLI::IsMember(keys))->default_str(current);
    OptionInfo& i = add(o, "choice", json(current), record_key);
    i.choices = keys;
  }

  /// A whole number; min/max, when given, bound it.
  template <typename T>
  void integer(const std::string& names, T& field, std::optional<double> min,
               std::optional<double> max, const char* record_key, const std::string& help) {
    CLI::Option* o = app_.add_option(names, field, help)->capture_default_str();
    o->transform(whole_number<T>());  // first: it rewrites the value in plain decimal
    if (min && max) o->check(CLI::Range(*min, *max));
    else if (min && *min == 0) o->check(CLI::NonNegativeNumber);
    else if (min) o->check(CLI::Range(*min, static_cast<double>(std::numeric_limits<T>::max())));
    OptionInfo& i = add(o, "integer", json(field), record_key);
    i.min = min;
    i.max = max;
  }

  /// A real number in [min, max], or > min when max is not given.
  void number(const std::string& names, float& field, double min, std::optional<double> max,
              const char* record_key, const std::string& help) {
    CLI::Option* o = app_.add_option(names, field, help)->capture_default_str();
    o->check(finite_float(min, !max));
    o->check(max ? CLI::Range(min, *max) : CLI::PositiveNumber);
    // As typed (0.05), not as the float it becomes (0.0500000007...).
    OptionInfo& i = add(o, "number", json(std::stod(o->get_default_str())), record_key);
    i.min = min;
    i.max = max;
    i.min_exclusive = !max;
  }

  void flag(const std::string& names, bool& field, const char* record_key, const std::string& help) {
    add(app_.add_flag(names, field, help), "flag", json(field), record_key);
  }

  /// A value read by `parse` (which throws std::invalid_argument with a message that starts with
  /// the option's name); `shown` spells the current value as typed.
  template <typename T>
  OptionInfo& parsed(const std::string& names, T& field, std::function<T(const std::string&)> parse,
                     const std::string& shown, const char* kind, json default_value,
                     const char* record_key, const std::string& help) {
    CLI::Option* o = app_.add_option_function<std::string>(
        names, [&field, parse](const std::string& s) { field = parse(s); }, help);
    const std::string prefix = o->get_name() + ": ";
    o->check(CLI::Validator(
        [parse, prefix](std::string& s) -> std::string {
          try {
            parse(s);
            return "";
          } catch (const std::invalid_argument& e) {
            const std::string m = e.what();
            return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
          }
        },
        ""));
    o->default_str(shown);
    return add(o, kind, std::move(default_value), record_key);
  }

  void text(const std::string& names, std::string& field, const char* record_key,
            const std::string& help) {
    CLI::Option* o = app_.add_option(names, field, help);
    add(o, "text", field.empty() ? json(nullptr) : json(field), record_key);
  }

 private:
  OptionInfo& add(const CLI::Option* o, const char* kind, json default_value, const char* record_key) {
    OptionInfo i;
    const std::vector<std::string> longs = o->get_lnames(), negations = o->get_fnames();
    i.name = "--" + longs.front();
    for (const std::string& s : o->get_snames()) i.aliases.push_back("-" + s);
    for (std::size_t k = 1; k < longs.size(); ++k)
      (std::count(negations.begin(), negations.end(), longs[k]) ? i.negations : i.aliases)
          .push_back("--" + longs[k]);
    i.kind = kind;
    i.default_value = std::move(default_value);
    i.record_key = record_key;
    i.help = o->get_description();
    table_.push_back(std::move(i));
    return table_.back();
  }

  CLI::App& app_;
  std::vector<OptionInfo>& table_;
};

/// The options only the stream scenario reads.
constexpr const char* kStreamOptions[] = {"--workers", "--prefetch", "--augment", "--consumer"};

/// "double-buffer, zero-copy-staged, ...": the strategies whose registry entry declares `option`.
std::string strategies_reading(std::string_view option) {
  std::string users;
  for (const StrategyEntry& e : strategy_registry())
    for (const StrategyOption& o : e.options)
      if (o.name == option) users += (users.empty() ? "" : ", ") + std::string(e.name);
  return users;
}

/// A strategy's own option given with a strategy that does not read it would be ignored
/// silently; refused instead, whatever its value (the default typed out included), as the stream
/// scenario's options are outside that scenario.
void check_strategy_options(const RunConfig& c, const CLI::App& train) {
  const StrategyEntry& chosen = *c.strategy;
  for (const StrategyEntry& e : strategy_registry())
    for (const StrategyOption& o : e.options) {
      const std::string flag = "--" + std::string(o.name);
      // --copy-chunk also sizes the launches of kernel-per-chunk, whatever the strategy.
      const bool reads = o.name == "copy-chunk" ? reads_copy_chunk(c)
                         : std::any_of(chosen.options.begin(), chosen.options.end(),
                                       [&](const StrategyOption& s) { return s.name == o.name; });
      if (!reads && train.count(flag) > 0)
        throw std::invalid_argument(flag + " is an option of " + strategies_reading(o.name) +
                                    (o.name == "copy-chunk" ? " (and of --launch-form kernel-per-chunk)" : "") +
                                    "; --strategy " + std::string(chosen.name) +
                                    " does not read it (drop " + flag + ")");
    }
}

/// --epoch-launch is the older spelling of --launch-form (on = auto, off = per-batch); both given
/// must say the same.
void check_launch_form_spellings(const CLI::App& train) {
  const CLI::Option* form = train.get_option("--launch-form");
  const CLI::Option* old = train.get_option("--epoch-launch");
  if (form->count() == 0 || old->count() == 0) return;
  const std::string f = form->results().back(), o = old->results().back();
  const std::string same = o == "on" ? "auto" : "per-batch";
  if (f != same)
    throw std::invalid_argument("--epoch-launch " + o + " means --launch-form " + same +
                                ", not --launch-form " + f + " (give one of the two)");
}

/// Rules that involve two options, which no single option's declaration can state, and a
/// strategy that no device runs with these options (StrategyEntry::unsupported_with). Under
/// --processes per-gpu it also reads the launcher's environment into c.process (or, with no
/// launcher's rank there, sets c.spawn_ranks). Throws
/// std::invalid_argument saying what to change.
void check_consistent(RunConfig& c, const CLI::App& train) {
  if (train.count("--reduce") > 0 && c.gpus == 1 && c.emulate_gpus == 1)
    throw std::invalid_argument("--reduce combines the gradients of several GPUs; add --gpus N "
                                "(N > 1) or drop --reduce");
  if (train.count("--graphs") > 0 && c.graphs == Graphs::On && c.gpus > 1 &&
      c.processes == Processes::One)
    throw std::invalid_argument(std::string("--graphs on with --gpus N > 1: ") +
                                kThreadedGraphsReason + "; add --processes per-gpu or drop --graphs");
  if (c.processes == Processes::PerGpu && c.gpus == 1)
    throw std::invalid_argument("--processes per-gpu drives the GPUs of --gpus N (N > 1), one "
                                "process each; add --gpus N or drop --processes");
  // The launcher's environment is read now: a process that cannot say its rank stops before any
  // device work, with what to set.
  if (c.processes == Processes::PerGpu && c.gpus > 1) {
    if (launcher_rank_set([](const char* n) -> const char* { return std::getenv(n); }))
      c.process = process_rank_from_environment();
    else
      c.spawn_ranks = true;  // no launcher: this process starts the ranks (rank_spawn.h)
  }
  if (c.process && c.process->rank != 0) {  // rank 0 prints and writes the outputs; the others
    c.quiet = true;                         // only say when they fail
    c.json.clear();
    c.loss_curve.clear();
    c.trace.clear();
    c.export_init.clear();
  }
  if (const std::string why = data_parallel_refusal(c); !why.empty())
    throw std::invalid_argument(why);
  if (const std::string why = thread_placement_refusal(c); !why.empty())
    throw std::invalid_argument(why);
  if (!c.trace.empty() && !c.profile)
    throw std::invalid_argument("--trace needs the CUPTI profiler; drop --no-profile");
  check_strategy_options(c, train);
  check_launch_form_spellings(train);
  if (c.scenario != Scenario::Stream)
    for (const char* opt : kStreamOptions)
      if (train.count(opt) > 0)
        throw std::invalid_argument(std::string(opt) + " is an option of the stream scenario; "
                                    "add --scenario stream (or drop " + opt + ")");
  if (!c.trains()) {
    if (c.data_parallel())
      throw std::invalid_argument("--consumer none times one GPU's input pipeline; drop --gpus/"
                                  "--emulate-gpus or --consumer none");
    if (!c.loss_curve.empty())
      throw std::invalid_argument("--consumer none trains nothing, so there is no loss curve; "
                                  "drop --loss-curve");
    if (c.launch_form == LaunchForm::Kernel || c.launch_form == LaunchForm::ChunkKernels)
      throw std::invalid_argument("--consumer none runs no step, and a kernel launch form runs "
                                  "steps in one launch; use --launch-form per-batch, graph or "
                                  "auto");
  }
  if (const std::string why = refusal_reason(*c.strategy, strategy_options(c)); !why.empty())
    throw std::invalid_argument("--strategy " + std::string(c.strategy->name) + " with --scenario " +
                                std::string(to_string(c.scenario)) +
                                (c.scenario == Scenario::Stream
                                     ? " --augment " + std::string(to_string(c.augment))
                                     : std::string()) +
                                ": " + why);
  // The form the strategy's data path allows in the scenario (the step a kernel form needs is
  // judged once the data set is known, still before any device work: Session).
  if (const std::optional<EpochForm> f = asked_form(c.launch_form))
    if (const std::string why = launch_form_refusal(*c.strategy, strategy_options(c), *f);
        !why.empty())
      throw std::invalid_argument("--launch-form " + std::string(to_string(*f)) + ": " + why);
}

template <typename E>
std::vector<std::pair<std::string, E>> named(std::initializer_list<E> values) {
  std::vector<std::pair<std::string, E>> v;
  for (const E e : values) v.emplace_back(std::string(to_string(e)), e);
  return v;
}

/// The declaration of a strategy option (memory_strategies/registry.cpp), by name.
const StrategyOption& strategy_option(std::string_view name) {
  for (const StrategyEntry& e : strategy_registry())
    for (const StrategyOption& o : e.options)
      if (o.name == name) return o;
  throw std::logic_error("no strategy declares the option '" + std::string(name) + "'");
}

/// "<the strategies that read it>: <meaning> (<allowed values>)" for --help and describe.
std::string strategy_option_help(const StrategyOption& opt) {
  return strategies_reading(opt.name) + ": " + std::string(opt.meaning) + " (" + opt.allowed() + ")";
}

std::vector<std::pair<std::string, const StrategyEntry*>> strategies() {
  std::vector<std::pair<std::string, const StrategyEntry*>> v;
  for (const StrategyEntry& e : strategy_registry()) v.emplace_back(std::string(e.name), &e);
  return v;
}

/// Every `train` option, declared against the field of `c` it sets. The record key is the
/// option's key under config.* in the record ("" where the record says something else: config.step,
/// config.epoch_launch and config.epoch_form say what ran, config.launch_form what --launch-form or
/// --epoch-launch asked for, config.dataset what was loaded).
void declare_train_options(CLI::App& t, RunConfig& c, std::vector<OptionInfo>& table) {
  using kernels::GemmBackend;
  TrainOptions o(t, table);
  o.choice("-s,--strategy", c.strategy, strategies(), "strategy",
           "Memory strategy (see `memstrat list`)");
  o.integer("-e,--epochs", c.epochs, 1, 100000, "epochs",
            "Epochs; epoch 1 is reported separately as warm-up");
  o.integer("-b,--batch", c.batch, 1, 1 << 20, "batch",
            "Batch size (rows); the last batch of an epoch may be partial");
  OptionInfo& hidden =
      o.parsed<std::vector<int>>("--hidden", c.hidden, parse_hidden, hidden_string(c.hidden),
                                 "list", json(c.hidden), "hidden",
                                 "Hidden layer sizes, comma separated (e.g. 256 or 512,256)");
  hidden.min = 1;  // each layer's size (describe --json; the matrix runner checks cells by it)
  hidden.max = kMaxHiddenSize;
  o.choice("--transfer", c.transfer, named({Transfer::U8, Transfer::F32}), "transfer",
           "u8: move raw pixels, normalise on the GPU; f32: move normalised floats (4x bytes)");
  o.choice("--scenario", c.scenario, named({Scenario::Static, Scenario::Refresh, Scenario::Stream}),
           "scenario",
           "static: data never changes; refresh: host rewrites it every epoch (shift "
           "augmentation); stream: host workers produce each batch just in time (a gather of a "
           "fresh permutation, --augment) into the strategy's slots (--workers, --prefetch)");
  o.number("--lr", c.lr, 0, std::nullopt, "lr", "SGD learning rate");
  o.number("--momentum", c.momentum, 0, 0.999, "momentum", "SGD momentum (0 = plain SGD)");
  o.integer("--seed", c.seed, std::nullopt, std::nullopt, "seed",
            "Seed for weights, shuffling and augmentation");
  o.choice("--gemm", c.gemm, named({GemmBackend::Cublas, GemmBackend::Tiled}), "gemm", "GEMM backend");
  o.flag("--tf32", c.tf32, "tf32", "Allow TF32 tensor-core math in cuBLAS (changes results slightly)");
  o.choice("--graphs", c.graphs, named({Graphs::On, Graphs::Off}), "graphs",
           "Replay each batch's MLP step as a CUDA graph (epochs enqueued batch by batch)");
  o.choice("--fused", c.fused, named({FusedMode::On, FusedMode::Single, FusedMode::Lt, FusedMode::Off}), "",
           "One-hidden-layer MLP with cuBLAS. on: the whole step in one kernel launch where "
           "it applies and is faster (fp32, not with --tf32, batch x hidden <= 262144), else "
           "lt; single: the one-launch step at any size it takes; lt: cuBLASLt GEMMs + fused "
           "kernels (4-5 launches per step); off: the layer-by-layer path (13)");
  o.choice("--launch-form", c.launch_form,
           named({LaunchForm::Auto, LaunchForm::PerBatch, LaunchForm::Graph,
                  LaunchForm::ChunkKernels, LaunchForm::Kernel}),
           "launch_form",
           "How an epoch's steps are launched; bitwise the same training in every form. "
           "per-batch: enqueued batch by batch; graph: the whole epoch (copies, steps, events) "
           "captured in epoch 1 as one CUDA graph and replayed; kernel-per-chunk: one kernel "
           "launch for the steps of each chunk (the strategy's copied chunk, or the batches of "
           "one --copy-chunk MiB chunk); kernel: all steps in one kernel launch (both kernel "
           "forms need the single-launch step). auto: the form the strategy was built for "
           "(resident: kernel; double-buffer-graph, zero-copy-staged: kernel-per-chunk, or "
           "graph with another step than the single-launch one; pinned-graph: graph; the others: "
           "per-batch), per-batch where the step does not allow it. A form by name runs as asked "
           "or is refused where the strategy, scenario or step cannot run it; `memstrat "
           "describe` lists each strategy's forms per scenario");
  o.choice("--epoch-launch", c.launch_form,
           std::vector<std::pair<std::string, LaunchForm>>{{"on", LaunchForm::Auto},
                                                           {"off", LaunchForm::PerBatch}},
           "", "The older spelling of --launch-form: on = auto, off = per-batch");
  // The strategies' options: range and meaning from the registry entries that read them.
  const StrategyOption& depth = strategy_option("depth");
  o.integer("--depth", c.depth, depth.min, depth.max, "depth", strategy_option_help(depth));
  const StrategyOption& streams = strategy_option("copy-streams");
  o.integer("--copy-streams", c.copy_streams, streams.min, streams.max, "streams",
            strategy_option_help(streams));
  const StrategyOption& hints = strategy_option("advise");
  OptionInfo& advise = o.parsed<AdviseSet>(
      "--advise", c.advise, parse_advise, c.advise.to_string(), "hints", json(c.advise.to_string()),
      "advise", strategy_option_help(hints));
  advise.choices.assign(hints.choices.begin(), hints.choices.end());
  const StrategyOption& chunk = strategy_option("prefetch-chunk");
  o.integer("--prefetch-chunk", c.prefetch_chunk_mib, chunk.min, chunk.max, "prefetch_chunk_mib",
            strategy_option_help(chunk));
  // The stream scenario's input pipeline; recorded as null in the other scenarios.
  o.integer("--workers", c.workers, 1, kMaxWorkers, "workers",
            "stream: host producer threads, started once per run (1.." +
                std::to_string(kMaxWorkers) + ")");
  o.integer("--prefetch", c.prefetch, 1, kMaxPrefetch, "prefetch",
            "stream: batches produced ahead = host slots in the ring (1.." +
                std::to_string(kMaxPrefetch) + "; all slots together at most " +
                std::to_string(kMaxSlotBytes >> 30) +
                " GiB); fewer slots than workers leaves workers waiting for a slot");
  o.choice("--augment", c.augment, named({Augment::None, Augment::Light, Augment::Heavy}),
           "augment",
           "stream: per-sample augmentation on the host. none: a shuffled gather only (strategies "
           "whose data the GPU can address gather on the GPU); light: random +-2 px shift (the "
           "refresh scenario's); heavy: random affine warp (rotation, scale, shear, shift)");
  o.choice("--augment-device", c.augment_device, named({AugmentDevice::Host, AugmentDevice::Gpu}),
           "augment_device",
           "Where refresh and stream augment (the same bytes either way). host: on the CPU, "
           "and the augmented data crosses the bus; gpu: for resident, zero-copy and the um "
           "strategies the raw set is placed once in the strategy's own memory (device, mapped "
           "host, managed) and a kernel gathers and augments each epoch's rows from it "
           "(refresh: the whole epoch before its first batch; stream: each batch, --augment "
           "light or heavy); the copying strategies move the raw rows (the host reshuffles or "
           "gathers them, nothing more) and a kernel augments each batch in device memory after "
           "its copy. Taken by "
           + gpu_augment_takers() + "; `memstrat describe` lists them");
  o.choice("--consumer", c.consumer, named({Consumer::Train, Consumer::None}), "consumer",
           "stream: what takes each batch. train: the training step; none: a kernel that reads "
           "one element of it and nothing else, so an epoch times the input pipeline alone "
           "(host workers, the strategy's data path); no loss, no accuracy, no loss curve");
  const StrategyOption& copy_chunk = strategy_option("copy-chunk");
  o.integer("--copy-chunk", c.copy_chunk_mib, copy_chunk.min, copy_chunk.max, "copy_chunk_mib",
            strategy_option_help(copy_chunk) +
                "; with --launch-form kernel-per-chunk, any strategy: the batches of one such "
                "chunk (packed) run in one launch");
  const StrategyOption& stage_blocks = strategy_option("stage-blocks");
  o.integer("--stage-blocks", c.stage_blocks, stage_blocks.min, stage_blocks.max, "stage_blocks",
            strategy_option_help(stage_blocks));
  o.integer("--replicate", c.replicate, 1, kMaxReplicate, "replicate",
            "Train on K copies of the training set: copy 0 as loaded, copies 1..K-1 each sample "
            "augmented on the host (heavy affine warp, seeded by --seed, the copy and the sample) "
            "once at start-up; refused when K copies would not fit the host's available memory");
  OptionInfo& budget = o.parsed<std::optional<double>>(
      "--device-budget", c.device_budget_gib, parse_device_budget, "none", "number", nullptr,
      "device_budget_gib",
      "GiB of device memory the data path may use (default: none, the whole device): after the "
      "model's allocations all other free device memory is held, so the strategy has only this; "
      "a strategy whose data does not fit it is refused before training");
  budget.min = 0;
  budget.min_exclusive = true;
  budget.max = 1e9;
  o.text("--data", c.data, "", "MNIST directory (default: $MEMSTRAT_DATA, then data/mnist)");
  o.integer("--train-samples", c.train_samples, 0, std::nullopt, "",
            "Use only the first N training samples (0 = all)");
  o.integer("--test-samples", c.test_samples, 0, std::nullopt, "",
            "Use only the first N test samples (0 = all)");
  o.text("--json", c.json, "",
         "Append one JSON Lines record for this run to FILE (docs/schema/run_record.schema.json)");
  o.text("--run-tag", c.run_tag, "run_tag",
         "Free-form tag stored as config.run_tag (the matrix runner's cell id)");
  o.flag("--profile,!--no-profile", c.profile, "profile",
         "CUPTI API-call and unified-memory counters per epoch, and in data-parallel runs the "
         "gradients' reduction timed on its own (its events slow the step) (default on)");
  o.choice("--thread-placement", c.thread_placement,
           named({ThreadPlacement::Os, ThreadPlacement::Apart, ThreadPlacement::Shared}),
           "thread_placement",
           "static, one GPU: the CPUs of the training thread and of the CUDA driver's host "
           "threads (its event handler carries out each cudaMemPrefetchAsync), set after "
           "set-up. os: wherever the scheduler puts them; apart: the training thread on the CPU "
           "it is on, the driver's threads on every other CPU the process may use; shared: all "
           "of them on that one CPU");
  o.text("--trace", c.trace, "", "Write a Chrome trace-event JSON (Perfetto / chrome://tracing) to FILE");
  o.text("--loss-curve", c.loss_curve, "", "Write per-batch mean losses (CSV: epoch,batch,loss) to FILE");
  o.text("--export-init", c.export_init, "",
         "Write initial weights and the epoch-1 sample order to DIR (for baselines)");
  o.flag("-q,--quiet", c.quiet, "", "Only the summary, no per-epoch lines");
  o.integer("--device", c.device, 0, std::nullopt, "device", "CUDA device index");
  o.integer("--gpus", c.gpus, 1, kMaxShards, "gpus",
            "Data-parallel training on N GPUs (--device .. --device + N - 1; needs NCCL and "
            "NCCL_NVLS_ENABLE=0): each global batch of N x --batch rows is cut into N contiguous "
            "shards of --batch rows, one per GPU (the last global batch fills shards in order; "
            "shards past the data are empty); gradients are combined (--reduce) before one "
            "update on every GPU. 1: single-GPU training, unchanged");
  o.choice("--reduce", c.reduce, named({Reduce::Exact, Reduce::Ring}), "reduce",
           "With --gpus N > 1, how the gradients are combined. exact: gathered (ncclAllGather) "
           "and summed in rank order on every GPU, bitwise equal to --emulate-gpus N; ring: "
           "ncclAllReduce over fixed buckets, NCCL's order");
  o.choice("--processes", c.processes, named({Processes::One, Processes::PerGpu}), "processes",
           "With --gpus N > 1, how the N GPUs are driven. one: this process, one host thread "
           "per GPU; per-gpu: one process per GPU, each reading its rank from its launcher's "
           "environment and joining NCCL at NCCL_COMM_ID=HOST:PORT (set it, the same, for every "
           "process): under torchrun, mpirun or srun, or, started alone, memstrat starts the N "
           "processes on this host itself; rank 0 prints and writes the outputs");
  o.integer("--emulate-gpus", c.emulate_gpus, 1, kMaxShards, "emulate_gpus",
            "One GPU computes the N shards' gradients of each global batch in turn and sums them "
            "in rank order: the one-GPU reference of --gpus N --reduce exact (every strategy)");
}
}  // namespace

AdviseSet parse_advise(const std::string& s) {
  AdviseSet a{false, false, false};
  if (s == "none" || s.empty()) return a;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok == "read-mostly") a.read_mostly = true;
    else if (tok == "preferred-device") a.preferred_device = true;
    else if (tok == "accessed-by") a.accessed_by = true;
    else
      throw std::invalid_argument("--advise: unknown hint '" + tok +
                                  "'; use a comma-separated subset of "
                                  "read-mostly,preferred-device,accessed-by, or none");
  }
  return a;
}

json OptionInfo::to_json() const {
  json j{{"name", name}, {"aliases", aliases}, {"kind", kind}, {"default", default_value},
         {"negations", negations},
         {"record_key", record_key.empty() ? json(nullptr) : json(record_key)}, {"help", help}};
  if (!choices.empty()) j["choices"] = choices;
  if (min) j[min_exclusive ? "exclusive_min" : "min"] = *min;
  if (max) j["max"] = *max;
  return j;
}

std::vector<OptionInfo> train_option_table() {
  CLI::App app;
  RunConfig defaults;
  std::vector<OptionInfo> table;
  declare_train_options(app, defaults, table);
  return table;
}

std::optional<int> parse_cli(int argc, const char* const* argv, CliRequest& req, std::ostream& out,
                             std::ostream& err) {
  // Records hold the command line (and the paths in it) as JSON text: bytes that are not UTF-8
  // could not be written there as typed, so they are refused before anything runs.
  for (int i = 1; i < argc; ++i)
    if (!is_utf8(argv[i])) {
      err << "memstrat: argument " << i << " ("
          << json(argv[i]).dump(-1, ' ', true, json::error_handler_t::replace)
          << ") is not valid UTF-8; records hold every argument as text: use UTF-8 names\n";
      return 2;
    }
  req.run.argv.assign(argv, argv + argc);
  CLI::App app{
      "memstrat: how should a training loop move its data to the GPU? Trains one MNIST MLP on "
      "interchangeable memory strategies and measures each (CUDA events, CUPTI, NVTX).\n"
      "Start with `memstrat list`, `memstrat info`, then e.g.\n"
      "  memstrat train --strategy double-buffer --epochs 10 --batch 256 --transfer u8 "
      "--scenario refresh --json results/run.jsonl"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", version_text,
                       "Print the version, the commit, the CUDA runtime it was built with and the "
                       "CUDA version of the installed driver, then exit");

  app.add_subcommand("list", "List the memory strategies, one per line")
      ->callback([&] { req.command = Command::List; });
  auto* info = app.add_subcommand("info", "Show the GPU and the properties that matter to the strategies");
  info->add_option("--device", req.run.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  info->callback([&] { req.command = Command::Info; });
  auto* describe = app.add_subcommand(
      "describe", "Describe the strategies, every train option (allowed values, default, record "
                  "key) and the record's schema version; needs no GPU");
  describe->add_flag("--json", req.json, "As one JSON object (what the matrix runner reads)");
  describe->callback([&] { req.command = Command::Describe; });
  auto* train = app.add_subcommand("train", "Train the MLP with one memory strategy and report per-epoch figures");
  train->callback([&] { req.command = Command::Train; });
  std::vector<OptionInfo> table;
  declare_train_options(*train, req.run, table);
  auto* prim = app.add_subcommand(
      "primitives",
      "Measure the transfer primitives the strategies are built on (copies, SM copy, prefetch, "
      "page faults) against transfer size");
  prim->callback([&] { req.command = Command::Primitives; });
  add_primitives_options(*prim, req.primitives);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    if (code != 0 && dynamic_cast<const CLI::CallForHelp*>(&e) == nullptr &&
        dynamic_cast<const CLI::CallForAllHelp*>(&e) == nullptr)
      err << "memstrat: run `memstrat --help` or `memstrat train --help` for the options\n";
    return code == 0 ? 0 : 2;
  }
  try {
    if (req.command == Command::Train) check_consistent(req.run, *train);
    if (req.command == Command::Primitives) make_primitives_config(req.primitives);
  } catch (const std::invalid_argument& e) {
    err << "memstrat: " << e.what() << "\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace memstrat
