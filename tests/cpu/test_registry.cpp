// Registry: the one list the CLI, tests and matrix runner enumerate, with the per-strategy
// options each strategy declares.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "experiments/cli/options.h"
#include "experiments/core/run_config.h"
#include "memory_strategies/registry.h"

using namespace memstrat;

TEST(Registry, HasTheDesignStrategiesInOrderNaiveFormsFirst) {
  std::vector<std::string> names;
  for (const auto& e : strategy_registry()) names.emplace_back(e.name);
  const std::vector<std::string> want = {
      "resident",         "pageable",           "pinned",       "double-buffer",
      "zero-copy",        "um",                 "um-prefetch",  "um-advise",
      "peer-fanout",      "host-shared",        "um-shared",        "um-shared-host",
      "zero-copy-staged", "um-prefetch-coarse", "pinned-graph",     "double-buffer-graph",
      "peer-fanout-ring", "host-shared-ring",   "um-shared-prefetch", "um-shared-read-mostly"};
  EXPECT_EQ(names, want);
}

// A best form names the naive form it improves: a registered strategy that is itself a naive
// form, listed before it, and named in its description; naive forms improve nothing.
TEST(Registry, BestFormsNameTheNaiveFormTheyImprove) {
  const std::map<std::string, std::string> want = {{"zero-copy-staged", "zero-copy"},
                                                   {"um-prefetch-coarse", "um-prefetch"},
                                                   {"pinned-graph", "pinned"},
                                                   {"double-buffer-graph", "double-buffer"},
                                                   {"peer-fanout-ring", "peer-fanout"},
                                                   {"host-shared-ring", "host-shared"},
                                                   {"um-shared-prefetch", "um-shared"},
                                                   {"um-shared-read-mostly", "um-shared"}};
  std::map<std::string, std::string> got;
  std::set<std::string_view> seen;
  for (const auto& e : strategy_registry()) {
    if (!e.improves.empty()) {
      got.emplace(e.name, e.improves);
      const StrategyEntry* naive = find_strategy(e.improves);
      ASSERT_NE(naive, nullptr) << e.name << " improves unknown '" << e.improves << "'";
      EXPECT_TRUE(naive->improves.empty()) << e.name << " improves a best form";
      EXPECT_TRUE(seen.count(e.improves)) << e.name << " is listed before " << e.improves;
      EXPECT_EQ(e.description.find(e.improves), 0u) << e.name << ": " << e.description;
    }
    seen.insert(e.name);
  }
  EXPECT_EQ(got, want);
  ASSERT_EQ(best_forms_of("zero-copy").size(), 1u);
  EXPECT_EQ(best_forms_of("zero-copy")[0]->name, "zero-copy-staged");
  ASSERT_EQ(best_forms_of("pinned").size(), 1u);
  EXPECT_EQ(best_forms_of("pinned")[0]->name, "pinned-graph");
  ASSERT_EQ(best_forms_of("double-buffer").size(), 1u);
  EXPECT_EQ(best_forms_of("double-buffer")[0]->name, "double-buffer-graph");
  ASSERT_EQ(best_forms_of("peer-fanout").size(), 1u);
  EXPECT_EQ(best_forms_of("peer-fanout")[0]->name, "peer-fanout-ring");
  ASSERT_EQ(best_forms_of("host-shared").size(), 1u);
  EXPECT_EQ(best_forms_of("host-shared")[0]->name, "host-shared-ring");
  ASSERT_EQ(best_forms_of("um-shared").size(), 2u);  // two placements, one naive form
  EXPECT_EQ(best_forms_of("um-shared")[0]->name, "um-shared-prefetch");
  EXPECT_EQ(best_forms_of("um-shared")[1]->name, "um-shared-read-mostly");
  EXPECT_TRUE(best_forms_of("resident").empty());
  EXPECT_TRUE(best_forms_of("").empty()) << "a naive form's empty `improves` pairs with nothing";
}

TEST(Registry, NamesUniqueDescriptionsPresentFactoriesMakeTheNamedStrategy) {
  std::set<std::string_view> seen;
  for (const auto& e : strategy_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    EXPECT_GT(e.description.size(), 20u) << e.name;
    auto s = e.make();  // constructing allocates nothing (attach does)
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->name(), e.name);
  }
}

