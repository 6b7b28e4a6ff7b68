// step_bench: times the single-launch training step (kernels/single_launch/step_launcher.h) on
// random data and shows where its time goes.
//
//   build/step_bench [--batch N] [--hidden H] [--transfer u8|f32] [--reps R] [--blocks-per-sm B]
//                    [--steps S] [--beside R]
//
// Prints the median (min-max) of R back-to-back launches timed with CUDA events (after 20
// warm-up launches), then one launch with per-block %globaltimer stamps: for each phase the
// time from the first block's start to the last block's end, and how long the grid barriers
// waited; then (S > 0) the median of 5 launches of S steps each (StepLauncher::run_steps, the
// trainer's epoch launch), per step, and the same stamps for the middle step of one more such
// launch. --stamps-csv also writes every block's stamps. Random X / labels / He-initialised
// weights; lr 0.05, momentum 0.9.
//
// --beside R > 0 measures the step as zero-copy-staged runs it: the grid leaves R block slots
// free, and beside every timed (and the stamped) launch an R-block SmCopy on a high-priority
// stream reads one batch of X from mapped host memory into device memory (the next step waits
// for it, the next copy for the step). It also prints that copy's time alone.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "kernels/single_launch/step_launcher.h"
#include "memory_strategies/sm_copy.h"

using namespace memstrat;

