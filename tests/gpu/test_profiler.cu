// test_profiler.cu: the built-in CUPTI profiler on a real GPU: API calls counted per window
// (set-up apart from epochs), unified-memory counters (fault-driven vs prefetched, and in a
// second profiler of the same process), kernel and memcpy time, and a Chrome trace that passes
// validate_trace_events() and shows copy/compute overlap. Skips with the reason when no CUDA device
// is usable.
//
// Raw cudaMalloc/cudaFree on purpose: the test counts exactly the calls it makes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "common/nvtx.h"
#include "common/profiler/profiler.h"
#include "tests/support/trace_checks.h"

namespace memstrat {
namespace {

using nlohmann::json;

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    std::string reason_;                                                       \
    if (!::memstrat::cuda_device_available(&reason_)) GTEST_SKIP() << reason_; \
  } while (0)

__global__ void add_one(float* p, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] += 1.0f;
}

// Busy for about `cycles` SM clocks: a kernel long enough for a copy to overlap it.
__global__ void spin(long long cycles, int* sink) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && sink) *sink = 1;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

bool concurrent_managed_access() {
  int dev = 0, v = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, dev));
  return v != 0;
}

TEST(CuptiProfilerGpu, CountsApiCallsPerWindow) {
  SKIP_WITHOUT_GPU();
  CuptiProfiler::Options o;
  CuptiProfiler prof(o);
  ASSERT_TRUE(prof.api_available()) << joined(prof.notes());
  CUDA_CHECK(cudaFree(0));
  prof.enable_device_counters();

  constexpr size_t kBytes = 4u << 20;
  prof.begin_window("setup");
  float* d[3] = {};
  for (auto& p : d) CUDA_CHECK(cudaMalloc(&p, kBytes));
  float* h = nullptr;
  // The C API (void**): the typed C++ overload in cuda_runtime.h forwards to cudaHostAlloc.
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h), kBytes));
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  WindowCounters setup = prof.end_window();
  ASSERT_TRUE(setup.api_available);
  EXPECT_EQ(setup.api.count("cudaMalloc"), 3u);
  EXPECT_EQ(setup.api.count("cudaMallocHost"), 1u);
  EXPECT_EQ(setup.api.count("cudaStreamCreateWithFlags"), 1u);
  EXPECT_EQ(setup.api.count("cudaMemcpyAsync"), 0u);

  for (int epoch = 1; epoch <= 3; ++epoch) {
    prof.begin_window("epoch " + std::to_string(epoch));
    for (int i = 0; i < 5; ++i)
      CUDA_CHECK(cudaMemcpyAsync(d[i % 3], h, kBytes, cudaMemcpyHostToDevice, s));
    add_one<<<64, 256, 0, s>>>(d[0], kBytes / sizeof(float));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(s));
    WindowCounters w = prof.end_window();
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    ASSERT_TRUE(w.api_available);
    ASSERT_TRUE(w.api.calls.count("cudaMalloc")) << "watched names carry an explicit 0";
    EXPECT_EQ(w.api.count("cudaMalloc"), 0u);
    EXPECT_EQ(w.api.count("cudaMemcpyAsync"), 5u);
    // <<<>>> is __cudaLaunchKernel in CUDA 13, cudaLaunchKernel before (or with
    // __NV_LEGACY_LAUNCH); one launch shows up under at least one of the two names.
    EXPECT_GE(w.api.count("cudaLaunchKernel") + w.api.count("__cudaLaunchKernel"), 1u);
    EXPECT_LE(w.api.count("cudaLaunchKernel") + w.api.count("__cudaLaunchKernel"), 2u);
    EXPECT_EQ(w.api.count("cudaStreamSynchronize"), 1u);
    EXPECT_EQ(w.api.count("cudaGetLastError"), 1u);  // every runtime function is counted
    ASSERT_TRUE(w.kernel_ms.has_value()) << joined(prof.notes());
    ASSERT_TRUE(w.memcpy_ms.has_value()) << joined(prof.notes());
    EXPECT_GT(*w.kernel_ms, 0.0);
    EXPECT_GT(*w.memcpy_ms, 0.0);
    // 5 x 4 MiB pinned copies at >= 5 GB/s take well under 10 ms
    EXPECT_LT(*w.memcpy_ms, 10.0);
  }

  for (auto* p : d) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFreeHost(h));
  CUDA_CHECK(cudaStreamDestroy(s));

  // Totals include the calls outside windows: cudaFree(0) and the frees above.
  ApiCounts total = prof.api_totals();
  EXPECT_EQ(total.count("cudaMalloc"), 3u);
  EXPECT_EQ(total.count("cudaFree"), 4u);
  EXPECT_EQ(total.count("cudaMemcpyAsync"), 15u);
  EXPECT_EQ(prof.late_records(), 0u);
  const std::string table = prof.table();
  EXPECT_NE(table.find("cudaMalloc"), std::string::npos) << table;
  EXPECT_NE(table.find("epoch 3"), std::string::npos) << table;
  std::printf("%s", table.c_str());
}

