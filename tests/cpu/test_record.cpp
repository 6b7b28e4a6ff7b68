// RunRecord (experiments/core/record.h) without a GPU: an example record of a finished run and
// one of a run that failed in set-up, built from realistic values (an H200 run of `pinned`),
// written by to_json() and compared with the committed copies in tests/experiments/fixtures/.
// The Python tests validate those copies against docs/schema/run_record.schema.json and compare
// their shape with a record the binary wrote on a GPU, so the writer, the schema and the readers
// cannot drift apart.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "experiments/cli/options.h"
#include "common/profiler/api_names.h"
#include "experiments/core/record.h"

using namespace memstrat;
using nlohmann::json;

namespace {

const std::string kFixtures = std::string(MEMSTRAT_SOURCE_DIR) + "/tests/experiments/fixtures/";

Environment h200() {
  Environment env;
  env.host = "node-1";
  env.boot_id = "6f1c1f7e-2f5d-4b8e-9a53-0c7d1e2a3b4c";
  env.git_sha = "4f3a9c1e2b7d";
  env.git_dirty = false;
  env.memstrat_version = "0.1.0";
  env.hardware = {"AMD EPYC 9654 96-Core Processor", 192, "0-15", 16, 1622535884800ull};
  GpuEnvironment& g = env.gpu.emplace();
  g.name = "NVIDIA H200";
  g.uuid = "GPU-8f2a01c3-4d5e-6f70-8192-a3b4c5d6e7f8";
  g.compute_capability = "9.0";
  g.sm_count = 132;
  g.memory_bytes = 150109880320ull;
  g.driver_version = "13.0";
  g.runtime_version = "13.0";
  g.driver_release = "580.159.04";
  g.pcie_gen = 5;
  g.pcie_width = 16;
  g.concurrent_managed_access = true;
  g.pageable_memory_access = false;
  g.async_engine_count = 3;
  g.l2_bytes = 62914560;
  g.numa_node = 0;
  g.pcie_max_gen = 5;
  g.pcie_max_width = 16;
  g.sm_clock_max_mhz = 1980;
  g.mem_clock_max_mhz = 3201;
  g.persistence_mode = true;
  g.start = {345, 3201, std::vector<std::string>{"gpu_idle"}, 31, 76.51};  // idle before the run
  return env;
}

WindowCounters counters(std::initializer_list<std::pair<const char*, std::uint64_t>> calls) {
  WindowCounters w;
  w.api_available = true;
  for (const std::string& name : watched_api_names()) w.api.calls[name] = 0;
  for (const auto& [name, n] : calls) w.api.calls[name] = n;
  w.um_htod_bytes = w.um_dtoh_bytes = w.um_gpu_faults = w.um_cpu_faults = 0;
  w.kernel_ms = 4.809146;
  w.memcpy_ms = 3.875125;
  return w;
}

RunConfig pinned_config() {
  RunConfig c;
  c.strategy = find_strategy("pinned");
  c.epochs = 3;
  c.run_tag = "pinned_static_u8_b256_h256_e3_cublas_seed1_r0";
  c.json = "results/quick/tmp/cell.jsonl";
  c.argv = {"build/memstrat", "train", "--strategy", "pinned", "--epochs", "3", "--run-tag",
            c.run_tag, "--json", c.json};
  return c;
}

RunRecord started(const RunConfig& c) {
  RunRecord r;
  r.run_id = "20261121T233012Z-4f3a9c1e";
  r.started_at = "2026-11-21T23:30:12Z";
  r.argv = c.argv;
  r.env = h200();
  r.config = c;
  r.dataset = {"mnist", "/data/mnist", 60000, 10000};
  r.step = StepRecord{true, "single-launch", std::nullopt, std::nullopt};
  return r;
}

RunRecord finished_record() {
  RunRecord r = started(pinned_config());
  r.epoch_launch = EpochLaunchChoice{false,
                                     "strategy pinned moves each batch while the previous ones "
                                     "compute, and strategy pinned cannot be captured as one "
                                     "epoch graph",
                                     EpochForm::PerBatch};
  r.setup = SetupRecord{88.75618, counters({{"cudaMalloc", 21}, {"cudaMallocHost", 6}, {"cudaFree", 1}})};
  const double wall[] = {10.89375, 10.810531, 10.806082};
  const double loss[] = {0.3779624472444752, 0.17556167361347086, 0.12834617838263512};
  for (int e = 1; e <= 3; ++e) {
    EpochRecord er;
    er.train.epoch = e;
    er.train.wall_ms = wall[e - 1];
    er.train.host_ms = 0.00122;
    er.train.gpu_ms = wall[e - 1] - 0.03125;
    er.train.stall_ms = 4.1875;
    er.train.compute_ms = 6.375;
    er.train.idle_ms = 0.25;
    er.train.strategy.h2d_bytes = 47280000;
    er.train.strategy.copy_ms = 3.90625;
    er.train.train_loss = loss[e - 1];
    er.train.train_acc = 0.8895166666666666 + 0.03 * (e - 1);
    er.test = {loss[e - 1] * 0.5, 0.9387 + 0.01 * (e - 1)};
    er.counters = counters({{"cudaMemcpyAsync", 470}, {"cudaGraphLaunch", 235},
                            {"cudaEventRecord", 705}, {"cudaStreamSynchronize", 3}});
    r.epochs.push_back(er);
  }
  RunTotals t;
  t.summary = summarize(r.epochs, r.dataset.train_samples);
  t.final_test = {0.0973, 0.9711};
  t.api_totals = counters({{"cudaMalloc", 21}, {"cudaMallocHost", 6}, {"cudaFree", 22},
                           {"cudaMemcpyAsync", 1413}})
                     .api;
  r.totals = t;
  r.env_end = GpuState{1980, 3201, std::vector<std::string>{}, 38, 312.207};
  return r;
}

/// Failed in attach: the Mlp exists (config.step), the Trainer does not (no epoch_launch, no
/// set-up record), no epoch ran.
RunRecord failed_record() {
  RunRecord r = started(pinned_config());
  r.status = RunStatus::Failed;
  r.error = "cudaMallocHost(&p, bytes) failed: cudaErrorMemoryAllocation (out of memory) at "
            "common/cuda_raii.cpp:41";
  return r;
}

/// A stream-scenario run of double-buffer (4 workers, 8 slots, heavy augmentation): the config
/// names the input pipeline and every epoch carries the producers' figures.
RunRecord stream_record() {
  RunRecord r = finished_record();
  RunConfig& c = r.config;
  c.strategy = find_strategy("double-buffer");
  c.scenario = Scenario::Stream;
  c.workers = 4;
  c.prefetch = 8;
  c.augment = Augment::Heavy;
  c.run_tag = "double-buffer_stream_u8_b256_h256_e3_cublas_d2c1_w4p8-heavy_seed1_r0";
  c.argv = {"build/memstrat", "train", "--strategy", "double-buffer", "--scenario", "stream",
            "--workers", "4", "--prefetch", "8", "--augment", "heavy", "--epochs", "3"};
  r.argv = c.argv;
  r.epoch_launch->off_reason = "strategy double-buffer moves each batch while the previous ones compute";
  for (EpochRecord& e : r.epochs) {
    ProducerStats p;
    p.workers = 4;
    p.slots = 8;
    p.batches = 235;
    p.samples = 60000;
    p.busy_ms = 181.25;
    p.busy_max_ms = 46.5;
    p.slot_wait_ms = 0.75;
    p.consumer_wait_ms = e.train.epoch == 1 ? 35.5 : 30.25;
    p.first_wait_ms = 0.8125;
    p.consumer_waits = 201;
    p.span_ms = 46.875;
    e.train.strategy.producer = p;
    e.train.wall_ms += 36.0;
  }
  r.totals->summary = summarize(r.epochs, r.dataset.train_samples);
  return r;
}

/// The committed copy; with MEMSTRAT_WRITE_FIXTURES=1 in the environment, `j` is written there
/// first (for a deliberate change of the record).
json read_fixture(const std::string& name, const json& j) {
  if (const char* w = std::getenv("MEMSTRAT_WRITE_FIXTURES"); w && std::string(w) == "1")
    std::ofstream(kFixtures + name) << j.dump(2) << "\n";
  std::ifstream in(kFixtures + name);
  if (!in) throw std::runtime_error("cannot read " + kFixtures + name);
  return json::parse(in);
}

/// A failure message that says how to bring the committed copy up to date on purpose.
std::string regenerate(const std::string& name, const json& j) {
  return "to_json() changed; if that is intended, rerun with MEMSTRAT_WRITE_FIXTURES=1 to write " +
         kFixtures + name + " and update docs/schema/run_record.schema.json:\n" + j.dump(2);
}

}  // namespace