namespace {

std::vector<unsigned long long> read_stamps(const DeviceBuffer<unsigned long long>& d, int G, cudaStream_t s) {
  std::vector<unsigned long long> t(static_cast<std::size_t>(kernels::kStepStamps) * G);
  CUDA_CHECK(cudaMemcpyAsync(t.data(), d.data(), d.bytes(), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return t;
}

// Per phase: the first and the last block to pass each point, in us from the first block's start.
void print_stamps(const char* what, const std::vector<unsigned long long>& t, int G, int hidden,
                  std::FILE* csv) {
  auto col = [&](int k, bool latest) {
    unsigned long long v = t[static_cast<std::size_t>(k) * G];
    for (int b = 1; b < G; ++b) {
      const unsigned long long x = t[static_cast<std::size_t>(k) * G + b];
      v = latest ? std::max(v, x) : std::min(v, x);
    }
    return v;
  };
  const unsigned long long t0 = col(kernels::kStampStart, false);
  auto rel = [&](unsigned long long x) { return 1e-3 * static_cast<double>(x - t0); };
  std::printf("%s (us from the first block's start):\n", what);
  std::printf("  blocks started      %8.2f .. %8.2f\n", 0.0, rel(col(kernels::kStampStart, true)));
  std::printf("  A (forward GEMM)    ends %8.2f .. %8.2f\n", rel(col(kernels::kStampEndA, false)), rel(col(kernels::kStampEndA, true)));
  std::printf("  barrier 1 released  %8.2f .. %8.2f\n", rel(col(kernels::kStampStartB, false)), rel(col(kernels::kStampStartB, true)));
  std::printf("  B (head)            ends %8.2f .. %8.2f\n", rel(col(kernels::kStampEndB, false)), rel(col(kernels::kStampEndB, true)));
  std::printf("  barrier 2 released  %8.2f .. %8.2f\n", rel(col(kernels::kStampStartC, false)), rel(col(kernels::kStampStartC, true)));
  std::printf("  C: gW1 tiles done    %8.2f .. %8.2f\n", rel(col(kernels::kStampGradC, false)), rel(col(kernels::kStampGradC, true)));
  std::printf("  C (gW1 + update)    ends %8.2f .. %8.2f\n", rel(col(kernels::kStampEndC, false)), rel(col(kernels::kStampEndC, true)));
  // Which blocks set each phase's end: the median block, and in C the blocks of the small
  // layer's items (the first ceil(hidden / 16) blocks: dW2, db1, db2) apart from the rest.
  auto end_of = [&](int k, int b0, int b1, bool median) {
    std::vector<unsigned long long> v(t.begin() + static_cast<std::ptrdiff_t>(k) * G + b0,
                                      t.begin() + static_cast<std::ptrdiff_t>(k) * G + b1);
    std::sort(v.begin(), v.end());
    return rel(median ? v[v.size() / 2] : v.back());
  };
  if (csv != nullptr)
    for (int b = 0; b < G; ++b)
      for (int k = 0; k < kernels::kStepStamps; ++k)
        std::fprintf(csv, "%s,%d,%d,%.3f\n", what, b, k, rel(t[static_cast<std::size_t>(k) * G + b]));
  const int small = std::min(G, (hidden + 15) / 16);
  std::printf("  median block ends: A %.2f, B %.2f, C %.2f; C's last end: small-layer blocks %.2f, gW1 blocks %.2f\n",
              end_of(kernels::kStampEndA, 0, G, true), end_of(kernels::kStampEndB, 0, G, true),
              end_of(kernels::kStampEndC, 0, G, true), end_of(kernels::kStampEndC, 0, small, false),
              small < G ? end_of(kernels::kStampEndC, small, G, false) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the single-launch MLP training step and break it down by phase"};
  int batch = 256, hidden = 256, reps = 500, bps = 0, in = 784, classes = 10, steps = 500;
  std::string transfer = "u8";
  app.add_option("--batch", batch, "rows per step")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--hidden", hidden, "hidden units")->check(CLI::Range(4, 4096))->capture_default_str();
  app.add_option("--transfer", transfer, "input type")->check(CLI::IsMember({"u8", "f32"}))->capture_default_str();
  app.add_option("--reps", reps, "timed launches")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--blocks-per-sm", bps, "0 = the launcher's choice")->check(CLI::Range(0, 8))->capture_default_str();
  app.add_option("--steps", steps, "steps per multi-step launch (0: skip that measurement)")->check(CLI::Range(0, 1000000))->capture_default_str();
  int beside = 0;
  app.add_option("--beside", beside, "block slots left free for an SM copy of one batch from mapped host memory beside every step (0: none)")->check(CLI::Range(0, 128))->capture_default_str();
  std::string csv_path;
  app.add_option("--stamps-csv", csv_path, "also write every block's stamps (what,block,point,us) to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
      std::fprintf(stderr, "step_bench: needs an NVIDIA GPU\n");
      return 3;
    }
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(nullptr, &std::fclose);
    if (!csv_path.empty()) {
      csv.reset(std::fopen(csv_path.c_str(), "w"));
      if (!csv) {
        std::fprintf(stderr, "step_bench: cannot write %s\n", csv_path.c_str());
        return 2;
      }
      std::fprintf(csv.get(), "what,block,point,us\n");
    }
    Stream s = Stream::create();
    const kernels::StepLauncher step(in, hidden, classes, batch, bps, beside);
    std::mt19937 rng(1);
    std::vector<std::uint8_t> px(static_cast<std::size_t>(batch) * in);
    std::vector<float> xf(px.size());
    std::uniform_int_distribution<int> u(0, 255);
    for (std::size_t i = 0; i < px.size(); ++i) {
      px[i] = static_cast<std::uint8_t>(u(rng) < 100 ? 0 : u(rng));
      xf[i] = static_cast<float>(px[i]) / 255.0f;
    }
    std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
    for (auto& v : y) v = u(rng) % classes;
    const std::size_t nW1 = static_cast<std::size_t>(in) * hidden, nW2 = static_cast<std::size_t>(hidden) * classes;
    std::vector<float> P(nW1 + hidden + nW2 + classes, 0.f);
    std::normal_distribution<float> n1(0.f, std::sqrt(2.f / in)), n2(0.f, std::sqrt(2.f / hidden));
    for (std::size_t i = 0; i < nW1; ++i) P[i] = n1(rng);
    for (std::size_t i = 0; i < nW2; ++i) P[nW1 + hidden + i] = n2(rng);
    DeviceBuffer<std::uint8_t> dpx(px.size());
    DeviceBuffer<float> dxf(xf.size()), dP(P.size()), dV(P.size()),
        H(static_cast<std::size_t>(batch) * hidden), dH(H.size()),
        dl(static_cast<std::size_t>(batch) * classes), part(kernels::step_partial_floats(batch, in, hidden)),
        loss(static_cast<std::size_t>(batch));
    DeviceBuffer<std::int32_t> dy(y.size()), correct(y.size());
    DeviceBuffer<unsigned long long> stamps(static_cast<std::size_t>(kernels::kStepStamps) * step.grid_blocks());
    CUDA_CHECK(cudaMemcpyAsync(dpx.data(), px.data(), px.size(), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(dxf.data(), xf.data(), dxf.bytes(), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(dP.data(), P.data(), dP.bytes(), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(dy.data(), y.data(), dy.bytes(), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemsetAsync(dV.data(), 0, dV.bytes(), s));
    kernels::StepArgs a;
    if (transfer == "u8") a.x_u8 = dpx.data(); else a.x_f32 = dxf.data();
    a.labels = dy.data();
    a.rows = batch; a.in = in; a.hidden = hidden; a.classes = classes;
    a.W1 = dP.data(); a.b1 = a.W1 + nW1; a.W2 = a.b1 + hidden; a.b2 = a.W2 + nW2;
    a.vW1 = dV.data(); a.vb1 = a.vW1 + nW1; a.vW2 = a.vb1 + hidden; a.vb2 = a.vW2 + nW2;
    a.H = H.data(); a.dH = dH.data(); a.dlogits = dl.data(); a.partial = part.data();
    a.sample_loss = loss.data(); a.sample_correct = correct.data();
    a.grad_scale = 1.f / batch; a.lr = 0.05f; a.momentum = 0.9f;
    // --beside: one batch of X in mapped host memory, copied by the SMs beside each step.
    const std::size_t x_bytes = px.size() * (transfer == "u8" ? 1 : sizeof(float));
    PinnedBuffer<unsigned char> host_x(beside > 0 ? x_bytes : 0, cudaHostAllocMapped);
    DeviceBuffer<unsigned char> slot(beside > 0 ? x_bytes : 0);
    if (beside > 0) std::memcpy(host_x.data(), transfer == "u8" ? static_cast<const void*>(px.data()) : xf.data(), x_bytes);
    const SmCopy copy = beside > 0 ? SmCopy::create(beside) : SmCopy();
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    Stream s2 = Stream::create(cudaStreamNonBlocking, greatest);
    Event copied = Event::create();
    // One step; with --beside, a copy starts with it and the next step and copy wait for both.
    auto step_beside = [&](Event* done) {
      if (beside > 0) {
        copy(slot.data(), host_x.data(), x_bytes, s2);
        CUDA_CHECK(cudaEventRecord(copied, s2));
      }
      step.run(a, s);
      if (beside > 0) CUDA_CHECK(cudaStreamWaitEvent(s, copied));
      if (done != nullptr) CUDA_CHECK(cudaEventRecord(*done, s));
      if (beside > 0 && done != nullptr) CUDA_CHECK(cudaStreamWaitEvent(s2, *done));
    };
    std::vector<Event> ev;
    for (int i = 0; i <= reps; ++i) ev.push_back(Event::create());
    for (int i = 0; i < 20; ++i) step_beside(&ev[0]);
    if (beside > 0) {  // the copy on its own first, on the idle GPU
      CUDA_CHECK(cudaStreamSynchronize(s));
      std::vector<double> cu;
      for (int i = 0; i < 50; ++i) {
        CUDA_CHECK(cudaEventRecord(ev[0], s2));
        copy(slot.data(), host_x.data(), x_bytes, s2);
        CUDA_CHECK(cudaEventRecord(ev[1], s2));
        CUDA_CHECK(cudaEventSynchronize(ev[1]));
        cu.push_back(1e3 * elapsed_ms(ev[0], ev[1]));
      }
      std::sort(cu.begin(), cu.end());
      std::printf("the copy beside (%zu bytes, %d blocks) alone: median %.2f us (%.1f GB/s)\n", x_bytes,
                  copy.max_blocks(), cu[cu.size() / 2], x_bytes / (1e3 * cu[cu.size() / 2]));
    }
    CUDA_CHECK(cudaEventRecord(ev[0], s));
    for (int i = 0; i < reps; ++i) step_beside(&ev[i + 1]);
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> us;
    for (int i = 0; i < reps; ++i) {
      float ms = 0.f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
      us.push_back(1e3 * ms);
    }
    std::sort(us.begin(), us.end());
    const kernels::StepPlan plan = kernels::plan_step(batch, in, hidden, step.tall_c());
    std::printf("step_bench: batch %d hidden %d %s, grid %d blocks x %d threads; plan a_tr %d "
                "a_chunks %d b_wpr %d c_split %d, phase-C tile %s\n",
                batch, hidden, transfer.c_str(), step.grid_blocks(), kernels::StepLauncher::kThreads,
                plan.a_tr, plan.a_chunks, plan.b_wpr, plan.c_split, step.tall_c() ? "32x32 (tall)" : "32x16");
    std::printf("per launch%s (event to event, %d back-to-back): median %.2f us (min %.2f, max %.2f)\n",
                beside > 0 ? ", a copy beside each" : "", reps, us[us.size() / 2], us.front(), us.back());
    a.stamps = stamps.data();
    step_beside(nullptr);
    CUDA_CHECK(cudaStreamSynchronize(s2));
    print_stamps(beside > 0 ? "one stamped launch, a copy beside it" : "one stamped launch", read_stamps(stamps, step.grid_blocks(), s), step.grid_blocks(), hidden,
                 csv.get());
    if (steps > 0) {
      a.stamps = nullptr;
      const kernels::StepBatch one = step.batch(a.x_u8 ? static_cast<const void*>(a.x_u8) : a.x_f32,
                                                a.x_u8 != nullptr, a.labels, a.sample_loss,
                                                a.sample_correct, batch);
      const std::vector<kernels::StepBatch> table(static_cast<std::size_t>(steps), one);
      DeviceBuffer<kernels::StepBatch> dt(table.size());
      CUDA_CHECK(cudaMemcpyAsync(dt.data(), table.data(), dt.bytes(), cudaMemcpyHostToDevice, s));
      step.run_steps(a, dt.data(), steps, s);  // warm-up
      std::vector<double> per;
      for (int i = 0; i < 5; ++i) {
        CUDA_CHECK(cudaEventRecord(ev[0], s));
        step.run_steps(a, dt.data(), steps, s);
        CUDA_CHECK(cudaEventRecord(ev[1], s));
        CUDA_CHECK(cudaEventSynchronize(ev[1]));
        float ms = 0.f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        per.push_back(1e3 * ms / steps);
      }
      std::sort(per.begin(), per.end());
      std::printf("%d steps in one launch (5 launches): median %.2f us per step (min %.2f, max %.2f)\n",
                  steps, per[2], per.front(), per.back());
      a.stamps = stamps.data();
      a.stamp_step = steps / 2;
      step.run_steps(a, dt.data(), steps, s);
      a.stamps = nullptr;
      const std::string what = "step " + std::to_string(steps / 2) + " of a stamped " +
                               std::to_string(steps) + "-step launch";
      print_stamps(what.c_str(), read_stamps(stamps, step.grid_blocks(), s), step.grid_blocks(), hidden,
                   csv.get());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