TEST(CuptiProfilerGpu, UnifiedMemoryCountersFaultVersusPrefetch) {
  SKIP_WITHOUT_GPU();
  CuptiProfiler::Options o;
  CuptiProfiler prof(o);
  ASSERT_TRUE(prof.api_available()) << joined(prof.notes());
  CUDA_CHECK(cudaFree(0));
  if (!concurrent_managed_access())
    GTEST_SKIP() << "device without concurrentManagedAccess: no GPU page faults to count";
  prof.enable_device_counters();

  constexpr size_t kN = 16u << 20;  // 64 MiB of floats
  constexpr size_t kBytes = kN * sizeof(float);
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));

  prof.begin_window("setup");
  float* m = nullptr;
  CUDA_CHECK(cudaMallocManaged(&m, kBytes));
  for (size_t i = 0; i < kN; ++i) m[i] = 1.0f;  // pages now live on the host
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  WindowCounters setup = prof.end_window();
  EXPECT_EQ(setup.api.count("cudaMallocManaged"), 1u);

  // Epoch 1: the kernel faults every page in.
  prof.begin_window("epoch 1");
  add_one<<<264, 256, 0, s>>>(m, kN);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(s));
  WindowCounters faulted = prof.end_window();
  ASSERT_TRUE(faulted.um_htod_bytes.has_value()) << joined(prof.notes());
  ASSERT_TRUE(faulted.um_gpu_faults.has_value()) << joined(prof.notes());
  EXPECT_GE(*faulted.um_htod_bytes, kBytes);
  EXPECT_GT(*faulted.um_gpu_faults, 0u);

  // Epoch 2: the host rewrites the data (pages go back), then a prefetch moves them in
  // before the kernel runs: the same bytes, far fewer GPU faults.
  prof.begin_window("epoch 2");
  for (size_t i = 0; i < kN; ++i) m[i] = 2.0f;
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = dev;
  CUDA_CHECK(cudaMemPrefetchAsync(m, kBytes, loc, 0, s));
  add_one<<<264, 256, 0, s>>>(m, kN);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(s));
  WindowCounters prefetched = prof.end_window();
  ASSERT_TRUE(prefetched.um_htod_bytes.has_value());
  EXPECT_GE(*prefetched.um_htod_bytes, kBytes);
  EXPECT_EQ(prefetched.api.count("cudaMemPrefetchAsync"), 1u);
  ASSERT_TRUE(prefetched.um_gpu_faults.has_value());
  EXPECT_LT(*prefetched.um_gpu_faults, *faulted.um_gpu_faults);
  ASSERT_TRUE(prefetched.um_dtoh_bytes.has_value());
  EXPECT_GT(*prefetched.um_dtoh_bytes, 0u) << "host rewrite should pull pages back";
  if (prefetched.um_cpu_faults) EXPECT_GT(*prefetched.um_cpu_faults, 0u);

  // Epoch 3: nothing touches managed memory: measured zero, not null.
  prof.begin_window("epoch 3");
  CUDA_CHECK(cudaStreamSynchronize(s));
  WindowCounters idle = prof.end_window();
  ASSERT_TRUE(idle.um_htod_bytes.has_value());
  EXPECT_EQ(*idle.um_htod_bytes, 0u);

  std::printf("%s", prof.table().c_str());
  for (const auto& n : prof.notes()) std::printf("note: %s\n", n.c_str());
  EXPECT_EQ(prof.late_records(), 0u) << joined(prof.notes());
  CUDA_CHECK(cudaFree(m));
  CUDA_CHECK(cudaStreamDestroy(s));
}