TEST(Record, FinishedRunIsTheCommittedExample) {
  const json j = finished_record().to_json();
  EXPECT_EQ(j, read_fixture("run_record_ok.json", j)) << regenerate("run_record_ok.json", j);
}

TEST(Record, FailedRunIsTheCommittedExample) {
  const json j = failed_record().to_json();
  EXPECT_EQ(j, read_fixture("run_record_failed.json", j)) << regenerate("run_record_failed.json", j);
}

TEST(Record, AStrategysOwnOptionsAreRecordedWhereItReadsThem) {
  RunRecord r = finished_record();
  r.config.strategy = find_strategy("double-buffer");
  r.config.depth = 3;
  r.config.copy_streams = 2;
  const json c = r.to_json()["config"];
  EXPECT_EQ(c["depth"], 3);
  EXPECT_EQ(c["streams"], 2);  // --copy-streams, under the key that predates the option's name
  EXPECT_TRUE(c["advise"].is_null());
  EXPECT_TRUE(c["prefetch_chunk_mib"].is_null());
  EXPECT_TRUE(c["copy_chunk_mib"].is_null());
  r.config.strategy = find_strategy("um-prefetch-coarse");
  r.config.prefetch_chunk_mib = 16;
  const json u = r.to_json()["config"];
  EXPECT_EQ(u["prefetch_chunk_mib"], 16);
  EXPECT_TRUE(u["depth"].is_null());
  EXPECT_TRUE(u["copy_chunk_mib"].is_null());
  r.config.strategy = find_strategy("double-buffer-graph");
  r.config.copy_chunk_mib = 32;
  const json g = r.to_json()["config"];
  EXPECT_EQ(g["copy_chunk_mib"], 32);
  EXPECT_EQ(g["depth"], 3);
  EXPECT_TRUE(g["prefetch_chunk_mib"].is_null());
  r.config.strategy = find_strategy("pinned-graph");
  const json p = r.to_json()["config"];
  EXPECT_EQ(p["copy_chunk_mib"], 32);
  EXPECT_TRUE(p["depth"].is_null());
}

