#include "experiments/primitives/run_multi_gpu.h"

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <ostream>

#include "common/cuda_check.h"
#include "common/exit_codes.h"
#include "common/nccl_settings.h"
#include "common/nvtx.h"
#include "common/run_record.h"
#include "experiments/primitives/multi_gpu_bench.h"
#include "experiments/primitives/sizes.h"

namespace memstrat {

namespace {
using nlohmann::json;

std::string fixed(double v, int prec) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

struct Point {
  std::size_t bytes = 0;  // what moved (measured_bytes)
  std::vector<double> samples_us;
  Spread us;
  double algbw_gbps = 0;
  std::optional<double> busbw_gbps;
  std::vector<double> per_stream_gbps;  // bytes / median of each stream's own time
  int verified_samples = 0;
};

struct Outcome {
  MultiGpuCase c;
  std::string run_id, started_at;
  std::string status = "ok", error, waived_reason;
  std::vector<Point> points;
};

Point measure(MultiGpuBench& bench, const MultiGpuCase& c, std::size_t size,
              const PrimitivesConfig& cfg) {
  const MultiGpuPattern p = c.entry->pattern;
  const int n = bench.gpus();
  const int iters = is_host_timed(p) ? kHostTimedIters : 1;
  Point pt;
  pt.bytes = measured_bytes(p, size, n);
  std::vector<std::vector<double>> stream_us;
  NvtxRange range(Phase::Batch, c.label(n) + " " + format_size(static_cast<double>(pt.bytes)));
  for (int i = 0; i < cfg.warmup + cfg.samples; ++i) {
    const MultiGpuSample s = bench.sample(c, size, iters);
    if (const std::string why = bench.verify(c, size); !why.empty())
      throw std::runtime_error(c.label(n) + " at " + format_size(static_cast<double>(pt.bytes)) +
                               ", " + (i < cfg.warmup ? "warm-up " : "sample ") +
                               std::to_string(i < cfg.warmup ? i + 1 : i - cfg.warmup + 1) +
                               ": data check failed: " + why);
    ++pt.verified_samples;
    if (i < cfg.warmup) continue;
    pt.samples_us.push_back(s.us);
    stream_us.resize(s.stream_us.size());
    for (std::size_t k = 0; k < s.stream_us.size(); ++k) stream_us[k].push_back(s.stream_us[k]);
  }
  pt.us = spread_of(pt.samples_us);
  pt.algbw_gbps = algbw_bytes(p, size, n) / pt.us.median / 1e3;
  if (const auto f = bus_factor(p, n)) pt.busbw_gbps = pt.algbw_gbps * *f;
  for (const auto& v : stream_us)
    pt.per_stream_gbps.push_back(static_cast<double>(pt.bytes) / spread_of(v).median / 1e3);
  return pt;
}

json record(const Outcome& o, const PrimitivesConfig& c, int gpus, const MultiGpuBench* bench,
            const std::vector<std::string>& argv, const json& env) {
  const MultiGpuPattern p = o.c.entry->pattern;
  json rec;
  rec["schema_version"] = 1;
  rec["record"] = "multi-gpu-primitive";
  rec["implementation"] = "memstrat";
  rec["run_id"] = o.run_id;
  rec["started_at"] = o.started_at;
  rec["status"] = o.status;
  rec["error"] = o.error.empty() ? json(nullptr) : json(o.error);
  rec["waived_reason"] = o.waived_reason.empty() ? json(nullptr) : json(o.waived_reason);
  rec["argv"] = argv;
  rec["env"] = env;
  const bool both = p == MultiGpuPattern::D2dCeBothWays || p == MultiGpuPattern::D2dSmBothWays;
  rec["config"] = {{"pattern", o.c.entry->name},
                   {"description", o.c.entry->description},
                   {"gpus", gpus},
                   {"src", o.c.src >= 0 ? json(o.c.src) : json(nullptr)},
                   {"dst", o.c.dst >= 0 ? json(o.c.dst) : json(nullptr)},
                   {"both_ways", both},
                   {"sizes", c.sizes},
                   {"warmup", c.warmup},
                   {"samples", c.samples},
                   {"iters", is_host_timed(p) ? kHostTimedIters : 1},
                   {"timed_by", is_host_timed(p) ? "steady-clock" : "cuda-events"},
                   {"in_place", false}};
  json peer = nullptr;
  if (bench && o.c.src >= 0 && o.c.dst >= 0)
    peer = {{"src_to_dst", static_cast<bool>(bench->peer_access()[o.c.src][o.c.dst])},
            {"dst_to_src", static_cast<bool>(bench->peer_access()[o.c.dst][o.c.src])}};
  rec["config"]["peer_access"] = peer;
  rec["results"] = json::array();
  double peak = 0;
  std::optional<double> peak_bus;
  std::size_t peak_bytes = 0;
  for (const Point& pt : o.points) {
    rec["results"].push_back(
        {{"bytes", pt.bytes},
         {"median_us", pt.us.median},
         {"p25_us", pt.us.p25},
         {"p75_us", pt.us.p75},
         {"min_us", pt.us.min},
         {"max_us", pt.us.max},
         {"samples_us", pt.samples_us},
         {"algbw_gbps", pt.algbw_gbps},
         {"busbw_gbps", pt.busbw_gbps ? json(*pt.busbw_gbps) : json(nullptr)},
         {"per_gpu_gbps", pt.per_stream_gbps.empty() ? json(nullptr) : json(pt.per_stream_gbps)},
         {"verified_samples", pt.verified_samples}});
    if (pt.algbw_gbps > peak) {
      peak = pt.algbw_gbps;
      peak_bytes = pt.bytes;
      peak_bus = pt.busbw_gbps;
    }
  }
  rec["summary"] = nullptr;
  if (o.status == "ok" && !o.points.empty())
    rec["summary"] = {{"peak_algbw_gbps", peak},
                      {"peak_busbw_gbps", peak_bus ? json(*peak_bus) : json(nullptr)},
                      {"peak_bytes", peak_bytes}};
  return rec;
}

void print_table(std::ostream& out, const std::vector<Outcome>& outcomes, int gpus) {
  out << "\n"
      << std::left << std::setw(28) << "case" << std::right << std::setw(12) << "algbw GB/s"
      << std::setw(12) << "busbw GB/s" << std::setw(11) << "at size" << std::setw(14)
      << "smallest us"
      << "\n";
  for (const Outcome& o : outcomes) {
    out << std::left << std::setw(28) << o.c.label(gpus);
    if (o.status != "ok") {
      out << o.status << ": " << (o.status == "waived" ? o.waived_reason : o.error) << "\n";
      continue;
    }
    const Point* best = &o.points.front();
    for (const Point& p : o.points)
      if (p.algbw_gbps > best->algbw_gbps) best = &p;
    out << std::right << std::setw(12) << fixed(best->algbw_gbps, 2) << std::setw(12)
        << (best->busbw_gbps ? fixed(*best->busbw_gbps, 2) : "-") << std::setw(11)
        << format_size(static_cast<double>(best->bytes)) << std::setw(14)
        << fixed(o.points.front().us.median, 2) << "\n";
  }
  out << "(GB/s = 1e9 bytes/s from the median time per size; algbw = bytes that cross / time, "
         "busbw = algbw x nccl-tests' factor: all-reduce 2(N-1)/N, all-gather (N-1)/N, "
         "broadcast 1)\n";
}

}  // namespace

int run_multi_gpu_primitives(const PrimitivesArgs& a, const PrimitivesConfig& c,
                             const std::vector<std::string>& argv, std::ostream& out,
                             std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = a.gpus;
  Environment environment = device_environment(0);
  if (kHaveNccl) environment.nccl = NcclEnvironment{nccl_version(), nccl_settings()};
  json env = environment.to_json();
  env["gpu_names"] = json::array();
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    env["gpu_names"].push_back(prop.name);
  }
  if (!a.quiet)
    out << "memstrat primitives on " << n << " GPUs (0.." << n - 1 << ", "
        << env["gpu_names"][0].get<std::string>() << "): " << c.patterns.size()
        << " pattern(s), " << c.sizes.size() << " sizes "
        << format_size(static_cast<double>(c.min_bytes)) << " .. "
        << format_size(static_cast<double>(c.max_bytes)) << ", " << c.warmup << " warm-up + "
        << c.samples << " samples per size" << std::endl;
  NvtxRange run(Phase::Run, "memstrat primitives --gpus " + std::to_string(n));
  std::vector<Outcome> outcomes;
  std::optional<MultiGpuBench> bench;
  std::string setup_error;
  try {
    NvtxRange setup(Phase::Setup, "prepare");
    bench.emplace(n, c.max_bytes, c.patterns);
  } catch (const std::exception& e) {
    setup_error = e.what();
    err << "memstrat: setting up " << n << " GPUs failed: " << e.what() << "\n";
  }
  for (const MultiGpuPatternEntry* e : c.patterns) {
    for (const MultiGpuCase& mc : multi_gpu_cases(*e, n)) {
      Outcome o;
      o.c = mc;
      o.run_id = make_run_id();
      o.started_at = iso_utc_now();
      const std::string label = mc.label(n);
      if (!bench) {
        o.status = "failed";
        o.error = "set-up failed: " + setup_error;
      } else if (const std::string why = bench->unsupported(mc); !why.empty()) {
        o.status = "waived";
        o.waived_reason = why;
        if (!a.quiet) out << label << ": waived: " << why << "\n";
      } else {
        if (!a.quiet) out << label << " [" << (is_host_timed(e->pattern) ? "steady-clock" : "cuda-events") << "]: " << e->description << std::endl;
        try {
          NvtxRange range(Phase::Run, "primitive " + label);
          bench->prepare(mc);
          for (const std::size_t size : c.sizes) {
            if (measured_bytes(e->pattern, size, n) == 0) continue;  // all-gather below N floats
            o.points.push_back(measure(*bench, mc, size, c));
            const Point& pt = o.points.back();
            if (!a.quiet)
              out << "  " << std::left << std::setw(10) << format_size(static_cast<double>(pt.bytes))
                  << std::right << std::setw(11) << fixed(pt.us.median, 2) << " us  [p25 "
                  << fixed(pt.us.p25, 2) << ", p75 " << fixed(pt.us.p75, 2) << "]  algbw "
                  << fixed(pt.algbw_gbps, 2) << " GB/s"
                  << (pt.busbw_gbps ? "  busbw " + fixed(*pt.busbw_gbps, 2) + " GB/s" : "")
                  << "  verified " << pt.verified_samples << std::endl;
          }
          if (o.points.empty()) throw std::runtime_error("no size of the sweep moves any bytes");
        } catch (const std::exception& ex) {
          o.status = "failed";
          o.error = ex.what();
          err << "memstrat: " << label << " failed: " << ex.what() << "\n";
        }
      }
      if (!a.json.empty())
        append_jsonl(a.json, record(o, c, n, bench ? &*bench : nullptr, argv, env));
      outcomes.push_back(std::move(o));
    }
  }
  print_table(out, outcomes, n);
  out << "total "
      << fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1)
      << " s";
  if (!a.json.empty()) out << "; " << outcomes.size() << " record(s) appended to " << a.json;
  out << "\n";
  bool any_failed = false, all_waived = true;
  for (const Outcome& o : outcomes) {
    any_failed = any_failed || o.status == "failed";
    all_waived = all_waived && o.status == "waived";
  }
  if (any_failed) {
    err << "memstrat: some cases failed (see above); their records say why\n";
    return kExitRunFailed;
  }
  if (all_waived) {
    err << "memstrat: every selected case is waived on these GPUs\n";
    return kExitNoDevice;
  }
  return kExitOk;
}

}  // namespace memstrat