// The unified-memory counters stay enabled once a process has enabled them (disabling them can
// wait seconds in the driver): a second profiler, after the first has gone, counts with them.
// ctest runs each test in a process of its own, so both profilers are here.
TEST(CuptiProfilerGpu, UnifiedMemoryCountersInEachOfTwoProfilers) {
  SKIP_WITHOUT_GPU();
  CUDA_CHECK(cudaFree(0));
  if (!concurrent_managed_access())
    GTEST_SKIP() << "device without concurrentManagedAccess: no GPU page faults to count";
  constexpr size_t kN = 4u << 20;  // 16 MiB of floats
  constexpr size_t kBytes = kN * sizeof(float);
  for (int k = 1; k <= 2; ++k) {
    CuptiProfiler::Options o;
    CuptiProfiler prof(o);
    ASSERT_TRUE(prof.api_available()) << "profiler " << k << ":\n" << joined(prof.notes());
    prof.enable_device_counters();
    // Allocated once the counters are on, as a run allocates at attach (the counters follow
    // the managed allocations made after they were enabled).
    float* m = nullptr;
    CUDA_CHECK(cudaMallocManaged(&m, kBytes));
    for (size_t i = 0; i < kN; ++i) m[i] = 1.0f;  // the pages go to the host
    prof.begin_window("epoch 1");
    add_one<<<264, 256>>>(m, kN);  // and fault back in
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    WindowCounters w = prof.end_window();
    ASSERT_TRUE(w.um_htod_bytes.has_value()) << "profiler " << k << ":\n" << joined(prof.notes());
    EXPECT_GE(*w.um_htod_bytes, kBytes) << "profiler " << k;
    EXPECT_EQ(prof.late_records(), 0u) << "profiler " << k << ":\n" << joined(prof.notes());
    CUDA_CHECK(cudaFree(m));
  }
}