// Several GPUs: every rank's own figures beside the epoch's (the slowest rank's); one GPU has none.
TEST(Record, SeveralGpusRecordEveryRanksFigures) {
  RunRecord r = finished_record();
  r.config.gpus = 2;
  for (EpochRecord& e : r.epochs) {
    // rank, gpu_ms, stall_ms, compute_ms, idle_ms, reduce_ms, copy_ms, h2d_bytes, peer_bytes
    const RankTimes a{0, 7.5, 1.25, 6.0, 0.25, 2.0, 0.5, 1000, 0};
    const RankTimes b{1, 8.0, 1.25, 6.0, 0.25, 2.5, std::nullopt, 1000, 24};
    e.train.ranks = {a, b};
    e.train.reduce_ms = 2.5;  // the slowest rank's
  }
  const json j = r.to_json();
  ASSERT_EQ(j["config"]["gpus"], 2);
  for (const json& e : j["epochs"]) {
    ASSERT_TRUE(e.contains("per_gpu"));
    ASSERT_EQ(e["per_gpu"].size(), 2u);
    EXPECT_EQ(e["per_gpu"][0], (json{{"rank", 0}, {"gpu_ms", 7.5}, {"stall_ms", 1.25},
                                     {"compute_ms", 6.0}, {"idle_ms", 0.25}, {"reduce_ms", 2.0},
                                     {"copy_ms", 0.5}, {"h2d_bytes", 1000}, {"peer_bytes", 0}}));
    EXPECT_EQ(e["per_gpu"][1]["reduce_ms"], 2.5);
    EXPECT_EQ(e["reduce_ms"], 2.5);
    EXPECT_EQ(e["per_gpu"][1]["rank"], 1);
    EXPECT_EQ(e["per_gpu"][1]["gpu_ms"], 8.0);
    EXPECT_TRUE(e["per_gpu"][1]["copy_ms"].is_null()) << "no copies: null, not 0";
    EXPECT_EQ(e["per_gpu"][1]["peer_bytes"], 24);
  }
  const json one = finished_record().to_json();  // kept: the loop reads into it
  for (const json& e : one["epochs"]) {
    EXPECT_FALSE(e.contains("per_gpu")) << "one GPU: no per-GPU figures";
    EXPECT_FALSE(e.contains("reduce_ms")) << "one GPU: no reduction";
  }
}

