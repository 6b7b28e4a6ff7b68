// test_epoch_capture.cu: the capture contract of MemoryStrategy::epoch_capturable(), for every
// strategy that allows an epoch graph, by itself (epoch_capturable) or asked for by name
// (launch_forms: resident, pinned, zero-copy, um beside the graph best forms). One epoch's acquire / release / end_epoch, with a consumer kernel
// in place of the training step, is captured from the compute stream in global capture mode (a
// synchronisation, allocation or other call a graph cannot hold fails the capture, as does a side
// stream that forks without joining), then the graph is replayed for later epochs with only
// begin_epoch called in between. Every epoch, enqueued or replayed, must deliver exactly the bytes
// EpochWriter wrote for it: static and refresh, u8 and f32, a ragged last batch, odd batch sizes,
// a 25-byte sample, copy chunks (the graph forms) of one batch, of several with a short last
// chunk, and of the whole epoch, over one to three copy streams. The consumer waits before it
// reads its batch, so a staging copy that overwrote a slot too early would be seen. stats() after
// a replay must equal stats() after an enqueued epoch: it may not depend on acquire() being
// called.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/registry.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;
using memstrat::testing::synthetic_dataset;

namespace {

// Copies batch v into the epoch-ordered outputs, after spinning ~`spin` clocks.
__global__ void consume(const unsigned char* x, const std::int32_t* y, int rows,
                        std::size_t row_bytes, long long first, unsigned char* out_x,
                        std::int32_t* out_y, long long spin) {
  const long long t0 = clock64();
  while (clock64() - t0 < spin) {
  }
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t n = static_cast<std::size_t>(rows) * row_bytes;
  for (std::size_t i = tid; i < n; i += stride) out_x[first * row_bytes + i] = x[i];
  for (std::size_t r = tid; r < static_cast<std::size_t>(rows); r += stride)
    out_y[first + r] = y[r];
}

struct Case {
  int side;   // image side: 28 (784 B per u8 sample) or 5 (25 B)
  int batch;  // 3001 samples: ragged last batch for every size here
  int depth;  // slots (the graph forms: chunk slots)
  int copy_streams;
  int copy_chunk_mib;  // the graph forms' chunks (3001 samples: 2.4 MB u8, 9.4 MB f32):
                       // 28/256/1: u8 3 chunks of 5, 5, 2 batches, f32 one batch each;
                       // 28/256/8: u8 one chunk, f32 10 + 2; 28/1007/1: one batch each;
                       // 28/64/1: u8 20 + 20 + 7, f32 9 of 5 + 2; side 5: one chunk
};

// Enqueues one epoch the way a trainer does, with `consume` as the step.
void enqueue_epoch(MemoryStrategy& st, int batches, std::size_t row_bytes, unsigned char* out_x,
                   std::int32_t* out_y, cudaStream_t compute) {
  for (int b = 0; b < batches; ++b) {
    const BatchView v = st.acquire(b);
    const auto* x = v.x_u8 != nullptr ? v.x_u8 : reinterpret_cast<const unsigned char*>(v.x_f32);
    consume<<<4, 128, 0, compute>>>(x, v.y, v.rows, row_bytes, v.first_sample, out_x, out_y, 20000);
    CUDA_CHECK_LAST();
    st.release(b);
  }
  st.end_epoch();
}

}  // namespace