// Which strategies let a trainer capture a whole epoch as one CUDA graph (the contract is on
// MemoryStrategy::epoch_capturable; tests/gpu/test_epoch_capture.cu holds each one to it).
// um-prefetch-coarse cannot: its first static epoch differs from the later ones, and graphs have
// no node for cudaMemPrefetchAsync. The naive forms stay what a first attempt writes: enqueued
// batch by batch.
TEST(Registry, EpochCapturableDeclarations) {
  std::set<std::string_view> capturable;
  for (const auto& e : strategy_registry())
    if (e.make()->epoch_capturable()) capturable.insert(e.name);
  EXPECT_EQ(capturable, (std::set<std::string_view>{"zero-copy-staged", "pinned-graph",
                                                    "double-buffer-graph", "host-shared-ring"}));
}

// Only zero-copy's step reads its batches where they lie in host memory; every other strategy
// hands the step device memory (um: pages migrate on first touch and stay until the host writes).
TEST(Registry, OnlyZeroCopyReadsBatchesInHostMemory) {
  std::set<std::string_view> in_host;
  for (const auto& e : strategy_registry())
    if (e.batch_in_host_memory) in_host.insert(e.name);
  EXPECT_EQ(in_host, (std::set<std::string_view>{"zero-copy"}));
}

TEST(Registry, FindStrategy) {
  ASSERT_NE(find_strategy("pinned"), nullptr);
  EXPECT_EQ(find_strategy("pinned")->name, "pinned");
  EXPECT_EQ(find_strategy("Pinned"), nullptr);
  EXPECT_EQ(find_strategy(""), nullptr);
  EXPECT_NE(strategy_names().find("um-advise"), std::string::npos);
}

TEST(Registry, WaiverReasonsFollowDeviceCaps) {
  DeviceCaps full;
  full.concurrent_managed_access = full.managed_memory = full.can_map_host_memory = true;
  DeviceCaps none;  // all false
  for (const auto& e : strategy_registry()) {
    EXPECT_EQ(e.unsupported(full), "") << e.name;
  }
  EXPECT_EQ(find_strategy("resident")->unsupported(none), "");
  EXPECT_NE(find_strategy("zero-copy")->unsupported(none), "");
  EXPECT_NE(find_strategy("um")->unsupported(none), "");
  DeviceCaps managed_only = none;
  managed_only.managed_memory = true;
  EXPECT_EQ(find_strategy("um")->unsupported(managed_only), "");
  EXPECT_NE(find_strategy("um-prefetch")->unsupported(managed_only).find("concurrentManagedAccess"),
            std::string::npos);
  // Several GPUs: the peer-fanout forms need every rank to read rank 0's memory; nothing else does.
  DeviceCaps no_peer = full;
  no_peer.device = 1;
  no_peer.first_gpu = 0;
  no_peer.can_access_first_gpu = false;
  for (const auto& e : strategy_registry()) {
    const bool peer = e.name == "peer-fanout" || e.name == "peer-fanout-ring";
    const std::string why = e.unsupported(no_peer);
    EXPECT_EQ(why.empty(), !peer) << e.name << ": " << why;
    if (peer) {
      EXPECT_NE(why.find("GPU 1 cannot read the memory of GPU 0"), std::string::npos) << why;
      EXPECT_NE(why.find("cudaDeviceCanAccessPeer = 0"), std::string::npos) << why;
    }
  }
}