// An unprofiled run does not time the reduction on its own (its events would slow the step):
// neither the epoch nor any rank has reduce_ms, not even as null.
TEST(Record, UnprofiledSeveralGpuRunsHaveNoReductionTime) {
  RunRecord r = finished_record();
  r.config.gpus = 2;
  for (EpochRecord& e : r.epochs)
    e.train.ranks = {RankTimes{0, 7.5, 1.25, 6.0, 0.25, std::nullopt, 0.5, 1000, 0},
                     RankTimes{1, 8.0, 1.25, 6.0, 0.25, std::nullopt, std::nullopt, 1000, 24}};
  const json j = r.to_json();
  for (const json& e : j["epochs"]) {
    EXPECT_FALSE(e.contains("reduce_ms"));
    ASSERT_EQ(e["per_gpu"].size(), 2u);
    for (const json& rank : e["per_gpu"]) EXPECT_FALSE(rank.contains("reduce_ms")) << rank;
  }
}

TEST(Record, StreamRunIsTheCommittedExample) {
  const json j = stream_record().to_json();
  EXPECT_EQ(j, read_fixture("run_record_stream.json", j)) << regenerate("run_record_stream.json", j);
}

// The stream scenario's options and the producers' figures: in the record of a stream run, and
// null (not 0, not absent) in every other run.
TEST(Record, StreamPipelineFigures) {
  const json s = stream_record().to_json();
  EXPECT_EQ(s["config"]["scenario"], "stream");
  EXPECT_EQ(s["config"]["workers"], 4);
  EXPECT_EQ(s["config"]["prefetch"], 8);
  EXPECT_EQ(s["config"]["augment"], "heavy");
  EXPECT_EQ(s["config"]["augment_device"], "host");
  const json& e = s["epochs"][1];
  EXPECT_EQ(e["input_wait_ms"], 30.25);
  EXPECT_EQ(e["input_wait_first_ms"], 0.8125);
  EXPECT_EQ(e["slot_wait_ms"], 0.75);
  EXPECT_EQ(e["producer_busy_ms"], 181.25);
  EXPECT_DOUBLE_EQ(e["producer_samples_per_s"].get<double>(), 60000 / 0.046875);
  EXPECT_DOUBLE_EQ(e["producer_worker_samples_per_s"].get<double>(), 60000 / 0.18125);
  const json p = finished_record().to_json();
  for (const char* k : {"workers", "prefetch", "augment"})
    EXPECT_TRUE(p["config"].contains(k) && p["config"][k].is_null()) << k;
  ASSERT_EQ(p["config"]["scenario"], "static");
  EXPECT_TRUE(p["config"]["augment_device"].is_null()) << "static augments nothing";
  for (const char* k : {"input_wait_ms", "input_wait_first_ms", "slot_wait_ms", "producer_busy_ms",
                        "producer_samples_per_s", "producer_worker_samples_per_s"})
    EXPECT_TRUE(p["epochs"][0].contains(k) && p["epochs"][0][k].is_null()) << k;
}

