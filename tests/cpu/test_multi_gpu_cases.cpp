// `memstrat primitives --gpus N` without a GPU: the patterns and the cases each expands to at N
// GPUs, the bytes each moves and nccl-tests' bandwidth factors, the option rules (-p names
// patterns, --device refused, the collectives refused without NCCL_NVLS_ENABLE=0) and the
// binary's --list.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "cli_test_support.h"
#include "common/cuda_raii.h"
#include "common/nccl_settings.h"
#include "experiments/primitives/multi_gpu_cases.h"
#include "experiments/primitives/options.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
constexpr std::size_t MiB = 1024 * 1024;

const MultiGpuPatternEntry& pattern(const char* name) {
  const MultiGpuPatternEntry* e = find_multi_gpu_pattern(name);
  if (!e) throw std::logic_error(std::string("no pattern ") + name);
  return *e;
}

std::size_t cases(const char* name, int gpus) { return multi_gpu_cases(pattern(name), gpus).size(); }

// Sets NCCL_NVLS_ENABLE for a scope and puts back what was there.
class NvlsSetting {
 public:
  explicit NvlsSetting(const char* value) {
    if (const char* v = std::getenv("NCCL_NVLS_ENABLE")) old_ = v;
    if (value)
      setenv("NCCL_NVLS_ENABLE", value, 1);
    else
      unsetenv("NCCL_NVLS_ENABLE");
  }
  ~NvlsSetting() {
    if (old_)
      setenv("NCCL_NVLS_ENABLE", old_->c_str(), 1);
    else
      unsetenv("NCCL_NVLS_ENABLE");
  }

 private:
  std::optional<std::string> old_;
};
}  // namespace

TEST(MultiGpuCases, EveryGpuEveryOrderedPairEveryPairOrOneForAll) {
  for (const int n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    EXPECT_EQ(cases("h2d-alone", n), static_cast<std::size_t>(n));
    EXPECT_EQ(cases("h2d-all", n), 1u);
    EXPECT_EQ(cases("d2d-ce", n), static_cast<std::size_t>(n * (n - 1)));
    EXPECT_EQ(cases("d2d-sm", n), static_cast<std::size_t>(n * (n - 1)));
    EXPECT_EQ(cases("d2d-ce-both", n), static_cast<std::size_t>(n * (n - 1) / 2));
    EXPECT_EQ(cases("d2d-sm-both", n), static_cast<std::size_t>(n * (n - 1) / 2));
    for (const char* one : {"one-to-all", "all-to-one", "nccl-all-reduce", "nccl-all-gather",
                            "nccl-broadcast"})
      EXPECT_EQ(cases(one, n), 1u) << one;
  }
  // the ordered pairs of 3 GPUs, each once, never a GPU with itself
  std::set<std::pair<int, int>> pairs;
  for (const MultiGpuCase& c : multi_gpu_cases(pattern("d2d-ce"), 3)) {
    EXPECT_NE(c.src, c.dst);
    pairs.insert({c.src, c.dst});
  }
  EXPECT_EQ(pairs.size(), 6u);
  EXPECT_THROW(multi_gpu_cases(pattern("d2d-ce"), 1), std::invalid_argument);
}

TEST(MultiGpuCases, LabelsNameTheGpus) {
  EXPECT_EQ(multi_gpu_cases(pattern("d2d-ce"), 2)[1].label(2), "d2d-ce 1->0");
  EXPECT_EQ(multi_gpu_cases(pattern("d2d-sm-both"), 2)[0].label(2), "d2d-sm-both 0<->1");
  EXPECT_EQ(multi_gpu_cases(pattern("h2d-alone"), 4)[3].label(4), "h2d-alone 3");
  EXPECT_EQ(multi_gpu_cases(pattern("nccl-all-reduce"), 4)[0].label(4), "nccl-all-reduce x4");
  EXPECT_EQ(multi_gpu_cases(pattern("all-to-one"), 4)[0].label(4), "all-to-one x4");
}

TEST(MultiGpuCases, BusBandwidthFactorsAreNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather (n-1)/n, broadcast 1
  EXPECT_DOUBLE_EQ(*bus_factor(MultiGpuPattern::NcclAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(*bus_factor(MultiGpuPattern::NcclAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(*bus_factor(MultiGpuPattern::NcclAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(*bus_factor(MultiGpuPattern::NcclAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(*bus_factor(MultiGpuPattern::NcclAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(*bus_factor(MultiGpuPattern::NcclBroadcast, 8), 1.0);
  for (const auto& e : multi_gpu_patterns())
    EXPECT_EQ(bus_factor(e.pattern, 4).has_value(), is_collective(e.pattern)) << e.name;
}

TEST(MultiGpuCases, AlgorithmBandwidthCountsTheBytesThatCrossAtOnce) {
  const std::size_t b = 8 * MiB;
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::H2dAlone, b, 4), 8.0 * MiB);
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::H2dAll, b, 4), 32.0 * MiB);
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::D2dCe, b, 4), 8.0 * MiB);
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::D2dCeBothWays, b, 4), 16.0 * MiB);
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::OneToAll, b, 4), 24.0 * MiB);
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::AllToOne, b, 2), 8.0 * MiB);
  EXPECT_DOUBLE_EQ(algbw_bytes(MultiGpuPattern::NcclAllReduce, b, 4), 8.0 * MiB);  // nccl-tests
}

