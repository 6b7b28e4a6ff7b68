// test_multi_gpu_primitives.cu: `memstrat primitives --gpus 2` on two GPUs (skipped with a reason
// on fewer; the collectives also without NCCL):
//  - every case of every pattern moves the right bytes at several sizes (each sample checked),
//    and the check sees a destination that did not receive them;
//  - the binary writes one ok record per case with every size, algbw > 0, busbw = algbw x
//    nccl-tests' factor for the collectives, a rate per stream where several run at once.
// NCCL_NVLS_ENABLE=0 is set for this process (the collectives refuse to start without it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cpu/cli_test_support.h"
#include "common/cuda_raii.h"
#include "common/nccl_settings.h"
#include "experiments/primitives/multi_gpu_bench.h"
#include "experiments/primitives/multi_gpu_cases.h"
#include "tests/gpu/gpu_test_support.h"

namespace memstrat::testing {
namespace {

#define REQUIRE_TWO_GPUS()                                                           \
  do {                                                                               \
    MEMSTRAT_REQUIRE_GPU();                                                          \
    int count_ = 0;                                                                  \
    if (cudaGetDeviceCount(&count_) != cudaSuccess || count_ < 2)                    \
      GTEST_SKIP() << "needs 2 GPUs, this machine shows " << count_;                 \
    setenv("NCCL_NVLS_ENABLE", "0", 1);                                              \
  } while (0)

std::vector<const MultiGpuPatternEntry*> runnable_patterns() {
  std::vector<const MultiGpuPatternEntry*> ps;
  for (const auto& e : multi_gpu_patterns())
    if (kHaveNccl || !is_collective(e.pattern)) ps.push_back(&e);
  return ps;
}

TEST(MultiGpuBench, EveryCaseMovesTheRightBytesAndTheCheckSeesMissingOnes) {
  REQUIRE_TWO_GPUS();
  constexpr std::size_t kMax = std::size_t{4} << 20;
  const auto patterns = runnable_patterns();
  MultiGpuBench bench(2, kMax, patterns);
  for (const MultiGpuPatternEntry* e : patterns)
    for (const MultiGpuCase& c : multi_gpu_cases(*e, 2)) {
      SCOPED_TRACE(c.label(2));
      if (const std::string why = bench.unsupported(c); !why.empty()) {
        std::cout << "[  WAIVED  ] " << c.label(2) << ": " << why << "\n";
        continue;
      }
      bench.prepare(c);
      for (const std::size_t bytes : {std::size_t{4096}, std::size_t{1} << 20, kMax}) {
        const MultiGpuSample s = bench.sample(c, bytes, is_host_timed(e->pattern) ? 3 : 1);
        EXPECT_GT(s.us, 0);
        EXPECT_EQ(s.stream_us.empty(), !is_host_timed(e->pattern) || is_collective(e->pattern));
        for (double us : s.stream_us) EXPECT_GT(us, 0);
        EXPECT_EQ(bench.verify(c, bytes), "") << bytes;
      }
      // destinations cleared and not written again: the check must object
      bench.clear(c, kMax);
      EXPECT_NE(bench.verify(c, kMax), "") << "the check passed a destination left cleared";
    }
}

TEST(MultiGpuBinary, OneOkRecordPerCaseWithNcclTestsBandwidths) {
  REQUIRE_TWO_GPUS();
  const std::string path = ::testing::TempDir() + "multi_gpu_primitives.jsonl";
  std::remove(path.c_str());
  const Ran r = run_command("NCCL_NVLS_ENABLE=0 " + std::string(MEMSTRAT_BINARY) +
                            " primitives --gpus 2 --max-size 1MiB --min-size 64KiB -n 3 -w 1 "
                            "--json " + path);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(path);
  std::string line;
  std::size_t records = 0, expected = 0;
  for (const auto& e : multi_gpu_patterns()) expected += multi_gpu_cases(e, 2).size();
  while (std::getline(in, line)) {
    const nlohmann::json rec = nlohmann::json::parse(line);
    ++records;
    SCOPED_TRACE(rec["config"]["pattern"].get<std::string>());
    EXPECT_EQ(rec["record"], "multi-gpu-primitive");
    EXPECT_EQ(rec["config"]["gpus"], 2);
    if (rec["status"] == "waived") {
      EXPECT_FALSE(rec["waived_reason"].is_null());
      continue;
    }
    ASSERT_EQ(rec["status"], "ok") << rec["error"];
    const MultiGpuPatternEntry* e = find_multi_gpu_pattern(rec["config"]["pattern"].get<std::string>());
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(rec["results"].size(), 5u);  // 64 KiB .. 1 MiB
    for (const auto& pt : rec["results"]) {
      EXPECT_GT(pt["algbw_gbps"].get<double>(), 0);
      EXPECT_EQ(pt["samples_us"].size(), 3u);
      EXPECT_EQ(pt["verified_samples"], 4);
      if (const auto f = bus_factor(e->pattern, 2))
        EXPECT_DOUBLE_EQ(pt["busbw_gbps"].get<double>(), pt["algbw_gbps"].get<double>() * *f);
      else
        EXPECT_TRUE(pt["busbw_gbps"].is_null());
      EXPECT_EQ(pt["per_gpu_gbps"].is_null(), !is_host_timed(e->pattern) || is_collective(e->pattern));
    }
    if (is_collective(e->pattern)) {
      EXPECT_FALSE(rec["env"]["nccl"].is_null());
      EXPECT_EQ(rec["env"]["nccl"]["settings"]["NCCL_NVLS_ENABLE"], "0");
    }
  }
  EXPECT_EQ(records, expected);
}

}  // namespace
}  // namespace memstrat::testing
