// test_best_forms.cu: each best form removes the primitive cost it claims to, counted per epoch
// by the built-in CUPTI profiler on the full MNIST training set:
//   um-prefetch-coarse  2 cudaMemPrefetchAsync per chunk (not per batch) when the data may not
//                       be resident, none at all once static data is (and then no migration
//                       and no GPU fault either: the pages did stay)
//   zero-copy-staged    one staging kernel per chunk of whole packed batches (--copy-chunk), no
//                       copy-engine copy
//   pinned-graph,       one copy per chunk of k whole packed batches (--copy-chunk): ceil(batches
//   double-buffer-graph / k) copies per epoch where the naive form makes two per batch; and with
//                       the epoch graph (all three) no per-batch host enqueue at all: a
//                       replayed epoch is ONE cudaGraphLaunch, no copy, launch or event call;
//                       double-buffer-graph and zero-copy-staged with the single-launch step in
//                       static: one copy (staging kernel) and ONE step launch per chunk
//                       (kernel-per-chunk form)
#include <algorithm>

#include "common/profiler/profiler.h"
#include "gpu_test_support.h"
#include "memory_strategies/chunk_plan.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {

constexpr int kEpochs = 3;

// One counter window per epoch of the run `c` describes.
std::vector<WindowCounters> epoch_windows(CuptiProfiler& prof, const RunConfig& c) {
  const HostDataset& data = mnist();
  Stream compute = Stream::create();
  Mlp mlp(mlp_config(c, data.features(), data.classes), compute);
  auto st = c.strategy->make();
  st->attach(data, strategy_options(c), compute);
  Trainer tr(mlp, *st, data, c, compute);
  std::vector<WindowCounters> w;
  for (int ep = 1; ep <= kEpochs; ++ep) {
    prof.begin_window("epoch " + std::to_string(ep));
    tr.run_epoch(ep);
    w.push_back(prof.end_window());
  }
  return w;
}

// One counter window per epoch of `strategy` at batch 256, u8.
std::vector<WindowCounters> epoch_windows(CuptiProfiler& prof, const std::string& strategy,
                                          Scenario sc, LaunchForm launch = LaunchForm::Auto) {
  RunConfig c = short_run(strategy);  // batch 256, u8, graphs as the CLI's
  c.scenario = sc;
  c.launch_form = launch;
  return epoch_windows(prof, c);
}

// Copies of one epoch of a graph form: whole MNIST blocks of `batch` rows of 784 (or 3136) + 4
// bytes (at a batch that is a multiple of 4 also the block stride: no packing padding), k = max(1,
// chunk bytes / block) of them per copy, the last copy maybe fewer.
std::uint64_t chunk_copies(int batch, Transfer t, int chunk_mib) {
  const std::int64_t per_sample = (t == Transfer::U8 ? 784 : 3136) + 4;
  const std::int64_t block = static_cast<std::int64_t>(batch) * per_sample;
  const std::int64_t k = std::max<std::int64_t>(1, (std::int64_t{chunk_mib} << 20) / block);
  const std::int64_t batches = batch_count(mnist().n_train(), batch);
  return static_cast<std::uint64_t>((batches + k - 1) / k);
}

// A run of `strategy` at batch 256, u8, in its epoch-graph form: a strategy whose captured form
// is one launch per chunk (captured_form) runs the cuBLASLt step, which cannot run several steps
// in one launch (KernelPerChunkFormsLaunchOnceAndMoveOncePerChunk tests that form).
RunConfig graph_form_run(const std::string& strategy) {
  RunConfig c = short_run(strategy);
  if (captured_form(strategy) != EpochForm::Graph) c.fused = FusedMode::Lt;
  return c;
}

std::uint64_t launches(const WindowCounters& w) {
  return w.api.count("__cudaLaunchKernel") + w.api.count("cudaLaunchKernel");
}

