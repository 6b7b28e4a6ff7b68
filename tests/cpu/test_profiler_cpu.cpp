// test_profiler_cpu.cpp: the CPU side of the built-in profiler: API-name normalisation, the
// window bookkeeping (attribution by timestamp, API differences, null semantics), the JSON
// form, and a disabled profiler that makes no CUPTI call at all. Needs no GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "common/profiler/api_names.h"
#include "common/profiler/profiler.h"
#include "common/profiler/window_ledger.h"
#include "tests/support/trace_checks.h"

namespace memstrat {
namespace {

using nlohmann::json;

TEST(NormalizeApiName, StripsTheCuptiVersionSuffix) {
  EXPECT_EQ(normalize_api_name("cudaMalloc_v3020"), "cudaMalloc");
  EXPECT_EQ(normalize_api_name("cudaMemcpyAsync_v3020"), "cudaMemcpyAsync");
  EXPECT_EQ(normalize_api_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(normalize_api_name("cudaGraphLaunch_v10000"), "cudaGraphLaunch");
  EXPECT_EQ(normalize_api_name("cudaMemPrefetchAsync_v12020"), "cudaMemPrefetchAsync");
  EXPECT_EQ(normalize_api_name("cudaMallocAsync_v11020"), "cudaMallocAsync");
  EXPECT_EQ(normalize_api_name("cudaGetDeviceProperties_v2_v12000"), "cudaGetDeviceProperties_v2");
}

TEST(NormalizeApiName, KeepsAbiSuffixesAndOtherNames) {
  EXPECT_EQ(normalize_api_name("cuMemAlloc_v2"), "cuMemAlloc_v2");        // driver ABI version
  EXPECT_EQ(normalize_api_name("cuLaunchKernelEx"), "cuLaunchKernelEx");  // no suffix
  EXPECT_EQ(normalize_api_name("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(normalize_api_name("cudaFoo_v12a4"), "cudaFoo_v12a4");  // not all digits
  EXPECT_EQ(normalize_api_name("_v3020"), "_v3020");                // nothing left
  EXPECT_EQ(normalize_api_name(""), "");
}

TEST(ApiCounts, CountAndTotal) {
  ApiCounts c;
  c.calls = {{"cudaMalloc", 3}, {"cudaFree", 2}, {"cudaLaunchKernel", 0}};
  EXPECT_EQ(c.count("cudaMalloc"), 3u);
  EXPECT_EQ(c.count("cudaMemcpy"), 0u);
  EXPECT_EQ(c.total(), 5u);
}

TEST(WatchedApiNames, CoverTheIssueMinimum) {
  const auto& w = watched_api_names();
  for (const char* n :
       {"cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
        "cudaMallocManaged", "cudaMallocAsync", "cudaMemcpy", "cudaMemcpyAsync",
        "cudaMemPrefetchAsync", "cudaMemAdvise", "cudaStreamSynchronize", "cudaDeviceSynchronize",
        "cudaLaunchKernel", "__cudaLaunchKernel", "cudaGraphLaunch"})
    EXPECT_NE(std::find(w.begin(), w.end(), n), w.end()) << n;
}

// ----------------------------------------------------------------------------------------------
// WindowLedger
// ----------------------------------------------------------------------------------------------

TEST(WindowLedger, ApiCallsAreTheDifferenceOfSnapshots) {
  WindowLedger l;
  l.set_api_available(true);
  l.begin_window("setup", 100, {{"cudaMalloc", 1}});
  l.close_window(200, {{"cudaMalloc", 5}, {"cudaMallocHost", 2}, {"cudaStreamCreateWithFlags", 3}});
  WindowCounters setup = l.report();
  ASSERT_TRUE(setup.api_available);
  EXPECT_EQ(setup.api.count("cudaMalloc"), 4u);
  EXPECT_EQ(setup.api.count("cudaMallocHost"), 2u);
  EXPECT_EQ(setup.api.count("cudaStreamCreateWithFlags"), 3u);

  l.begin_window("epoch 1", 300,
                 {{"cudaMalloc", 5}, {"cudaMallocHost", 2}, {"cudaStreamCreateWithFlags", 3}});
  l.close_window(400, {{"cudaMalloc", 5},
                       {"cudaMallocHost", 2},
                       {"cudaStreamCreateWithFlags", 3},
                       {"cudaMemcpyAsync", 235},
                       {"cudaGraphLaunch", 235}});
  WindowCounters e1 = l.report();
  EXPECT_EQ(e1.api.count("cudaMemcpyAsync"), 235u);
  EXPECT_EQ(e1.api.count("cudaGraphLaunch"), 235u);
  // Watched functions are listed with an explicit 0; unwatched ones only when called.
  ASSERT_TRUE(e1.api.calls.count("cudaMalloc"));
  EXPECT_EQ(e1.api.calls.at("cudaMalloc"), 0u);
  EXPECT_FALSE(e1.api.calls.count("cudaStreamCreateWithFlags"));
  for (const auto& n : watched_api_names()) EXPECT_TRUE(e1.api.calls.count(n)) << n;
}

TEST(WindowLedger, ActivityIsAttributedByTimestamp) {
  WindowLedger l;
  l.mark_available(ActivityCounter::KernelTime, 0);
  l.mark_available(ActivityCounter::MemcpyTime, 0);
  l.mark_available(ActivityCounter::UmHtoDBytes, 0);
  l.mark_available(ActivityCounter::UmGpuFaults, 0);

  l.add(ActivityCounter::KernelTime, 50, 7'000'000);  // before any window: outside
  l.begin_window("epoch 1", 100, {});
  l.add(ActivityCounter::KernelTime, 150, 2'000'000);  // 2 ms
  l.add(ActivityCounter::KernelTime, 199, 500'000);    // 0.5 ms
  l.add(ActivityCounter::UmHtoDBytes, 120, 4096);
  l.add(ActivityCounter::UmGpuFaults, 130, 3);
  // A record can arrive (from CUPTI's thread) after the window closed but before the report:
  l.close_window(200, {});
  l.add(ActivityCounter::MemcpyTime, 180, 1'000'000);
  l.add(ActivityCounter::KernelTime, 200, 9'000'000);  // at the end: not in [100, 200)
  WindowCounters w = l.report();
  ASSERT_TRUE(w.kernel_ms.has_value());
  EXPECT_DOUBLE_EQ(*w.kernel_ms, 2.5);
  ASSERT_TRUE(w.memcpy_ms.has_value());
  EXPECT_DOUBLE_EQ(*w.memcpy_ms, 1.0);
  EXPECT_EQ(w.um_htod_bytes, std::optional<std::uint64_t>(4096));
  EXPECT_EQ(w.um_gpu_faults, std::optional<std::uint64_t>(3));

  auto outside = l.outside_sums();
  EXPECT_EQ(outside[static_cast<int>(ActivityCounter::KernelTime)], 16'000'000u);

  // After the report, a record for that window is late: counted, not added.
  EXPECT_FALSE(l.add(ActivityCounter::KernelTime, 150, 1));
  EXPECT_EQ(l.late_records(), 1u);
  ASSERT_EQ(l.history().size(), 1u);
  EXPECT_DOUBLE_EQ(*l.history()[0].second.kernel_ms, 2.5);
}

TEST(WindowLedger, RecordsWithoutTimestampGoToTheOpenWindow) {
  WindowLedger l;
  l.mark_available(ActivityCounter::UmCpuFaults, 0);
  l.begin_window("epoch 1", 100, {});
  l.add(ActivityCounter::UmCpuFaults, 0, 1);
  l.add(ActivityCounter::UmCpuFaults, 0, 1);
  l.close_window(200, {});
  l.add(ActivityCounter::UmCpuFaults, 0, 1);  // no window open: outside
  EXPECT_EQ(l.report().um_cpu_faults, std::optional<std::uint64_t>(2));
  EXPECT_EQ(l.outside_sums()[static_cast<int>(ActivityCounter::UmCpuFaults)], 1u);
}

TEST(WindowLedger, UnavailableCountersAreNullNeverZero) {
  WindowLedger l;  // nothing available, API off
  l.begin_window("epoch 1", 100, {});
  l.add(ActivityCounter::KernelTime, 150, 1000);  // even if a record arrives
  l.close_window(200, {});
  WindowCounters w = l.report();
  EXPECT_FALSE(w.api_available);
  EXPECT_TRUE(w.api.calls.empty());
  EXPECT_FALSE(w.kernel_ms.has_value());
  EXPECT_FALSE(w.memcpy_ms.has_value());
  EXPECT_FALSE(w.um_htod_bytes.has_value());
  EXPECT_FALSE(w.um_dtoh_bytes.has_value());
  EXPECT_FALSE(w.um_gpu_faults.has_value());
  EXPECT_FALSE(w.um_cpu_faults.has_value());
}

TEST(WindowLedger, AvailableButIdleCountersAreZero) {
  WindowLedger l;
  l.mark_available(ActivityCounter::UmHtoDBytes, 0);
  l.mark_available(ActivityCounter::MemcpyTime, 0);
  l.begin_window("epoch 1", 100, {});
  l.close_window(200, {});
  WindowCounters w = l.report();
  EXPECT_EQ(w.um_htod_bytes, std::optional<std::uint64_t>(0));  // measured: nothing migrated
  EXPECT_EQ(w.memcpy_ms, std::optional<double>(0.0));
  EXPECT_FALSE(w.um_dtoh_bytes.has_value());  // never enabled
}

TEST(WindowLedger, CounterEnabledMidWindowIsNullForThatWindowOnly) {
  WindowLedger l;
  l.begin_window("setup", 100, {});
  l.mark_available(ActivityCounter::UmHtoDBytes, 150);  // enabled during set-up
  l.add(ActivityCounter::UmHtoDBytes, 160, 4096);
  l.close_window(200, {});
  EXPECT_FALSE(l.report().um_htod_bytes.has_value());  // only partly measured: null
  l.begin_window("epoch 1", 300, {});
  l.add(ActivityCounter::UmHtoDBytes, 310, 8192);
  l.close_window(400, {});
  EXPECT_EQ(l.report().um_htod_bytes, std::optional<std::uint64_t>(8192));
}

TEST(WindowLedger, MisuseThrows) {
  WindowLedger l;
  EXPECT_THROW(l.close_window(10, {}), std::logic_error);
  EXPECT_THROW(l.report(), std::logic_error);
  l.begin_window("a", 10, {});
  EXPECT_TRUE(l.window_open());
  EXPECT_EQ(l.open_window_name(), "a");
  EXPECT_THROW(l.begin_window("b", 20, {}), std::logic_error);
  l.close_window(30, {});
  EXPECT_FALSE(l.window_open());
  l.report();
  EXPECT_THROW(l.report(), std::logic_error);  // already reported
}

TEST(WindowLedger, SpansListEveryWindow) {
  WindowLedger l;
  l.begin_window("setup", 10, {});
  l.close_window(20, {});
  l.report();
  l.begin_window("epoch 1", 30, {});
  auto s = l.spans();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first, "setup");
  EXPECT_EQ(s[0].second.first, 10u);
  EXPECT_EQ(s[0].second.second, 20u);
  EXPECT_EQ(s[1].second.second, WindowLedger::kOpen);
}

// ----------------------------------------------------------------------------------------------
// JSON
// ----------------------------------------------------------------------------------------------

TEST(ProfilerJson, NullWhenUnavailable) {
  json j = CuptiProfiler::to_json(WindowCounters{});
  for (const char* k : {"api_calls", "um_htod_bytes", "um_dtoh_bytes", "um_gpu_faults",
                        "um_cpu_faults", "kernel_ms", "memcpy_ms"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j[k].is_null()) << k;
  }
}

TEST(ProfilerJson, ValuesWhenAvailable) {
  WindowCounters w;
  w.api_available = true;
  w.api.calls = {{"cudaMalloc", 0}, {"cudaMemcpyAsync", 235}};
  w.um_htod_bytes = 47040000;
  w.um_dtoh_bytes = 0;
  w.um_gpu_faults = 1234;
  w.kernel_ms = 2.5;
  w.memcpy_ms = 0.0;
  json j = CuptiProfiler::to_json(w);
  EXPECT_EQ(j["api_calls"]["cudaMalloc"], 0);
  EXPECT_EQ(j["api_calls"]["cudaMemcpyAsync"], 235);
  EXPECT_EQ(j["um_htod_bytes"], 47040000);
  EXPECT_EQ(j["um_dtoh_bytes"], 0);  // measured zero stays 0
  EXPECT_EQ(j["um_gpu_faults"], 1234);
  EXPECT_TRUE(j["um_cpu_faults"].is_null());
  EXPECT_DOUBLE_EQ(j["kernel_ms"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["memcpy_ms"].get<double>(), 0.0);
}

// ----------------------------------------------------------------------------------------------
// A disabled profiler (--no-profile)
// ----------------------------------------------------------------------------------------------

TEST(CuptiProfilerDisabled, MakesNoCuptiCallAndReportsNull) {
  const std::string trace = ::testing::TempDir() + "off_" + std::to_string(::getpid()) + ".json";
  const std::uint64_t before = CuptiProfiler::cupti_calls_made();
  {
    CuptiProfiler::Options o;
    o.enabled = false;
    o.trace_path = trace;
    CuptiProfiler p(o);
    p.enable_device_counters();
    p.begin_window("setup");
    WindowCounters s = p.end_window();
    p.begin_window("epoch 1");
    WindowCounters e = p.end_window();
    for (const WindowCounters* w : {&s, &e}) {
      EXPECT_FALSE(w->api_available);
      EXPECT_TRUE(w->api.calls.empty());
      EXPECT_FALSE(w->um_htod_bytes || w->um_dtoh_bytes || w->um_gpu_faults || w->um_cpu_faults);
      EXPECT_FALSE(w->kernel_ms || w->memcpy_ms);
    }
    EXPECT_FALSE(p.api_available());
    EXPECT_TRUE(p.api_totals().calls.empty());
    ASSERT_FALSE(p.notes().empty());
    EXPECT_NE(p.notes()[0].find("profiling off"), std::string::npos);
    std::string table = p.table();
    EXPECT_NE(table.find("n/a"), std::string::npos) << table;
    EXPECT_NE(table.find("epoch 1"), std::string::npos) << table;
    p.write_trace();  // a valid, nearly empty file that says why
  }
  EXPECT_EQ(CuptiProfiler::cupti_calls_made(), before);

  std::ifstream f(trace);
  ASSERT_TRUE(f.good());
  json j = json::parse(f);
  std::remove(trace.c_str());
  EXPECT_TRUE(validate_trace_events(j).empty());
  EXPECT_FALSE(j["otherData"]["memstrat"]["notes"].empty());
}

TEST(CuptiProfilerDisabled, WindowMisuseThrows) {
  CuptiProfiler::Options o;
  o.enabled = false;
  CuptiProfiler p(o);
  EXPECT_THROW(p.end_window(), std::logic_error);
  p.begin_window("epoch 1");
  EXPECT_THROW(p.begin_window("epoch 2"), std::logic_error);
  p.end_window();
}

// An enabled profiler on a machine without a GPU or driver must degrade to nulls with a
// reason, never crash (on a GPU machine it simply works; both are accepted here).
TEST(CuptiProfilerEnabled, DegradesOrWorksWithoutCudaWork) {
  CuptiProfiler::Options o;
  CuptiProfiler p(o);
  p.begin_window("setup");
  WindowCounters w = p.end_window();
  if (!w.api_available) {
    EXPECT_FALSE(p.notes().empty()) << "API counts unavailable without a reason";
  } else {
    EXPECT_EQ(w.api.count("cudaMalloc"), 0u);  // this test made no CUDA call
  }
  EXPECT_NO_THROW((void)p.table());
}

}  // namespace
}  // namespace memstrat