TEST(CuptiProfilerGpu, TraceIsValidAndShowsCopyComputeOverlap) {
  SKIP_WITHOUT_GPU();
  const std::string path =
      ::testing::TempDir() + "memstrat_trace_" + std::to_string(::getpid()) + ".json";
  CuptiProfiler::Options o;
  o.trace_path = path;
  CuptiProfiler prof(o);  // before the first NVTX call: NVTX ranges reach CUPTI
  ASSERT_TRUE(prof.api_available()) << joined(prof.notes());
  CUDA_CHECK(cudaFree(0));
  prof.enable_device_counters();
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const bool cma = concurrent_managed_access();

  constexpr size_t kBytes = 64u << 20;
  {
    NvtxRange run(Phase::Run, "profiler-test");
    prof.begin_window("setup");
    Stream compute = Stream::create(), copy = Stream::create();
    nvtx_name_stream(compute, "compute");
    nvtx_name_stream(copy, "copy 0");
    PinnedBuffer<char> host(kBytes);
    DeviceBuffer<char> dst(kBytes);
    ManagedBuffer<char> managed(kBytes);
    for (size_t i = 0; i < kBytes; i += 4096) host[i] = managed[i] = 1;
    prof.end_window();

    prof.begin_window("epoch 1");
    {
      NvtxRange epoch(Phase::Epoch, "epoch 1");
      {
        NvtxRange f(Phase::Forward, "forward");
        spin<<<1, 32, 0, compute>>>(20'000'000LL, nullptr);  // ~10 ms at ~2 GHz
        CUDA_CHECK(cudaGetLastError());
      }
      {
        NvtxRange h(Phase::H2D, "h2d");
        CUDA_CHECK(cudaMemcpyAsync(dst.data(), host.data(), kBytes, cudaMemcpyHostToDevice, copy));
      }
      if (cma) {
        NvtxRange p(Phase::Prefetch, "prefetch");
        cudaMemLocation loc{};
        loc.type = cudaMemLocationTypeDevice;
        loc.id = dev;
        CUDA_CHECK(cudaMemPrefetchAsync(managed.data(), kBytes, loc, 0, copy));
      }
      CUDA_CHECK(cudaStreamSynchronize(copy));
      CUDA_CHECK(cudaStreamSynchronize(compute));
    }
    prof.end_window();
  }
  prof.write_trace();

  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << path;
  json j = json::parse(f);
  std::remove(path.c_str());
  auto problems = validate_trace_events(j);
  EXPECT_TRUE(problems.empty()) << joined(problems);

  const double overlap = trace_overlap_us(j, "memcpy", "kernel");
  EXPECT_GT(overlap, 100.0) << "a 64 MiB copy on its own stream should overlap a ~10 ms kernel";

  bool kernel = false, memcpy_htod = false, window = false, nvtx_epoch = false,
       prefetch_migration = false, stream_named = false;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e.value("ph", ""), cat = e.value("cat", ""), name = e.value("name", "");
    const json args = e.value("args", json::object());
    if (ph == "X" && cat == "kernel" && name.find("spin") != std::string::npos) kernel = true;
    if (ph == "X" && cat == "memcpy" && args.value("kind", "") == "HtoD" &&
        args.value("bytes", 0ull) == kBytes)
      memcpy_htod = true;
    if (ph == "X" && cat == "window" && name == "epoch 1") window = true;
    if (ph == "X" && cat != "window" && name == "epoch 1") {
      nvtx_epoch = true;  // the NVTX range (cat = phase name when CUPTI sent its category)
      if (cat != "epoch") std::printf("note: NVTX range 'epoch 1' has cat '%s'\n", cat.c_str());
    }
    if (ph == "X" && cat == "um_migration" && args.value("cause", "") == "prefetch")
      prefetch_migration = true;
    if (ph == "M" && name == "thread_name" &&
        args.value("name", "").find("compute") != std::string::npos)
      stream_named = true;
  }
  EXPECT_TRUE(kernel);
  EXPECT_TRUE(memcpy_htod);
  EXPECT_TRUE(window);
  EXPECT_TRUE(nvtx_epoch) << "no NVTX ranges in the trace; notes:\n" << joined(prof.notes());
  // Stream names come from nvtxNameCudaStreamA via CUPTI name records: nice to have.
  if (!stream_named) std::printf("note: stream names (nvtxNameCudaStreamA) not in the trace\n");
  if (cma) EXPECT_TRUE(prefetch_migration) << joined(prof.notes());
}

TEST(CuptiProfilerGpu, SecondProfilerMeasuresNothingAndSaysWhy) {
  SKIP_WITHOUT_GPU();
  CuptiProfiler::Options o;
  CuptiProfiler first(o);
  ASSERT_TRUE(first.api_available()) << joined(first.notes());
  CuptiProfiler second(o);
  EXPECT_FALSE(second.api_available());
  ASSERT_FALSE(second.notes().empty());
  second.begin_window("epoch 1");
  WindowCounters w = second.end_window();
  EXPECT_FALSE(w.api_available);
  EXPECT_FALSE(w.kernel_ms.has_value());
  EXPECT_FALSE(w.um_htod_bytes.has_value());
}

}  // namespace
}  // namespace memstrat