class BestForms : public ::testing::Test {
 protected:
  void SetUp() override {
    MEMSTRAT_REQUIRE_GPU_AND_MNIST();
    mnist();  // host only: loaded before the profiler, outside every window
    prof_.emplace(CuptiProfiler::Options{});
    if (!prof_->api_available()) GTEST_SKIP() << "CUPTI callbacks unavailable";
    CUDA_CHECK(cudaFree(nullptr));
    prof_->enable_device_counters();
    caps_ = DeviceCaps::query(0);
  }
  std::string waived(const char* name) const { return find_strategy(name)->unsupported(caps_); }
  std::optional<CuptiProfiler> prof_;
  DeviceCaps caps_;
};

}  // namespace

TEST_F(BestForms, UmPrefetchCoarsePrefetchesChunksAndNothingThatIsResident) {
  if (const std::string why = waived("um-prefetch-coarse"); !why.empty()) GTEST_SKIP() << why;
  const BatchGeometry g{mnist().n_train(), 256, 784};
  const int chunks = ChunkPlan::split(g, std::size_t{8} << 20).chunks();
  ASSERT_LT(chunks, g.batches());

  // The naive form: two calls per batch, every epoch, static or not.
  for (const WindowCounters& w : epoch_windows(*prof_, "um-prefetch", Scenario::Static))
    EXPECT_EQ(w.api.count("cudaMemPrefetchAsync"), 2u * g.batches());

  const std::vector<WindowCounters> st =
      epoch_windows(*prof_, "um-prefetch-coarse", Scenario::Static);
  EXPECT_EQ(st[0].api.count("cudaMemPrefetchAsync"), 2u * chunks) << "epoch 1: every chunk";
  for (int e = 1; e < kEpochs; ++e) {
    EXPECT_EQ(st[e].api.count("cudaMemPrefetchAsync"), 0u) << "static epoch " << e + 1;
    // Nothing was evicted: no page moved and the GPU never faulted.
    if (st[e].um_htod_bytes) EXPECT_EQ(*st[e].um_htod_bytes, 0u) << "static epoch " << e + 1;
    if (st[e].um_gpu_faults) EXPECT_EQ(*st[e].um_gpu_faults, 0u) << "static epoch " << e + 1;
  }

  const std::vector<WindowCounters> rf =
      epoch_windows(*prof_, "um-prefetch-coarse", Scenario::Refresh);
  for (int e = 0; e < kEpochs; ++e)
    EXPECT_EQ(rf[e].api.count("cudaMemPrefetchAsync"), 2u * chunks) << "refresh epoch " << e + 1;
}

TEST_F(BestForms, ZeroCopyStagedIsOneStagingKernelPerChunkAndNoCopyEngineCopy) {
  if (const std::string why = waived("zero-copy-staged"); !why.empty()) GTEST_SKIP() << why;
  const std::uint64_t chunks = chunk_copies(256, Transfer::U8, 8);  // the default --copy-chunk
  ASSERT_EQ(chunks, 6u) << "8 MiB holds 41 blocks of 201728 B: 235 batches in 6 chunks";
  for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
    // Both enqueued batch by batch (the staged form's default is one launch per chunk, or one
    // epoch graph: KernelPerChunkFormsLaunchOnceAndMoveOncePerChunk and
    // EpochGraphBestFormsEnqueueNothingPerBatch below). The naive form's step is one graph
    // replay per batch too (its step implementation differs: the batch is read in host memory)
    // and it stages nothing.
    const std::vector<WindowCounters> naive = epoch_windows(*prof_, "zero-copy", sc, LaunchForm::PerBatch);
    const std::vector<WindowCounters> staged =
        epoch_windows(*prof_, "zero-copy-staged", sc, LaunchForm::PerBatch);
    for (int e = 1; e < kEpochs; ++e) {  // epoch 1 captures the step graphs
      EXPECT_EQ(launches(staged[e]), launches(naive[e]) + chunks)
          << to_string(sc) << " epoch " << e + 1;
      EXPECT_EQ(staged[e].api.count("cudaMemcpyAsync"), naive[e].api.count("cudaMemcpyAsync"))
          << to_string(sc) << " epoch " << e + 1;
      EXPECT_EQ(staged[e].api.count("cudaMemcpy"), naive[e].api.count("cudaMemcpy"));
    }
  }
}

