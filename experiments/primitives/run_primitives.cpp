#include "experiments/primitives/run_primitives.h"

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <ostream>

#include "common/cuda_raii.h"
#include "common/exit_codes.h"
#include "common/nvtx.h"
#include "common/run_record.h"
#include "experiments/primitives/record.h"
#include "experiments/primitives/run_multi_gpu.h"
#include "experiments/primitives/sizes.h"

namespace memstrat {

namespace {

std::string fixed(double v, int prec) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string seconds_since(std::chrono::steady_clock::time_point t0) {
  return fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1);
}

void print_point(std::ostream& out, const SizePoint& p) {
  out << "  " << std::left << std::setw(10) << format_size(static_cast<double>(p.bytes))
      << std::right << std::setw(11) << fixed(p.us.median, 2) << " us  [p25 " << fixed(p.us.p25, 2)
      << ", p75 " << fixed(p.us.p75, 2) << "]" << std::setw(10) << fixed(p.gbps, 2)
      << " GB/s  verified " << p.verified_samples << "\n";
  out.flush();
}

void run_self_check(PrimitiveOutcome& o, const PrimitivesConfig& c, std::ostream& out) {
  const SizePoint& largest = o.points.back();
  if (largest.bytes < kSelfCheckMinBytes) {
    o.self_check_skipped = "largest size " + format_size(static_cast<double>(largest.bytes)) +
                           " is below " + format_size(static_cast<double>(kSelfCheckMinBytes));
    out << "self-check skipped: " << o.self_check_skipped << "\n";
    return;
  }
  NvtxRange r(Phase::H2D, "self-check: plain cudaMemcpyAsync");
  o.self_check = self_check(largest.bytes, largest.us.median, c.samples);
  const SelfCheck& s = *o.self_check;
  out << "self-check: " << kSelfCheckPrimitive << " at "
      << format_size(static_cast<double>(s.bytes)) << ": " << fixed(s.primitive_median_us, 1)
      << " us (median) vs a plain event-timed "
      << "cudaMemcpyAsync " << fixed(s.plain_median_us, 1) << " us (median of " << s.samples
      << "): " << (s.relative_difference >= 0 ? "+" : "") << fixed(100 * s.relative_difference, 2)
      << "% (limit +-" << fixed(100 * kSelfCheckTolerance, 0)
      << "%): " << (s.passed ? "passed" : "FAILED") << "\n";
}

PrimitiveOutcome run_one(const PrimitiveEntry& e, const PrimitivesConfig& c,
                         const PrimitiveContext& ctx, const DeviceCaps& caps, bool quiet,
                         std::ostream& out, std::ostream& err) {
  PrimitiveOutcome o;
  o.entry = &e;
  o.run_id = make_run_id();
  o.started_at = iso_utc_now();
  std::unique_ptr<TransferPrimitive> p = e.make();
  o.timed_by = p->timed_by();
  o.direction = p->direction();
  if (const std::string why = e.unsupported(caps); !why.empty()) {
    o.status = "waived";
    o.waived_reason = why;
    if (!quiet) out << e.name << ": waived on this device: " << why << "\n";
    return o;
  }
  if (!quiet) out << e.name << " [" << to_string(o.timed_by) << "]: " << e.description << std::endl;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    NvtxRange range(Phase::Run, "primitive " + std::string(e.name));
    {
      NvtxRange setup(Phase::Setup, "prepare");
      p->prepare(c.sizes.back(), ctx);
    }
    PrimitiveSweep sweep(*p, ctx, std::string(e.name));
    for (const std::size_t bytes : c.sizes) {
      o.points.push_back(sweep.measure(bytes, {c.warmup, c.samples}));
      if (!quiet) print_point(out, o.points.back());
    }
    p.reset();  // free its buffers before the self-check allocates its own
    std::vector<std::size_t> bytes;
    std::vector<double> median_us;
    for (const SizePoint& pt : o.points) {
      bytes.push_back(pt.bytes);
      median_us.push_back(pt.us.median);
    }
    o.summary = summarize_curve(bytes, median_us);
    if (!quiet) out << "  " << o.points.size() << " sizes in " << seconds_since(t0) << " s\n";
    if (e.name == kSelfCheckPrimitive) run_self_check(o, c, out);
  } catch (const std::exception& ex) {
    o.status = "failed";
    o.error = ex.what();
    err << "memstrat: " << e.name << " failed: " << ex.what() << "\n";
  }
  return o;
}