TEST(Registry, MakeSupportedRefusesWhatTheDeviceCannotRun) {
  DeviceCaps none;  // all false
  try {
    make_supported(*find_strategy("zero-copy"), none);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("canMapHostMemory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_supported(*find_strategy("um-advise"), none), std::runtime_error);
  const auto s = make_supported(*find_strategy("resident"), none);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "resident");
}

// Which strategy reads which per-strategy option: what `--help`, a description of the strategies
// and the matrix runner's axes are built from.
TEST(StrategyOptionDecl, EachStrategyDeclaresTheOptionsItReads) {
  const std::map<std::string, std::vector<std::string>> want = {
      {"double-buffer", {"depth", "copy-streams"}},
      {"double-buffer-graph", {"depth", "copy-streams", "copy-chunk"}},
      {"pinned-graph", {"copy-chunk"}},
      {"um-advise", {"advise"}},
      {"zero-copy-staged", {"depth", "stage-blocks", "copy-chunk"}},
      {"um-prefetch-coarse", {"prefetch-chunk"}},
      {"peer-fanout-ring", {"depth", "copy-streams", "copy-chunk"}},
      {"host-shared-ring", {"depth", "copy-streams", "copy-chunk"}},
      {"um-shared-prefetch", {"prefetch-chunk"}},
      {"um-shared-read-mostly", {"prefetch-chunk"}}};
  for (const auto& e : strategy_registry()) {
    std::vector<std::string> got;
    for (const auto& o : strategy_options(e.name)) got.emplace_back(o.name);
    const auto it = want.find(std::string(e.name));
    EXPECT_EQ(got, it == want.end() ? std::vector<std::string>{} : it->second) << e.name;
  }
  EXPECT_THROW(strategy_options("double_buffer"), std::invalid_argument);
  EXPECT_EQ(strategy_options("double-buffer")[0].allowed(), "2..64");
  EXPECT_EQ(strategy_options("um-prefetch-coarse")[0].allowed(), "1..1024");
  EXPECT_EQ(strategy_options("pinned-graph")[0].allowed(), "1..1024");
  EXPECT_EQ(strategy_options("um-advise")[0].allowed(),
            "comma-separated subset of read-mostly,preferred-device,accessed-by, or none");
}

TEST(StrategyOptionDecl, DeclarationsAreCompleteAndDefaultsAreStrategyOptionsDefaults) {
  std::map<std::string_view, const StrategyOption*> by_name;
  const StrategyOptions defaults;
  for (const auto& e : strategy_registry()) {
    std::set<std::string_view> seen;
    for (const auto& o : e.options) {
      EXPECT_TRUE(seen.insert(o.name).second) << e.name << " declares " << o.name << " twice";
      EXPECT_GT(o.meaning.size(), 10u) << o.name;
      ASSERT_NE(o.value, nullptr) << o.name;
      EXPECT_EQ(o.value(defaults), o.default_value) << e.name << " --" << o.name;
      if (o.kind == OptionKind::Integer) {
        EXPECT_LE(o.min, o.max) << o.name;
        const int d = std::stoi(std::string(o.default_value));
        EXPECT_TRUE(o.min <= d && d <= o.max) << o.name << " default " << d;
        EXPECT_TRUE(o.choices.empty()) << o.name;
      } else {
        ASSERT_FALSE(o.choices.empty()) << o.name;
        std::stringstream ss{std::string(o.default_value)};
        for (std::string tok; std::getline(ss, tok, ',');)
          EXPECT_NE(std::find(o.choices.begin(), o.choices.end(), tok), o.choices.end())
              << o.name << " default has '" << tok << "'";
      }
      // An option several strategies read is the same option everywhere.
      if (auto [it, fresh] = by_name.emplace(o.name, &o); !fresh) {
        EXPECT_EQ(it->second->default_value, o.default_value) << o.name;
        EXPECT_EQ(it->second->allowed(), o.allowed()) << o.name;
      }
    }
  }
}

namespace {
// `memstrat train --strategy S [--NAME VALUE]` for strategy `e`, which reads the option: the
// exit code parsing decided (nullopt = accepted) and the option's value as it reaches
// StrategyOptions.
std::pair<std::optional<int>, std::string> parse_option(const StrategyEntry& e,
                                                        const StrategyOption& o,
                                                        const std::string& v) {
  const std::string flag = "--" + std::string(o.name), name(e.name);
  std::vector<const char*> argv = {"memstrat", "train", "--strategy", name.c_str()};
  if (!v.empty()) argv.insert(argv.end(), {flag.c_str(), v.c_str()});
  CliRequest req;
  std::ostringstream out, err;
  const std::optional<int> code =
      parse_cli(static_cast<int>(argv.size()), argv.data(), req, out, err);
  if (code) return {code, ""};
  return {code, o.value(strategy_options(req.run))};
}
}  // namespace

// The command line takes each option's range from its declaration and binds it to a RunConfig
// field whose default must be the declared one: same defaults, and exactly the declared values.
TEST(StrategyOptionDecl, TheCommandLineAgreesWithTheDeclarations) {
  for (const auto& e : strategy_registry()) {
    for (const auto& o : e.options) {
      EXPECT_EQ(parse_option(e, o, "").second, o.default_value) << "--" << o.name << " default";
      if (o.kind == OptionKind::Integer) {
        for (int v : {o.min, o.max}) {
          const auto [code, got] = parse_option(e, o, std::to_string(v));
          EXPECT_FALSE(code.has_value()) << "--" << o.name << " " << v << " refused";
          EXPECT_EQ(got, std::to_string(v)) << "--" << o.name;
        }
        for (int v : {o.min - 1, o.max + 1})
          EXPECT_EQ(parse_option(e, o, std::to_string(v)).first, 2) << "--" << o.name << " " << v;
      } else {
        std::vector<std::string> values = {"none"};
        values.insert(values.end(), o.choices.begin(), o.choices.end());
        for (const std::string& v : values) {
          const auto [code, got] = parse_option(e, o, v);
          EXPECT_FALSE(code.has_value()) << "--" << o.name << " " << v << " refused";
          EXPECT_EQ(got, v) << "--" << o.name;
        }
        EXPECT_EQ(parse_option(e, o, "no-such-hint").first, 2) << "--" << o.name;
      }
    }
  }
}

// What a scenario needs (StrategyEntry::unsupported_with): resident serves the stream scenario
// only by gathering on the GPU (--augment none), refused on any device otherwise; um needs
// concurrentManagedAccess once host workers write managed slots, a waiver on devices without it.
TEST(Registry, StreamScenarioRefusalsAndWaivers) {
  StrategyOptions stream;
  stream.scenario = Scenario::Stream;
  DeviceCaps managed_only;
  managed_only.managed_memory = managed_only.can_map_host_memory = true;
  for (const Augment a : {Augment::Light, Augment::Heavy}) {
    stream.augment = a;
    EXPECT_NE(refusal_reason(*find_strategy("resident"), stream).find("--augment none"),
              std::string::npos);
    EXPECT_NE(waiver_reason(*find_strategy("um"), stream, managed_only)
                  .find("concurrentManagedAccess"),
              std::string::npos);
    EXPECT_EQ(refusal_reason(*find_strategy("um"), stream), "") << "a device-dependent waiver";
  }
  stream.augment = Augment::None;  // the GPU gathers; no host thread writes managed memory
  EXPECT_EQ(refusal_reason(*find_strategy("resident"), stream), "");
  EXPECT_EQ(waiver_reason(*find_strategy("um"), stream, managed_only), "");
  // Every strategy runs the other scenarios, and the stream scenario on a capable device,
  // except what the registry states.
  // The peer-fanout forms write their set once, on rank 0's GPU: static only, refused on any
  // device in the other scenarios.
  for (const auto& e : strategy_registry()) {
    const bool static_only = e.name == "peer-fanout" || e.name == "peer-fanout-ring";
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
      StrategyOptions o;
      o.scenario = sc;
      if (static_only && sc != Scenario::Static) {
        EXPECT_NE(refusal_reason(e, o).find("static scenario only"), std::string::npos) << e.name;
        continue;
      }
      EXPECT_EQ(waiver_reason(e, o, DeviceCaps::every()), "") << e.name;
    }
    stream.augment = Augment::Light;
    if (static_only) {
      for (const Augment a : {Augment::None, Augment::Light}) {
        StrategyOptions o = stream;
        o.augment = a;
        EXPECT_NE(refusal_reason(e, o).find("static scenario only"), std::string::npos) << e.name;
      }
      continue;
    }
    // The forms that replay or stage an epoch from a fixed layout refuse the stream scenario.
    const bool fixed_layout = e.name == "zero-copy-staged" || e.name == "pinned-graph" ||
                              e.name == "double-buffer-graph" || e.name == "host-shared-ring";
    if (fixed_layout) {
      EXPECT_NE(refusal_reason(e, stream).find("fixed layout"), std::string::npos) << e.name;
    } else if (e.name != "resident") {
      EXPECT_EQ(refusal_reason(e, stream), "") << e.name;
    }
  }
  // The capability check comes first.
  DeviceCaps none;
  EXPECT_NE(waiver_reason(*find_strategy("um"), stream, none).find("managedMemory"),
            std::string::npos);
}