// Packed and chunked: one copy per chunk of whole batches where the naive form makes two per batch
// (images, labels), both enqueued batch by batch to count them (the trainer's own copies are the
// same in both).
TEST_F(BestForms, GraphBestFormsCopyChunksOfWholeBatches) {
  const std::uint64_t batches = batch_count(mnist().n_train(), 256);
  const std::uint64_t chunks = chunk_copies(256, Transfer::U8, 8);  // the default --copy-chunk
  ASSERT_EQ(chunks, 6u) << "8 MiB holds 41 blocks of 201728 B: 235 batches in 6 copies";
  for (const auto& [naive, best] : {std::pair{"pinned", "pinned-graph"},
                                    std::pair{"double-buffer", "double-buffer-graph"}}) {
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
      const std::vector<WindowCounters> n = epoch_windows(*prof_, naive, sc, LaunchForm::PerBatch);
      const std::vector<WindowCounters> b = epoch_windows(*prof_, best, sc, LaunchForm::PerBatch);
      for (int e = 1; e < kEpochs; ++e)
        EXPECT_EQ(n[e].api.count("cudaMemcpyAsync") - b[e].api.count("cudaMemcpyAsync"),
                  2 * batches - chunks)
            << best << " " << to_string(sc) << " epoch " << e + 1;
    }
  }
}

// The epoch graph holds ceil(batches / k) copies: counted where they are issued, while epoch 1 is
// captured (the copies of a replayed epoch are graph nodes, issued by no call). A replayed epoch
// makes the trainer's own copies only, so epoch 1's count less epoch 2's is the captured copies.
// From one copy per batch (a block larger than the chunk) to one for the whole epoch.
TEST_F(BestForms, EpochGraphOfTheGraphFormsHoldsOneCopyPerChunk) {
  struct Case {
    int batch;
    Transfer transfer;
    int chunk_mib;
  };
  for (const char* s : {"pinned-graph", "double-buffer-graph"}) {
    for (const Case c : {Case{256, Transfer::U8, 1}, Case{256, Transfer::U8, 8},
                         Case{256, Transfer::U8, 1024}, Case{256, Transfer::F32, 8},
                         Case{1024, Transfer::F32, 1}, Case{1024, Transfer::F32, 8}}) {
      for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
        RunConfig r = graph_form_run(s);
        r.batch = c.batch;
        r.transfer = c.transfer;
        r.copy_chunk_mib = c.chunk_mib;
        r.scenario = sc;
        const std::vector<WindowCounters> w = epoch_windows(*prof_, r);
        const std::uint64_t want = chunk_copies(c.batch, c.transfer, c.chunk_mib);
        const std::string what = std::string(s) + " batch " + std::to_string(c.batch) + " " +
                                 std::string(to_string(c.transfer)) + " --copy-chunk " +
                                 std::to_string(c.chunk_mib) + " " + std::string(to_string(sc));
        ASSERT_EQ(w[0].api.count("cudaStreamBeginCapture"), 1u) << what;
        EXPECT_EQ(w[0].api.count("cudaMemcpyAsync") - w[1].api.count("cudaMemcpyAsync"), want)
            << what;
        for (int e = 2; e < kEpochs; ++e)
          EXPECT_EQ(w[e].api.count("cudaMemcpyAsync"), w[1].api.count("cudaMemcpyAsync"))
              << what << " epoch " << e + 1;
      }
    }
  }
}