TEST(Record, KeysAndValuesOfAFinishedRun) {
  const json j = finished_record().to_json();
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_TRUE(j["error"].is_null());
  const json& c = j["config"];
  EXPECT_EQ(c["strategy"], "pinned");
  // A strategy's own options are recorded where it reads them, null where it does not.
  EXPECT_TRUE(c.contains("streams") && c["streams"].is_null());  // pinned has no copy streams
  EXPECT_TRUE(c["depth"].is_null());
  EXPECT_FALSE(c.contains("copy_streams"));
  EXPECT_EQ(c["hidden"], json::array({256}));
  EXPECT_EQ(c["lr"].get<double>(), static_cast<double>(0.05f));  // the float the run used
  EXPECT_TRUE(c["run_tag"].is_string());
  EXPECT_TRUE(c["single_launch_off_reason"].is_null());
  EXPECT_EQ(c["epoch_launch"], false);
  EXPECT_TRUE(c["epoch_launch_off_reason"].is_string());
  EXPECT_EQ(c["epoch_form"], "per-batch");
  EXPECT_EQ(j["setup"]["api_calls"]["cudaMalloc"], 21);
  EXPECT_EQ(j["epochs"].size(), 3u);
  EXPECT_EQ(j["epochs"][1]["copy_ms"], 3.90625);
  // Steady state = epochs 2..3; samples/s from the median steady epoch.
  const json& s = j["summary"];
  EXPECT_EQ(s["steady_epochs"], 2);
  EXPECT_DOUBLE_EQ(s["wall_ms_median"].get<double>(), (10.810531 + 10.806082) / 2);
  EXPECT_EQ(s["epoch1_wall_ms"], 10.89375);
  EXPECT_DOUBLE_EQ(s["samples_per_s"].get<double>(), 60000 / (s["wall_ms_median"].get<double>() / 1000));
  EXPECT_EQ(j["final"]["samples_per_s"], s["samples_per_s"]);
  EXPECT_EQ(j["api_totals"]["cudaFree"], 22);
  EXPECT_TRUE(j["profiler_notes"].is_array());
  // NVML's state at the start in env, at the end in env_end, under the same keys.
  EXPECT_EQ(j["env"]["sm_clock_mhz"], 345);
  EXPECT_EQ(j["env"]["clock_event_reasons"], json::array({"gpu_idle"}));
  EXPECT_EQ(j["env_end"]["sm_clock_mhz"], 1980);
  EXPECT_EQ(j["env_end"]["clock_event_reasons"], json::array());
  EXPECT_EQ(j["env_end"].size(), 5u);
}

// config.epoch_form names which of the one-launch forms ran (config.epoch_launch is true for
// them all) or that the epoch was enqueued batch by batch.
TEST(Record, EpochFormSaysWhichLaunchRan) {
  RunRecord r = finished_record();
  for (const auto& [form, name] : {std::pair{EpochForm::Kernel, "kernel"},
                                   std::pair{EpochForm::ChunkKernels, "kernel-per-chunk"},
                                   std::pair{EpochForm::Graph, "graph"}}) {
    r.epoch_launch = EpochLaunchChoice{true, std::nullopt, form};
    const json c = r.to_json()["config"];
    EXPECT_EQ(c["epoch_launch"], true);
    EXPECT_TRUE(c["epoch_launch_off_reason"].is_null());
    EXPECT_EQ(c["epoch_form"], name);
  }
}

// config.launch_form is what was asked for (auto, or a form by name), written whether or not
// the Trainer was built; config.epoch_form what ran. --copy-chunk is recorded where the run reads
// it: a strategy that declares it, or kernel-per-chunk asked of any strategy (its launch groups).
TEST(Record, LaunchFormSaysWhatWasAskedFor) {
  RunRecord r = finished_record();  // pinned
  EXPECT_EQ(r.to_json()["config"]["launch_form"], "auto");
  EXPECT_TRUE(r.to_json()["config"]["copy_chunk_mib"].is_null());
  r.config.launch_form = LaunchForm::Graph;
  r.epoch_launch = EpochLaunchChoice{true, std::nullopt, EpochForm::Graph};
  json c = r.to_json()["config"];
  EXPECT_EQ(c["launch_form"], "graph");
  EXPECT_EQ(c["epoch_form"], "graph");
  EXPECT_TRUE(c["copy_chunk_mib"].is_null());
  r.config.strategy = find_strategy("resident");
  r.config.launch_form = LaunchForm::ChunkKernels;
  r.config.copy_chunk_mib = 4;
  c = r.to_json()["config"];
  EXPECT_EQ(c["launch_form"], "kernel-per-chunk");
  EXPECT_EQ(c["copy_chunk_mib"], 4);
  const json failed = failed_record().to_json()["config"];
  EXPECT_EQ(failed["launch_form"], "auto");
  EXPECT_FALSE(failed.contains("epoch_form"));
}

