#include "experiments/core/console.h"

#include <cmath>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>

namespace memstrat {

namespace {
/// "-" for a value that is not a number (nothing trained: --consumer none).
std::string fmt(double v, int prec = 2) {
  if (std::isnan(v)) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}
/// "-" for a value that was not measured.
template <typename T>
std::string fmt_opt(const std::optional<T>& v, double scale = 1.0, int prec = 2) {
  return v ? fmt(static_cast<double>(*v) / scale, prec) : "-";
}
}  // namespace

void print_run_header(std::ostream& out, const RunRecord& r) {
  const RunConfig& c = r.config;
  out << "memstrat: " << c.strategy->name << " | " << to_string(c.scenario);
  if (c.scenario == Scenario::Stream)
    out << " (" << c.workers << " workers, " << c.prefetch << " slots, augment "
        << to_string(c.augment) << (c.trains() ? "" : ", no consumer: the pipeline alone") << ")";
  out << " | " << to_string(c.transfer) << " | batch " << c.batch << " | hidden " << hidden_string(c.hidden)
      << " | " << c.epochs << " epochs | " << (r.env.gpu ? r.env.gpu->name : "no GPU")
      << " | data " << r.dataset.name << " (" << r.dataset.train_samples << " train, "
      << r.dataset.test_samples << " test) from " << r.dataset.path << "\n";
}

void print_epoch_line(std::ostream& out, const RunRecord& r, const EpochRecord& e) {
  const EpochResult& t = e.train;
  out << "epoch " << std::setw(3) << t.epoch << "/" << r.config.epochs << "  wall " << std::setw(8)
      << fmt(t.wall_ms) << " ms  gpu " << std::setw(8) << fmt(t.gpu_ms) << " ms  copy "
      << std::setw(7) << fmt_opt(t.strategy.copy_ms) << "  stall " << std::setw(7)
      << fmt(t.stall_ms);
  if (t.strategy.producer) out << "  input wait " << std::setw(7) << fmt(t.strategy.producer->consumer_wait_ms);
  out << "  loss " << fmt(t.train_loss, 4) << "  train " << fmt(100 * t.train_acc) << "%  test "
      << fmt(100 * e.test.acc) << "%\n";
  out.flush();
}

namespace {
/// The stream scenario's producer figures per epoch (epochs without host producers: none).
void print_producer_table(std::ostream& out, const RunRecord& r) {
  bool any = false;
  for (const EpochRecord& e : r.epochs) any = any || e.train.strategy.producer.has_value();
  if (!any) return;
  out << "\ninput pipeline (" << r.config.workers << " workers, " << r.config.prefetch
      << " slots, augment " << to_string(r.config.augment) << "): input wait = the trainer "
      << "waited for a ready batch (starvation), first = of which for batch 0; slot wait = "
      << "workers waited for a free slot (back-pressure)\n"
      << std::left << std::setw(6) << "epoch" << std::right << std::setw(14) << "input wait ms"
      << std::setw(10) << "first ms" << std::setw(8) << "waits" << std::setw(14)
      << "slot wait ms" << std::setw(12) << "busy ms" << std::setw(14) << "samples/s"
      << std::setw(18) << "per worker /s" << "\n";
  for (const EpochRecord& e : r.epochs) {
    const std::optional<ProducerStats>& p = e.train.strategy.producer;
    if (!p) continue;
    out << std::left << std::setw(6) << e.train.epoch << std::right << std::setw(14)
        << fmt(p->consumer_wait_ms) << std::setw(10) << fmt(p->first_wait_ms) << std::setw(8)
        << p->consumer_waits << std::setw(14) << fmt(p->slot_wait_ms) << std::setw(12)
        << fmt(p->busy_ms) << std::setw(14) << fmt(p->samples_per_s(), 0) << std::setw(18)
        << fmt(p->worker_samples_per_s(), 0) << "\n";
  }
}
}  // namespace

void print_epoch_table(std::ostream& out, const RunRecord& r) {
  out << "\n" << std::left << std::setw(6) << "epoch" << std::right << std::setw(10) << "wall ms"
      << std::setw(10) << "gpu ms" << std::setw(9) << "copy" << std::setw(9) << "compute"
      << std::setw(9) << "stall" << std::setw(8) << "idle" << std::setw(9) << "host"
      << std::setw(9) << "H2D MB" << std::setw(11) << "UM HtoD MB" << std::setw(10) << "GPU flt"
      << std::setw(10) << "cudaMalloc" << std::setw(9) << "loss" << std::setw(8) << "acc %"
      << std::setw(8) << "test %" << "\n";
  for (const EpochRecord& e : r.epochs) {
    const EpochResult& t = e.train;
    const WindowCounters& w = e.counters;
    const std::string mallocs = w.api_available ? std::to_string(w.api.count("cudaMalloc")) : "-";
    out << std::left << std::setw(6) << t.epoch << std::right << std::setw(10) << fmt(t.wall_ms)
        << std::setw(10) << fmt(t.gpu_ms) << std::setw(9) << fmt_opt(t.strategy.copy_ms)
        << std::setw(9) << fmt(t.compute_ms) << std::setw(9) << fmt(t.stall_ms) << std::setw(8)
        << fmt(t.idle_ms) << std::setw(9) << fmt(t.host_ms) << std::setw(9)
        << fmt(static_cast<double>(t.strategy.h2d_bytes) / 1e6, 1) << std::setw(11)
        << fmt_opt(w.um_htod_bytes, 1e6, 1) << std::setw(10) << fmt_opt(w.um_gpu_faults, 1.0, 0)
        << std::setw(10) << mallocs << std::setw(9) << fmt(t.train_loss, 4) << std::setw(8)
        << fmt(100 * t.train_acc) << std::setw(8) << fmt(100 * e.test.acc) << "\n";
  }
  print_producer_table(out, r);
  if (r.setup) {
    out << "set-up " << fmt(r.setup->ms, 1) << " ms";
    if (r.setup->counters.api_available) {
      out << "; set-up API calls:";
      for (const char* k : {"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged", "cudaFree"})
        out << " " << k << "=" << r.setup->counters.api.count(k);
    }
    out << "\n";
  }
  if (r.totals)
    for (const std::string& n : r.totals->profiler_notes) out << "profiler: " << n << "\n";
}

void print_summary_line(std::ostream& out, const RunRecord& r) {
  const RunConfig& c = r.config;
  const Summary& s = r.totals->summary;
  out << "summary: " << c.strategy->name << " " << to_string(c.scenario) << " "
      << to_string(c.transfer) << " batch " << c.batch << ": median epoch " << fmt(s.wall_ms.median)
      << " ms (min " << fmt(s.wall_ms.min) << ", max " << fmt(s.wall_ms.max) << ", epochs 2.."
      << c.epochs << "), epoch 1 " << fmt(s.epoch1_wall_ms) << " ms, "
      << fmt(s.samples_per_s / 1e6, 2) << " M samples/s, test acc "
      << fmt(100 * r.totals->final_test.acc) << "%\n";
}

}  // namespace memstrat