// The epoch graph: captured once in epoch 1 (one cudaStreamBeginCapture), then every epoch is ONE
// cudaGraphLaunch: no copy, kernel launch, event record or wait is enqueued per batch. The
// trainer's own per-epoch calls (reading back the losses, the event timings) stay: they are
// those of the resident kernel form, which enqueues nothing per batch either.
TEST_F(BestForms, EpochGraphBestFormsEnqueueNothingPerBatch) {
  const std::vector<WindowCounters> resident = epoch_windows(*prof_, "resident", Scenario::Static);
  for (const char* s : {"pinned-graph", "double-buffer-graph", "zero-copy-staged"}) {
    if (const std::string why = waived(s); !why.empty()) {
      std::cout << "[ WAIVED ] " << s << ": " << why << "\n";
      continue;
    }
    for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
      RunConfig c = graph_form_run(s);
      c.scenario = sc;
      const std::vector<WindowCounters> w = epoch_windows(*prof_, c);
      const std::string what = std::string(s) + " " + std::string(to_string(sc));
      EXPECT_EQ(w[0].api.count("cudaStreamBeginCapture"), 1u) << what << " epoch 1";
      EXPECT_EQ(w[0].api.count("cudaGraphLaunch"), 1u) << what << " epoch 1";
      for (int e = 1; e < kEpochs; ++e) {
        const std::string ep = what + " epoch " + std::to_string(e + 1);
        EXPECT_EQ(w[e].api.count("cudaStreamBeginCapture"), 0u) << ep;
        EXPECT_EQ(w[e].api.count("cudaGraphLaunch"), 1u) << ep;
        EXPECT_EQ(launches(w[e]), 0u) << ep;
        for (const char* fn : {"cudaEventRecord", "cudaEventRecordWithFlags", "cudaStreamWaitEvent"})
          EXPECT_EQ(w[e].api.count(fn), 0u) << ep << ": " << fn;
        EXPECT_EQ(w[e].api.count("cudaMemcpyAsync"), resident[e].api.count("cudaMemcpyAsync")) << ep;
      }
    }
  }
}

// The kernel-per-chunk form: with the single-launch step and static data, double-buffer-graph's
// epoch makes one copy and ONE step launch per chunk, every epoch (nothing captured), and
// zero-copy-staged's one staging kernel (and no copy) and ONE step launch per chunk: resident's
// kernel form makes one step launch per epoch and no copy, and the trainer's own calls are the
// same in all three.
TEST_F(BestForms, KernelPerChunkFormsLaunchOnceAndMoveOncePerChunk) {
  const std::vector<WindowCounters> resident = epoch_windows(*prof_, "resident", Scenario::Static);
  for (const char* s : {"double-buffer-graph", "zero-copy-staged"}) {
    if (const std::string why = waived(s); !why.empty()) {
      std::cout << "[ WAIVED ] " << s << ": " << why << "\n";
      continue;
    }
    const bool staged = std::string(s) == "zero-copy-staged";
    for (const int mib : {1, 8}) {
      RunConfig c = short_run(s);  // batch 256, u8, single-launch step
      c.copy_chunk_mib = mib;
      const std::vector<WindowCounters> w = epoch_windows(*prof_, c);
      const std::uint64_t chunks = chunk_copies(256, Transfer::U8, mib);
      ASSERT_GT(chunks, 1u) << "--copy-chunk " << mib;
      for (int e = 0; e < kEpochs; ++e) {
        const std::string ep = std::string(s) + " --copy-chunk " + std::to_string(mib) +
                               " epoch " + std::to_string(e + 1);
        EXPECT_EQ(w[e].api.count("cudaStreamBeginCapture"), 0u) << ep;
        EXPECT_EQ(w[e].api.count("cudaGraphLaunch"), 0u) << ep;
        EXPECT_EQ(w[e].api.count("cudaLaunchKernelExC"),
                  resident[e].api.count("cudaLaunchKernelExC") + chunks - 1)
            << ep << ": step launches";
        EXPECT_EQ(launches(w[e]), launches(resident[e]) + (staged ? chunks : 0))
            << ep << ": staging kernels";
        if (e == 0) continue;  // epoch 1 also uploads each chunk's rows of the step table
        EXPECT_EQ(w[e].api.count("cudaMemcpyAsync"),
                  resident[e].api.count("cudaMemcpyAsync") + (staged ? 0 : chunks))
            << ep << ": copies";
      }
    }
  }
}