TEST(Record, WhatIsNotMeasuredIsNullNotZero) {
  RunRecord r = finished_record();
  r.config.profile = false;
  r.totals->api_totals.reset();
  r.epochs[0].counters = WindowCounters{};  // profiler off: nothing available
  r.epochs[0].train.strategy.copy_ms.reset();
  r.config.run_tag.clear();
  const json j = r.to_json();
  EXPECT_TRUE(j["api_totals"].is_null());
  for (const char* k : {"api_calls", "um_htod_bytes", "um_gpu_faults", "kernel_ms", "copy_ms"})
    EXPECT_TRUE(j["epochs"][0][k].is_null()) << k;
  EXPECT_TRUE(j["config"]["run_tag"].is_null());
}

// --replicate and --device-budget: config.replicate always, config.device_budget_gib and the
// device_budget object null without a budget, and what was held with one.
TEST(Record, ReplicateAndDeviceBudget) {
  json j = finished_record().to_json();
  EXPECT_EQ(j["config"]["replicate"], 1);
  EXPECT_TRUE(j["config"]["device_budget_gib"].is_null());
  EXPECT_TRUE(j["device_budget"].is_null());
  RunConfig c = pinned_config();
  c.replicate = 4;
  c.device_budget_gib = 0.5;
  RunRecord r = started(c);
  r.dataset.train_samples = 240000;
  DeviceBudgetRecord b;
  b.gib = 0.5;
  b.budget_bytes = 1ull << 29;
  b.margin_bytes = 300000000;
  b.data_footprint_bytes = 201728;
  b.free_before_hold_bytes = 80000000000;
  b.held_bytes = 80000000000 - (1ull << 29) - 300000000;
  b.free_after_hold_bytes = (1ull << 29) + 300000000;
  r.device_budget = b;
  j = r.to_json();
  EXPECT_EQ(j["config"]["replicate"], 4);
  EXPECT_EQ(j["config"]["device_budget_gib"], 0.5);
  EXPECT_EQ(j["config"]["dataset"]["train_samples"], 240000);
  const json& d = j["device_budget"];
  EXPECT_EQ(d["gib"], 0.5);
  EXPECT_EQ(d["budget_bytes"], 1ull << 29);
  EXPECT_EQ(d["held_bytes"], b.held_bytes);
  EXPECT_EQ(d["data_footprint_bytes"], 201728);
  EXPECT_TRUE(d["free_after_run_bytes"].is_null()) << "set only once the epochs ran";
}

TEST(Record, AFailedRunHasNoTotals) {
  const json j = failed_record().to_json();
  EXPECT_EQ(j["status"], "failed");
  EXPECT_TRUE(j["error"].is_string());
  for (const char* k : {"setup", "summary", "final", "api_totals", "profiler_notes", "env_end"})
    EXPECT_FALSE(j.contains(k)) << k;
  EXPECT_FALSE(j["config"].contains("epoch_launch"));
  EXPECT_FALSE(j["config"].contains("epoch_form"));
  EXPECT_TRUE(j["config"].contains("step"));
  EXPECT_TRUE(j["epochs"].empty());
}

// `describe` names each option's key in the record; every one of them is in the record.
TEST(Record, EveryRecordKeyDescribeNamesIsInTheRecord) {
  const json config = finished_record().to_json()["config"];
  int keyed = 0;
  for (const OptionInfo& o : train_option_table()) {
    if (o.record_key.empty()) continue;
    ++keyed;
    EXPECT_TRUE(config.contains(o.record_key)) << o.name << " -> config." << o.record_key;
  }
  EXPECT_GE(keyed, 18);
}

TEST(Record, SummaryOfOneEpochUsesThatEpoch) {
  RunRecord r = finished_record();
  r.epochs.resize(1);
  const Summary s = summarize(r.epochs, 60000);
  EXPECT_EQ(s.steady_epochs, 1u);
  EXPECT_EQ(s.wall_ms.median, r.epochs[0].train.wall_ms);
  EXPECT_EQ(s.epoch1_wall_ms, r.epochs[0].train.wall_ms);
}