void print_table(std::ostream& out, const std::vector<PrimitiveOutcome>& outcomes) {
  out << "\n"
      << std::left << std::setw(22) << "primitive" << std::setw(14) << "timed by" << std::right
      << std::setw(10) << "peak GB/s" << std::setw(11) << "at size" << std::setw(11) << "50% at"
      << std::setw(11) << "90% at" << std::setw(15) << "4 KiB latency"
      << "\n";
  for (const PrimitiveOutcome& o : outcomes) {
    out << std::left << std::setw(22) << o.entry->name;
    if (o.status == "waived") {
      out << "waived: " << o.waived_reason << "\n";
      continue;
    }
    if (o.status != "ok" || !o.summary) {
      out << "failed: " << o.error << "\n";
      continue;
    }
    const CurveSummary& s = *o.summary;
    out << std::setw(14) << to_string(o.timed_by) << std::right << std::setw(10)
        << fixed(s.peak_gbps, 2) << std::setw(11) << format_size(static_cast<double>(s.peak_bytes))
        << std::setw(11) << format_size(s.knee50_bytes) << std::setw(11)
        << format_size(s.knee90_bytes) << std::setw(15)
        << (s.latency_4k_us ? fixed(*s.latency_4k_us, 2) + " us" : "-") << "\n";
  }
  out << "(GB/s = 1e9 bytes/s from the median time per size; knees: the size where a curve first "
         "reaches 50% / 90% of its peak, interpolated in log-size)\n";
}

}  // namespace

int run_primitives(const PrimitivesArgs& a, const std::vector<std::string>& argv, std::ostream& out,
                   std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  const PrimitivesConfig c = make_primitives_config(a);
  if (a.gpus > 1) return run_multi_gpu_primitives(a, c, argv, out, err);
  CUDA_CHECK(cudaSetDevice(a.device));
  const DeviceCaps caps = DeviceCaps::query(a.device);
  GpuMonitor monitor = GpuMonitor::for_device(a.device);  // NVML, read now and after each primitive
  const nlohmann::json env = device_environment(a.device, monitor).to_json();
  Stream stream = Stream::create(), side = Stream::create();
  nvtx_name_stream(stream, "primitives");
  nvtx_name_stream(side, "primitives side");
  const PrimitiveContext ctx{a.device, stream, side};

  if (!a.quiet)
    out << "memstrat primitives on " << env["gpu_name"].get<std::string>() << " (device "
        << a.device << "): " << c.primitives.size() << " primitive(s), " << c.sizes.size()
        << " sizes " << format_size(static_cast<double>(c.min_bytes)) << " .. "
        << format_size(static_cast<double>(c.max_bytes)) << ", " << c.warmup << " warm-up + "
        << c.samples << " samples per size\n";
  NvtxRange run(Phase::Run, "memstrat primitives");
  std::vector<PrimitiveOutcome> outcomes;
  for (const PrimitiveEntry* e : c.primitives) {
    outcomes.push_back(run_one(*e, c, ctx, caps, a.quiet, out, err));
    if (outcomes.back().status != "waived") outcomes.back().env_end = monitor.state();
    if (!a.json.empty())
      append_jsonl(a.json, primitive_record(outcomes.back(), c, a.device, argv, env));
  }
  print_table(out, outcomes);
  out << "total " << seconds_since(t0) << " s";
  if (!a.json.empty()) out << "; " << outcomes.size() << " record(s) appended to " << a.json;
  out << "\n";

  bool any_failed = false, check_failed = false, all_waived = true;
  for (const PrimitiveOutcome& o : outcomes) {
    any_failed = any_failed || o.status == "failed";
    check_failed = check_failed || (o.self_check && !o.self_check->passed);
    all_waived = all_waived && o.status == "waived";
  }
  if (any_failed) err << "memstrat: some primitives failed (see above); their records say why\n";
  if (check_failed)
    err << "memstrat: the self-check failed: the harness's pinned-h2d time disagrees with a plain "
           "event-timed copy by more than 5%; is another process using the GPU or the PCIe link?\n";
  if (any_failed || check_failed) return kExitRunFailed;
  if (all_waived) {
    err << "memstrat: every selected primitive is waived on this device\n";
    return kExitNoDevice;
  }
  return kExitOk;
}

}  // namespace memstrat
