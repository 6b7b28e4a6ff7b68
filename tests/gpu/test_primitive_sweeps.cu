// Transfer primitives on a GPU: every primitive moves and verifies its data at a few sizes with
// positive, finite times; a transfer that did not happen fails verification; the managed-memory
// guard refuses what does not fit; pinned-h2d agrees with a plain event-timed copy within 5%;
// and `memstrat primitives --json` writes one complete record per primitive.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cuda_raii.h"
#include "experiments/primitives/measure.h"
#include "experiments/primitives/self_check.h"
#include "memory_strategies/um_hints.h"

using namespace memstrat;

namespace {
constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;

#define MEMSTRAT_REQUIRE_GPU()                                                                 \
  do {                                                                                         \
    std::string why_;                                                                          \
    if (!::memstrat::cuda_device_available(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

struct Streams {
  Stream main = Stream::create(), side = Stream::create();
  PrimitiveContext ctx() const { return {0, main, side}; }
};

// Empty when the device runs it, else prints the waiver (the test then skips that primitive).
bool waived(const PrimitiveEntry& e) {
  const std::string why = e.unsupported(DeviceCaps::query(0));
  if (!why.empty()) std::cout << "[ WAIVED ] " << e.name << ": " << why << "\n";
  return !why.empty();
}
}  // namespace

TEST(Primitives, EveryPrimitiveVerifiesItsDataWithPositiveFiniteTimes) {
  MEMSTRAT_REQUIRE_GPU();
  Streams s;
  // Two powers of two and an odd multiple of 16 (uneven halves, a partial last block of the
  // SM copy, a size that is no whole number of pages).
  const std::vector<std::size_t> sizes = {64 * KiB, 4 * MiB, 12345 * 16};
  const SweepSettings settings{1, 3};
  for (const auto& e : primitive_registry()) {
    if (waived(e)) continue;
    auto p = e.make();
    p->prepare(4 * MiB, s.ctx());
    PrimitiveSweep sweep(*p, s.ctx(), std::string(e.name));
    for (const std::size_t bytes : sizes) {
      SizePoint pt;
      ASSERT_NO_THROW(pt = sweep.measure(bytes, settings)) << e.name << " at " << bytes;
      EXPECT_EQ(pt.bytes, bytes);
      EXPECT_EQ(pt.verified_samples, settings.warmup + settings.samples) << e.name;
      ASSERT_EQ(pt.samples_us.size(), static_cast<std::size_t>(settings.samples)) << e.name;
      for (const double us : pt.samples_us)
        EXPECT_TRUE(std::isfinite(us) && us > 0) << e.name << " " << us;
      EXPECT_LE(pt.us.min, pt.us.p25);
      EXPECT_LE(pt.us.p25, pt.us.median);
      EXPECT_LE(pt.us.median, pt.us.p75);
      EXPECT_LE(pt.us.p75, pt.us.max);
      EXPECT_TRUE(std::isfinite(pt.gbps) && pt.gbps > 0) << e.name << " " << pt.gbps;
      EXPECT_NEAR(pt.gbps, static_cast<double>(bytes) / (pt.us.median * 1e3), 1e-9 * pt.gbps);
    }
  }
}

// Verification can fail: after a reset and no transfer the destination must be found wrong.
// (The prefetch primitives move pages in place: the data is right wherever it lives, so for
// them verification checks integrity, not that something moved.)
TEST(Primitives, AMissingTransferFailsVerification) {
  MEMSTRAT_REQUIRE_GPU();
  Streams s;
  for (const char* name : {"pageable-h2d", "pinned-h2d", "pinned-h2d-2streams", "pinned-d2h",
                           "sm-copy-mapped", "um-fault-h2d", "um-host-write"}) {
    const PrimitiveEntry* e = find_primitive(name);
    ASSERT_NE(e, nullptr) << name;
    if (waived(*e)) continue;
    auto p = e->make();
    p->prepare(64 * KiB, s.ctx());
    // A seed no earlier sample used: reused host memory can not hold its pattern by chance.
    const std::uint32_t seed = 0xABCDEF;
    p->reset(64 * KiB, seed);
    CUDA_CHECK(cudaStreamSynchronize(s.main));
    const std::string why = p->verify(64 * KiB, seed);
    EXPECT_NE(why.find("words wrong"), std::string::npos) << name << ": " << why;
    // ...and the same state passes once the transfer ran.
    p->transfer(64 * KiB, seed);
    CUDA_CHECK(cudaStreamSynchronize(s.main));
    EXPECT_EQ(p->verify(64 * KiB, seed), "") << name;
  }
}

TEST(Primitives, ManagedMemoryGuardRefusesMoreThanIsFree) {
  MEMSTRAT_REQUIRE_GPU();
  Streams s;
  const DeviceCaps caps = DeviceCaps::query(0);
  for (const char* name : {"um-prefetch-h2d", "um-prefetch-resident", "um-host-write"}) {
    const PrimitiveEntry* e = find_primitive(name);
    if (waived(*e)) continue;
    auto p = e->make();
    try {
      p->prepare(caps.free_bytes + (std::size_t{1} << 30), s.ctx());
      ADD_FAILURE() << name << " allocated more managed memory than the GPU has free";
    } catch (const std::runtime_error& ex) {
      EXPECT_NE(std::string(ex.what()).find("refusing"), std::string::npos)
          << name << ": " << ex.what();
      EXPECT_NE(std::string(ex.what()).find("--max-size"), std::string::npos)
          << name << ": " << ex.what();
    }
  }
}

// The self-check the command runs, asserted: the harness's pinned-h2d median at 256 MiB and a
// plain event-timed cudaMemcpyAsync of the same size agree within 5%.
TEST(Primitives, PinnedH2DAgreesWithAPlainCopyWithin5PercentAt256MiB) {
  MEMSTRAT_REQUIRE_GPU();
  Streams s;
  const std::size_t bytes = 256 * MiB;
  const SweepSettings settings{2, 9};
  SizePoint pt;
  {
    auto p = find_primitive(kSelfCheckPrimitive)->make();
    p->prepare(bytes, s.ctx());
    PrimitiveSweep sweep(*p, s.ctx(), std::string(kSelfCheckPrimitive));
    pt = sweep.measure(bytes, settings);
  }
  const SelfCheck c = self_check(bytes, pt.us.median, settings.samples);
  EXPECT_GT(c.plain_median_us, 0);
  EXPECT_LE(std::fabs(c.relative_difference), kSelfCheckTolerance)
      << "harness " << c.primitive_median_us << " us vs plain " << c.plain_median_us << " us";
  EXPECT_TRUE(c.passed);
  EXPECT_NEAR(c.relative_difference,
              (c.primitive_median_us - c.plain_median_us) / c.plain_median_us, 1e-12);
}

TEST(PrimitivesCommand, WritesOneCompleteRecordPerPrimitive) {
  MEMSTRAT_REQUIRE_GPU();
  const std::string path = ::testing::TempDir() + "memstrat_primitives_test.jsonl";
  std::filesystem::remove(path);
  const std::string cmd =
      std::string(MEMSTRAT_BINARY) +
      " primitives --min-size 4K --max-size 64K --samples 3 --warmup 1 -q --json " + path + " 2>&1";
  std::string output;
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), f)) output += buf.data();
  const int st = pclose(f);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << output;
  EXPECT_NE(output.find("self-check skipped"), std::string::npos) << output;  // 64 KiB < 16 MiB