// In the stream scenario a strategy never offers the whole-epoch forms: its batches depend on
// the producers (tested attached in tests/gpu/test_stream.cu); unattached, the declarations stay.
TEST(Registry, AcquireAheadDeclarations) {
  std::set<std::string_view> ahead;
  for (const auto& e : strategy_registry())
    if (e.make()->acquire_ahead()) ahead.insert(e.name);
  // peer-fanout's forms, unattached (one GPU, static), read resident's set in place.
  EXPECT_EQ(ahead, (std::set<std::string_view>{"resident", "peer-fanout", "peer-fanout-ring"}));
}

// The launch forms each strategy runs per scenario (--launch-form; `memstrat describe` prints
// them and the matrix runner skips the rest). Resident, the reference every other strategy is
// compared with at the same form, runs all four; so do um and zero-copy, whose acquire enqueues
// nothing. Pinned's copies can be captured (an epoch graph), pageable's cannot; the prefetching
// forms have no graph (no node for cudaMemPrefetchAsync); the chunked best forms no epoch kernel;
// double-buffer's slot hand-overs allow neither. The stream scenario: per batch, or not at all.
TEST(Registry, LaunchFormDeclarations) {
  using F = EpochForm;
  const EpochFormSet every{F::PerBatch, F::Graph, F::ChunkKernels, F::Kernel};
  const EpochFormSet no_graph{F::PerBatch, F::ChunkKernels, F::Kernel};
  const EpochFormSet chunks{F::PerBatch, F::Graph, F::ChunkKernels};
  const std::map<std::string_view, EpochFormSet> want = {
      {"resident", every},
      {"pageable", {F::PerBatch}},
      {"pinned", {F::PerBatch, F::Graph}},
      {"double-buffer", {F::PerBatch}},
      {"zero-copy", every},
      {"um", every},
      {"um-prefetch", no_graph},
      {"um-advise", no_graph},
      {"zero-copy-staged", chunks},
      {"um-prefetch-coarse", no_graph},
      {"pinned-graph", chunks},
      {"double-buffer-graph", chunks},
      {"peer-fanout", every},  // static: on one GPU resident's data path; no refresh
      {"peer-fanout-ring", every},
      {"host-shared", {F::PerBatch, F::Graph}},  // pinned's and double-buffer-graph's on one GPU
      {"host-shared-ring", chunks},
      {"um-shared", every},  // um's and um-prefetch-coarse's on one GPU
      {"um-shared-host", every},
      {"um-shared-prefetch", no_graph},
      {"um-shared-read-mostly", no_graph},
  };
  for (const auto& e : strategy_registry()) {
    ASSERT_TRUE(want.count(e.name)) << e.name;
    const EpochFormSet& w = want.at(e.name);
    EXPECT_EQ(e.launch_forms.static_forms, w) << e.name << ": " << e.launch_forms.static_forms.to_string();
    // The refresh scenario: the static forms, where the strategy runs it at all.
    StrategyOptions refresh;
    refresh.scenario = Scenario::Refresh;
    const bool runs_refresh = refusal_reason(e, refresh).empty();
    EXPECT_EQ(e.launch_forms.refresh_forms, runs_refresh ? w : EpochFormSet{})
        << e.name << ": " << e.launch_forms.refresh_forms.to_string();
    // The stream scenario: per batch where the strategy runs it at all.
    StrategyOptions stream;
    stream.scenario = Scenario::Stream;
    stream.augment = Augment::None;
    const bool runs_stream = refusal_reason(e, stream).empty();
    EXPECT_EQ(e.launch_forms.stream_forms, runs_stream ? EpochFormSet{F::PerBatch} : EpochFormSet{})
        << e.name;
    // Every form it lacks in static, and a scenario it does not run, is explained.
    EXPECT_EQ(e.launch_note.empty(), w == every && runs_refresh) << e.name << ": " << e.launch_note;
  }
}

