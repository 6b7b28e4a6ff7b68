#include "experiments/core/record.h"

#include "experiments/core/data_parallel_request.h"
#include "memory_strategies/registry.h"

namespace memstrat {

namespace {
using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

/// A strategy option's value where the strategy reads it (its registry entry declares it), else
/// null: the record says which options shaped the run.
json if_read(const RunConfig& c, std::string_view option, json value) {
  for (const StrategyOption& o : c.strategy->options)
    if (o.name == option) return value;
  return nullptr;
}

/// True when the run augments its samples: refresh (the shift), stream with --augment light|heavy.
bool augments(const RunConfig& c) {
  return c.scenario == Scenario::Refresh ||
         (c.scenario == Scenario::Stream && c.augment != Augment::None);
}

json config_json(const RunRecord& r) {
  const RunConfig& c = r.config;
  const bool stream = c.scenario == Scenario::Stream;
  json j{{"strategy", c.strategy->name},
         {"scenario", to_string(c.scenario)},
         {"transfer", to_string(c.transfer)},
         {"batch", c.batch},
         {"hidden", c.hidden},
         {"epochs", c.epochs},
         {"lr", c.lr},
         {"momentum", c.momentum},
         {"seed", c.seed},
         {"gemm", kernels::to_string(c.gemm)},
         {"tf32", c.tf32},
         // data-parallel steps replay graphs on one GPU and one process per GPU only
         {"graphs", c.data_parallel() ? data_parallel_graphs(c) : c.graphs == Graphs::On},
         {"launch_form", to_string(c.launch_form)},
         {"depth", if_read(c, "depth", c.depth)},
         // --copy-streams (the key predates the option's name)
         {"streams", if_read(c, "copy-streams", c.copy_streams)},
         {"advise", if_read(c, "advise", c.advise.to_string())},
         {"prefetch_chunk_mib", if_read(c, "prefetch-chunk", c.prefetch_chunk_mib)},
         // The stream scenario's options; null where they do not apply.
         {"workers", stream ? json(c.workers) : json(nullptr)},
         {"prefetch", stream ? json(c.prefetch) : json(nullptr)},
         {"augment", stream ? json(to_string(c.augment)) : json(nullptr)},
         {"consumer", stream ? json(to_string(c.consumer)) : json(nullptr)},
         // Where the samples were augmented; null where nothing is (static, stream --augment none).
         {"augment_device", augments(c) ? json(to_string(c.augment_device)) : json(nullptr)},
         {"copy_chunk_mib", reads_copy_chunk(c) ? json(c.copy_chunk_mib) : json(nullptr)},
         {"stage_blocks", if_read(c, "stage-blocks", c.stage_blocks)},
         {"replicate", c.replicate},
         {"device_budget_gib", c.device_budget_gib ? json(*c.device_budget_gib) : json(nullptr)},
         {"profile", c.profile},
         {"thread_placement", to_string(c.thread_placement)},
         {"run_tag", c.run_tag.empty() ? json(nullptr) : json(c.run_tag)},
         {"device", c.device},
         {"gpus", c.gpus},
         {"emulate_gpus", c.emulate_gpus},
         // how the shards' gradients were combined: the emulation sums in rank order (exact)
         {"reduce", c.data_parallel() ? json(to_string(c.reduce)) : json(nullptr)},
         // how several GPUs were driven: one process, or one per GPU under a launcher
         {"processes", c.gpus > 1 ? json(to_string(c.processes)) : json(nullptr)},
         {"dataset",
          {{"name", r.dataset.name},
           {"path", r.dataset.path},
           {"train_samples", r.dataset.train_samples},
           {"test_samples", r.dataset.test_samples}}}};
  if (r.step) {
    j["fused"] = r.step->fused;
    j["step"] = r.step->step;
    j["single_launch_off_reason"] = or_null(r.step->single_launch_off_reason);
    j["fused_off_reason"] = or_null(r.step->fused_off_reason);
  }
  if (r.epoch_launch) {
    j["epoch_launch"] = r.epoch_launch->on;
    j["epoch_launch_off_reason"] = or_null(r.epoch_launch->off_reason);
    j["epoch_form"] = to_string(r.epoch_launch->form);
  }
  return j;
}

json epoch_json(const EpochRecord& e) {
  json j = CuptiProfiler::to_json(e.counters);  // api_calls, um_*, kernel_ms, memcpy_ms
  const EpochResult& t = e.train;
  j["epoch"] = t.epoch;
  j["wall_ms"] = t.wall_ms;
  j["gpu_ms"] = t.gpu_ms;
  j["host_ms"] = t.host_ms;
  j["copy_ms"] = or_null(t.strategy.copy_ms);
  j["compute_ms"] = t.compute_ms;
  j["stall_ms"] = t.stall_ms;
  j["idle_ms"] = t.idle_ms;
  if (t.reduce_ms) j["reduce_ms"] = *t.reduce_ms;  // profiled data-parallel runs only
  j["h2d_bytes"] = t.strategy.h2d_bytes;
  j["peer_bytes"] = t.strategy.peer_bytes;
  // The stream scenario's host producers; null without them (other scenarios, GPU gather).
  const std::optional<ProducerStats>& p = t.strategy.producer;
  j["input_wait_ms"] = p ? json(p->consumer_wait_ms) : json(nullptr);
  j["input_wait_first_ms"] = p ? json(p->first_wait_ms) : json(nullptr);
  j["slot_wait_ms"] = p ? json(p->slot_wait_ms) : json(nullptr);
  j["producer_busy_ms"] = p ? json(p->busy_ms) : json(nullptr);
  j["producer_samples_per_s"] = p ? json(p->samples_per_s()) : json(nullptr);
  j["producer_worker_samples_per_s"] = p ? json(p->worker_samples_per_s()) : json(nullptr);
  // Several GPUs: every rank's own figures (the fields above are the slowest rank's)
  if (!t.ranks.empty()) {
    json ranks = json::array();
    for (const RankTimes& rt : t.ranks) {
      json r{{"rank", rt.rank}, {"gpu_ms", rt.gpu_ms}, {"stall_ms", rt.stall_ms},
             {"compute_ms", rt.compute_ms}, {"idle_ms", rt.idle_ms},
             {"copy_ms", or_null(rt.copy_ms)}, {"h2d_bytes", rt.h2d_bytes},
             {"peer_bytes", rt.peer_bytes}};
      if (rt.reduce_ms) r["reduce_ms"] = *rt.reduce_ms;  // profiled runs only
      ranks.push_back(std::move(r));
    }
    j["per_gpu"] = std::move(ranks);
  }
  j["train_loss"] = t.train_loss;
  j["train_acc"] = t.train_acc;
  j["test_loss"] = e.test.loss;
  j["test_acc"] = e.test.acc;
  return j;
}

json summary_json(const Summary& s) {
  return json{{"steady_epochs", s.steady_epochs},
              {"wall_ms_median", s.wall_ms.median},
              {"wall_ms_min", s.wall_ms.min},
              {"wall_ms_max", s.wall_ms.max},
              {"wall_ms_p25", s.wall_ms.p25},
              {"wall_ms_p75", s.wall_ms.p75},
              {"gpu_ms_median", s.gpu_ms_median},
              {"epoch1_wall_ms", s.epoch1_wall_ms},
              {"samples_per_s", s.samples_per_s}};
}
}  // namespace

Summary summarize(const std::vector<EpochRecord>& epochs, std::int64_t n_train) {
  Summary s;
  if (epochs.empty()) return s;
  std::vector<double> wall, gpu;
  const std::size_t first = epochs.size() > 1 ? 1 : 0;  // epoch 1 is warm-up
  for (std::size_t i = first; i < epochs.size(); ++i) {
    wall.push_back(epochs[i].train.wall_ms);
    gpu.push_back(epochs[i].train.gpu_ms);
  }
  s.steady_epochs = wall.size();
  s.wall_ms = spread_of(wall);
  s.gpu_ms_median = spread_of(gpu).median;
  s.epoch1_wall_ms = epochs.front().train.wall_ms;
  s.samples_per_s =
      s.wall_ms.median > 0 ? static_cast<double>(n_train) / (s.wall_ms.median / 1000.0) : 0.0;
  return s;
}

RunRecord RunRecord::start(const RunConfig& cfg, const HostDataset& data, Environment env) {
  RunRecord r;
  r.run_id = make_run_id();
  r.started_at = iso_utc_now();
  r.argv = cfg.argv;
  r.env = std::move(env);
  r.config = cfg;
  r.dataset = {data.name, data.source, data.n_train(), data.n_test()};
  return r;
}

json RunRecord::to_json() const {
  json j;
  j["schema_version"] = kSchemaVersion;
  j["run_id"] = run_id;
  j["started_at"] = started_at;
  j["status"] = status == RunStatus::Ok ? "ok" : "failed";
  j["error"] = status == RunStatus::Ok ? json(nullptr) : json(error);
  j["argv"] = argv;
  j["env"] = env.to_json();
  j["config"] = config_json(*this);
  j["epochs"] = json::array();
  for (const EpochRecord& e : epochs) j["epochs"].push_back(epoch_json(e));
  if (setup)
    j["setup"] = {{"ms", setup->ms}, {"api_calls", CuptiProfiler::to_json(setup->counters)["api_calls"]}};
  if (totals) {
    j["summary"] = summary_json(totals->summary);
    j["final"] = {{"test_loss", totals->final_test.loss},
                  {"test_acc", totals->final_test.acc},
                  {"samples_per_s", totals->summary.samples_per_s}};
    j["api_totals"] = totals->api_totals ? json(totals->api_totals->calls) : json(nullptr);
    j["profiler_notes"] = totals->profiler_notes;
  }
  if (env_end) j["env_end"] = env_end->to_json();
  // Written whenever the run asked for a budget and got as far as holding it; null without one.
  j["device_budget"] = device_budget ? device_budget->to_json() : json(nullptr);
  return j;
}

}  // namespace memstrat