TEST(EpochCapture, CapturableStrategiesReplayAnEpochGraphWithTheRightBytes) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const DeviceCaps caps = DeviceCaps::query(device);
  int tested = 0;
  for (const auto& e : strategy_registry()) {
    if (!e.launch_forms.static_forms.contains(EpochForm::Graph)) continue;
    if (const std::string w = e.unsupported(caps); !w.empty()) {
      std::cout << "[ WAIVED ] " << e.name << ": " << w << "\n";
      continue;
    }
    ++tested;
    for (const Case c : {Case{28, 256, 2, 2, 1}, Case{28, 256, 2, 1, 8}, Case{28, 1007, 2, 1, 1},
                         Case{28, 64, 3, 2, 1}, Case{5, 3, 5, 3, 1}, Case{5, 100, 2, 2, 1}})
      for (const Transfer t : {Transfer::U8, Transfer::F32})
        for (const Scenario sc : {Scenario::Static, Scenario::Refresh}) {
          const std::string what = std::string(e.name) + " side " + std::to_string(c.side) +
                                   " batch " + std::to_string(c.batch) + " depth " +
                                   std::to_string(c.depth) + " streams " +
                                   std::to_string(c.copy_streams) + " chunk " +
                                   std::to_string(c.copy_chunk_mib) + " MiB " +
                                   std::string(to_string(t)) + " " + std::string(to_string(sc));
          SCOPED_TRACE(what);
          const HostDataset data = synthetic_dataset(3001, 11, c.side);
          StrategyOptions so;
          so.batch = c.batch;
          so.transfer = t;
          so.scenario = sc;
          so.depth = c.depth;
          // Several copy streams where a strategy reads the option (double-buffer-graph): each
          // must fork and join, and slots handed over across streams.
          so.copy_streams = c.copy_streams;
          so.copy_chunk_mib = c.copy_chunk_mib;
          if (!refusal_reason(e, so).empty()) continue;  // the peer-fanout forms: static only
          const EpochWriter ref(data, so);
          const std::size_t row_bytes = ref.image_bytes_per_sample();
          const int batches = batch_count(ref.samples(), c.batch);
          Stream compute = Stream::create();
          auto st = e.make();
          st->attach(data, so, compute);
          ASSERT_TRUE(st->launch_forms().epoch_capturable);
          DeviceBuffer<unsigned char> out_x(ref.image_bytes());
          DeviceBuffer<std::int32_t> out_y(static_cast<std::size_t>(ref.samples()));
          std::vector<unsigned char> want_x(ref.image_bytes()), got_x(ref.image_bytes());
          std::vector<std::int32_t> want_y(out_y.size()), got_y(out_y.size());
          GraphExec graph;
          StrategyStats enqueued;
          for (int epoch = 1; epoch <= 4; ++epoch) {
            st->begin_epoch(epoch);  // host work, GPU idle, never captured
            CUDA_CHECK(cudaMemsetAsync(out_x.data(), 0xFF, out_x.bytes(), compute));
            CUDA_CHECK(cudaMemsetAsync(out_y.data(), 0xFF, out_y.bytes(), compute));
            if (epoch == 1) {
              enqueue_epoch(*st, batches, row_bytes, out_x.data(), out_y.data(), compute);
            } else if (epoch == 2) {
              graph = capture_graph(compute, cudaStreamCaptureModeGlobal, [&] {
                enqueue_epoch(*st, batches, row_bytes, out_x.data(), out_y.data(), compute);
              });
            }
            if (epoch >= 2) CUDA_CHECK(cudaGraphLaunch(graph.get(), compute));
            CUDA_CHECK(cudaMemcpyAsync(got_x.data(), out_x.data(), out_x.bytes(),
                                       cudaMemcpyDeviceToHost, compute));
            CUDA_CHECK(cudaMemcpyAsync(got_y.data(), out_y.data(), out_y.bytes(),
                                       cudaMemcpyDeviceToHost, compute));
            CUDA_CHECK(cudaStreamSynchronize(compute));
            ref.write(epoch, want_x.data(), want_y.data());
            ASSERT_TRUE(got_x == want_x) << "images of epoch " << epoch;
            ASSERT_TRUE(got_y == want_y) << "labels of epoch " << epoch;
            const StrategyStats s = st->stats();
            if (epoch == 1) {
              enqueued = s;
              continue;
            }
            EXPECT_EQ(s.h2d_bytes, enqueued.h2d_bytes) << "epoch " << epoch << " (replayed)";
            ASSERT_EQ(s.copy_ms.has_value(), enqueued.copy_ms.has_value()) << "epoch " << epoch;
            if (s.copy_ms) EXPECT_GT(*s.copy_ms, 0.0) << "epoch " << epoch;
          }
        }
  }
  // resident, pinned, zero-copy, um, zero-copy-staged, pinned-graph, double-buffer-graph
  // (tests/cpu/test_registry.cpp), less any waived here.
  EXPECT_GT(tested, 0) << "no strategy allows an epoch graph";
}