// The declaration and the strategy say the same: unattached, a strategy answers as for the static
// scenario (tests/gpu/test_launch_forms.cu checks them attached, every scenario). What it takes by
// itself (--launch-form auto) is among what it allows.
TEST(Registry, LaunchFormsOfTheStrategyAreItsDeclaration) {
  for (const auto& e : strategy_registry()) {
    const auto s = e.make();
    const LaunchForms allowed = s->launch_forms();
    EXPECT_EQ(forms_of(allowed), e.launch_forms.static_forms)
        << e.name << ": " << forms_of(allowed).to_string();
    const LaunchForms own{s->acquire_ahead(), s->launch_group(), s->epoch_capturable()};
    for (const EpochForm f : kEpochForms)
      if (own.allows(f)) {
        EXPECT_TRUE(allowed.allows(f)) << e.name << " " << to_string(f);
      }
  }
}

TEST(Registry, LaunchFormRefusalSaysWhy) {
  StrategyOptions o;
  EXPECT_EQ(launch_form_refusal(*find_strategy("resident"), o, EpochForm::Kernel), "");
  EXPECT_EQ(launch_form_refusal(*find_strategy("pinned"), o, EpochForm::Graph), "");
  const std::string pinned = launch_form_refusal(*find_strategy("pinned"), o, EpochForm::Kernel);
  EXPECT_NE(pinned.find("strategy pinned runs per-batch, graph in the static scenario"),
            std::string::npos) << pinned;
  EXPECT_NE(pinned.find("one device batch buffer"), std::string::npos) << pinned;
  o.scenario = Scenario::Stream;
  const std::string staged =
      launch_form_refusal(*find_strategy("zero-copy-staged"), o, EpochForm::PerBatch);
  EXPECT_NE(staged.find("runs no launch form in the stream scenario"), std::string::npos) << staged;
  EXPECT_EQ(launch_form_refusal(*find_strategy("um"), o, EpochForm::PerBatch), "");
}