  std::ifstream in(path);
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line);
    ASSERT_LT(n, primitive_registry().size());
    const PrimitiveEntry& e = primitive_registry()[n++];
    EXPECT_EQ(r["schema_version"], 1);
    EXPECT_EQ(r["record"], "primitive");
    EXPECT_EQ(r["config"]["primitive"], std::string(e.name));
    EXPECT_EQ(r["primitive"]["name"], std::string(e.name));
    EXPECT_FALSE(r["env"]["gpu_name"].get<std::string>().empty());
    EXPECT_FALSE(r["run_id"].get<std::string>().empty());
    if (r["status"] == "waived") {
      EXPECT_FALSE(r["waived_reason"].get<std::string>().empty());
      EXPECT_TRUE(r["env_end"].is_null());
      continue;
    }
    // NVML's state after the primitive: read where the driver's NVML is, null (with the start
    // env's nvml_note saying why) where it is not.
    ASSERT_TRUE(r["env_end"].is_object()) << line;
    EXPECT_EQ(r["env_end"]["sm_clock_mhz"].is_null(), r["env"]["nvml_note"].is_string() &&
                                                          r["env"]["sm_clock_mhz"].is_null())
        << r["env"]["nvml_note"];
    ASSERT_EQ(r["status"], "ok") << line;
    ASSERT_EQ(r["results"].size(), 5u);  // 4, 8, 16, 32, 64 KiB
    for (std::size_t i = 0; i < 5; ++i) {
      const nlohmann::json& p = r["results"][i];
      EXPECT_EQ(p["bytes"], (4 * KiB) << i);
      EXPECT_EQ(p["samples_us"].size(), 3u);
      EXPECT_EQ(p["verified_samples"], 4);
      EXPECT_GT(p["median_us"].get<double>(), 0);
      EXPECT_GT(p["gbps"].get<double>(), 0);
    }
    EXPECT_GT(r["summary"]["peak_gbps"].get<double>(), 0);
    EXPECT_GT(r["summary"]["latency_4k_us"].get<double>(), 0);
    EXPECT_LE(r["summary"]["knee50_bytes"].get<double>(),
              r["summary"]["knee90_bytes"].get<double>());
    if (e.name == kSelfCheckPrimitive) {
      EXPECT_FALSE(r["self_check"]["skipped"].is_null());
    } else {
      EXPECT_TRUE(r["self_check"].is_null());
    }
  }
  EXPECT_EQ(n, primitive_registry().size());
  std::filesystem::remove(path);
}