TEST(MultiGpuCases, AllGatherMovesWholeFloatsPerRank) {
  EXPECT_EQ(all_gather_count(4096, 8), 128u);
  EXPECT_EQ(measured_bytes(MultiGpuPattern::NcclAllGather, 4096, 3), 4092u);  // 341 floats x 3
  EXPECT_EQ(measured_bytes(MultiGpuPattern::NcclAllGather, 16, 8), 0u);       // below a float each
  EXPECT_EQ(measured_bytes(MultiGpuPattern::NcclAllReduce, 4096, 3), 4096u);
  EXPECT_EQ(measured_bytes(MultiGpuPattern::D2dSm, 4096, 3), 4096u);
}

TEST(MultiGpuOptions, PatternsInRegistryOrderEachOnceAndEveryOneByDefault) {
  NvlsSetting nvls("0");
  Parsed p = parse({"primitives", "--gpus", "2", "-p", "nccl-all-reduce,d2d-ce,d2d-ce"});
  ASSERT_FALSE(p.code) << p.err;
  PrimitivesConfig c = make_primitives_config(p.req.primitives);
  ASSERT_EQ(c.patterns.size(), 2u);
  EXPECT_EQ(c.patterns[0]->name, "d2d-ce");
  EXPECT_EQ(c.patterns[1]->name, "nccl-all-reduce");
  EXPECT_TRUE(c.primitives.empty());
  p = parse({"primitives", "--gpus", "4"});
  ASSERT_FALSE(p.code) << p.err;
  c = make_primitives_config(p.req.primitives);
  EXPECT_EQ(c.patterns.size(), multi_gpu_patterns().size());
  // one GPU: today's primitives, no patterns
  p = parse({"primitives"});
  c = make_primitives_config(p.req.primitives);
  EXPECT_TRUE(c.patterns.empty());
  EXPECT_EQ(c.primitives.size(), primitive_registry().size());
}

TEST(MultiGpuOptions, EachBadCombinationIsAUsageErrorThatNamesIt) {
  NvlsSetting nvls("0");
  expect_refused({"primitives", "--gpus", "0"}, "--gpus 0 is out of range");
  expect_refused({"primitives", "--gpus", "17"}, "--gpus 17 is out of range");
  expect_refused({"primitives", "--gpus", "2", "--device", "1"},
                 "choose them with CUDA_VISIBLE_DEVICES");
  expect_refused({"primitives", "--gpus", "2", "-p", "pinned-h2d"},
                 "unknown pattern 'pinned-h2d' for --gpus 2; choose from: h2d-alone");
  expect_refused({"primitives", "-p", "d2d-ce"}, "unknown primitive 'd2d-ce'");
}

TEST(MultiGpuOptions, CollectivesNeedNvlinkMulticastOffCopiesDoNot) {
  if (!kHaveNccl) GTEST_SKIP() << "this build has no NCCL: the collectives are waived, not refused";
  {
    NvlsSetting nvls(nullptr);
    expect_refused({"primitives", "--gpus", "2"}, "NCCL_NVLS_ENABLE=0");
    expect_refused({"primitives", "--gpus", "2", "-p", "nccl-broadcast"}, "NCCL_NVLS_ENABLE");
    const Parsed p = parse({"primitives", "--gpus", "2", "-p", "d2d-ce,h2d-all"});
    EXPECT_FALSE(p.code) << p.err;
  }
  NvlsSetting nvls("1");
  expect_refused({"primitives", "--gpus", "2", "-p", "nccl-all-gather"}, "NCCL_NVLS_ENABLE");
}

TEST(MultiGpuBinary, ListNamesEveryPatternWithoutAGpu) {
  const Ran r = run_binary("primitives --gpus 2 --list");
  EXPECT_EQ(r.code, 0) << r.output;
  int lines = 0;
  for (char ch : r.output) lines += ch == '\n';
  EXPECT_EQ(lines, static_cast<int>(multi_gpu_patterns().size())) << r.output;
  for (const auto& e : multi_gpu_patterns())
    EXPECT_NE(r.output.find(std::string(e.name) + " "), std::string::npos) << e.name;
  EXPECT_NE(run_binary("primitives --help").output.find("--gpus"), std::string::npos);
}

TEST(MultiGpuBinary, BadOptionsExit2AndNoGpuExit3) {
  Ran r = run_binary("primitives --gpus 2 -p teleport");
  EXPECT_EQ(r.code, 2) << r.output;
  std::string reason;
  if (cuda_device_available(&reason))
    GTEST_SKIP() << "a GPU is present; the rest is for GPU-less machines";
  r = run_command("NCCL_NVLS_ENABLE=0 " + std::string(MEMSTRAT_BINARY) + " primitives --gpus 2");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("`primitives` needs an NVIDIA GPU"), std::string::npos) << r.output;
}