TEST(Registry, EpochFormNames) {
  for (const EpochForm f : kEpochForms) EXPECT_EQ(parse_epoch_form(to_string(f)), f);
  EXPECT_FALSE(parse_epoch_form("auto").has_value());
  EXPECT_EQ(EpochFormSet{}.to_string(), "none");
  EXPECT_EQ((EpochFormSet{EpochForm::Kernel, EpochForm::PerBatch}.to_string()), "per-batch, kernel");
  EXPECT_TRUE(is_kernel_form(EpochForm::ChunkKernels));
  EXPECT_FALSE(is_kernel_form(EpochForm::Graph));
}

// Only the peer-fanout forms (resident's data path on one GPU: the set read in place), the
// host-shared forms (pinned's and double-buffer-graph's: one region of their own) and the
// um-shared forms (um's and um-prefetch-coarse's: their own managed buffers, no cross-GPU hint)
// are another strategy's data path on one GPU, which `memstrat describe` says as one_gpu_as and
// the matrix runner's "all" reads.
TEST(Registry, OneGpuAsNamesARegisteredStrategy) {
  std::map<std::string_view, std::string_view> as;
  for (const auto& e : strategy_registry())
    if (!e.one_gpu_as.empty()) {
      as.emplace(e.name, e.one_gpu_as);
      ASSERT_NE(find_strategy(e.one_gpu_as), nullptr) << e.name;
      EXPECT_TRUE(find_strategy(e.one_gpu_as)->one_gpu_as.empty()) << e.name;
    }
  EXPECT_EQ(as, (std::map<std::string_view, std::string_view>{{"peer-fanout", "resident"},
                                                                {"peer-fanout-ring", "resident"},
                                                                {"host-shared", "pinned"},
                                                                {"host-shared-ring",
                                                                 "double-buffer-graph"},
                                                                {"um-shared", "um"},
                                                                {"um-shared-host", "um"},
                                                                {"um-shared-prefetch",
                                                                 "um-prefetch-coarse"},
                                                                {"um-shared-read-mostly",
                                                                 "um-prefetch-coarse"}}));
}
