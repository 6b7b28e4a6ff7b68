// `memstrat primitives` without a GPU: sizes (parsing, printing, the sweep), knees, the registry,
// option validation (each bad option is a usage error with a message naming it, before any
// device work) and the binary's --help / --list / exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/cuda_raii.h"
#include "experiments/primitives/knees.h"
#include "experiments/primitives/options.h"
#include "experiments/primitives/record.h"
#include "experiments/primitives/sizes.h"

using namespace memstrat;
using namespace memstrat::testing;

namespace {
constexpr std::size_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

std::vector<double> times_for(const std::vector<std::size_t>& bytes,
                              const std::vector<double>& gbps) {
  std::vector<double> us;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    us.push_back(static_cast<double>(bytes[i]) / (gbps[i] * 1e3));
  return us;
}
}  // namespace

// ---- sizes -----------------------------------------------------------------------------------

TEST(PrimitiveSizes, ParsesBytesAndBinaryUnits) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512B"), 512u);
  EXPECT_EQ(parse_size("4K"), 4 * KiB);
  EXPECT_EQ(parse_size("4KiB"), 4 * KiB);
  EXPECT_EQ(parse_size("4kib"), 4 * KiB);
  EXPECT_EQ(parse_size("256M"), 256 * MiB);
  EXPECT_EQ(parse_size("256MiB"), 256 * MiB);
  EXPECT_EQ(parse_size("1G"), GiB);
  EXPECT_EQ(parse_size("2GiB"), 2 * GiB);
}

TEST(PrimitiveSizes, RejectsWhatIsNotASizeAndSaysWhatIs) {
  for (const char* bad :
       {"", "K", "4kb", "4 KiB", "-4K", "4.5M", "4T", "0x10", "99999999999999999G"}) {
    try {
      parse_size(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("256MiB"), std::string::npos) << e.what();
    }
  }
}

TEST(PrimitiveSizes, PrintsBinaryUnits) {
  EXPECT_EQ(format_size(100), "100 B");
  EXPECT_EQ(format_size(4096), "4 KiB");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_size(5792), "5.66 KiB");
  EXPECT_EQ(format_size(256.0 * MiB), "256 MiB");
  EXPECT_EQ(format_size(static_cast<double>(GiB)), "1 GiB");
}

TEST(PrimitiveSizes, DefaultSweepIsThePowersOfTwoFrom4KiBTo256MiB) {
  const std::vector<std::size_t> s = size_sweep(4 * KiB, 256 * MiB, 1);
  ASSERT_EQ(s.size(), 17u);
  EXPECT_EQ(s.front(), 4 * KiB);
  EXPECT_EQ(s.back(), 256 * MiB);
  for (std::size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], 2 * s[i - 1]);
  EXPECT_EQ(size_sweep(64 * KiB, 64 * KiB, 1), std::vector<std::size_t>{64 * KiB});
}

TEST(PrimitiveSizes, SizesPerOctaveAreLogSpacedMultiplesOf16) {
  const std::vector<std::size_t> s = size_sweep(4 * KiB, 1 * MiB, 4);
  ASSERT_EQ(s.size(), 33u);  // 8 octaves x 4 + 1
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i] % kSizeGranule, 0u) << s[i];
    if (i % 4 == 0) {
      EXPECT_EQ(s[i], (4 * KiB) << (i / 4));  // octave points are exact
    }
    if (i > 0) {
      EXPECT_NEAR(std::log2(static_cast<double>(s[i]) / s[i - 1]), 0.25, 0.01) << s[i];
    }
  }
  EXPECT_EQ(size_sweep(4 * KiB, 8 * KiB, 2)[1], 5792u);  // 4096·√2 = 5792.6 -> 362·16
  // Near the 16-byte granule, rounding merges neighbours; the duplicates are dropped.
  EXPECT_EQ(size_sweep(16, 64, 4), (std::vector<std::size_t>{16, 32, 48, 64}));
}

TEST(PrimitiveSizes, BadRangesNameTheOptionAndAValidValue) {
  auto message = [](std::size_t lo, std::size_t hi, int k) {
    try {
      size_sweep(lo, hi, k);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(MiB, 4 * KiB, 1).find("swap"), std::string::npos);
  EXPECT_NE(message(4 * KiB, 100 * MiB, 1)
                .find("--max-size 100 MiB is not a power of two; use 64 MiB or 128 MiB"),
            std::string::npos)
      << message(4 * KiB, 100 * MiB, 1);
  EXPECT_NE(message(3 * KiB, MiB, 1).find("--min-size"), std::string::npos);
  EXPECT_NE(message(8, MiB, 1).find("16 B"), std::string::npos);
  EXPECT_NE(message(4 * KiB, MiB, 0).find("--sizes-per-octave"), std::string::npos);
  EXPECT_NE(message(4 * KiB, MiB, 17).find("--sizes-per-octave"), std::string::npos);
}

// ---- knees (the same hand values as tests/analysis/test_primitives.py) --------------------------

TEST(PrimitiveKnees, InterpolatedInLogSizeBetweenTheNeighboursOfTheLevel) {
  const std::vector<std::size_t> b = {4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB};
  const CurveSummary s = summarize_curve(b, times_for(b, {1, 2, 6, 8}));
  EXPECT_NEAR(s.peak_gbps, 8.0, 1e-12);
  EXPECT_EQ(s.peak_bytes, 32 * KiB);
  EXPECT_NEAR(s.knee50_bytes, std::exp2(13.5),
              1e-6);  // level 4: halfway from 8 KiB (2) to 16 KiB (6)
  EXPECT_NEAR(s.knee90_bytes, std::exp2(14.6),
              1e-6);  // level 7.2: 0.6 of the way from 16 to 32 KiB
  ASSERT_TRUE(s.latency_4k_us);
  EXPECT_NEAR(*s.latency_4k_us, 4.096, 1e-12);
}

TEST(PrimitiveKnees, FirstCrossingCountsAndTheSmallestSizeWhenAlreadyThere) {
  const std::vector<std::size_t> b = {4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB};
  const std::vector<double> bumpy = {1, 5, 3, 10};
  EXPECT_NEAR(knee_bytes(b, bumpy, 0.5), 8.0 * KiB, 1e-6);  // reaches 5 exactly at 8 KiB
  EXPECT_NEAR(knee_bytes(b, bumpy, 0.9), std::exp2(14.0 + 6.0 / 7.0), 1e-6);  // 3 -> 10 crosses 9
  EXPECT_EQ(knee_bytes(b, {9, 9.5, 10, 10}, 0.9), 4.0 * KiB);
  const CurveSummary s = summarize_curve({8 * KiB, 16 * KiB}, {1.0, 1.5});
  EXPECT_FALSE(s.latency_4k_us);  // 4 KiB was not measured
  EXPECT_THROW(summarize_curve({}, {}), std::invalid_argument);
}

// ---- registry ------------------------------------------------------------------------------

TEST(PrimitiveRegistry, EveryPrimitiveTheStrategiesAreBuiltOn) {
  std::vector<std::string> names;
  for (const auto& e : primitive_registry()) names.emplace_back(e.name);
  const std::vector<std::string> want = {
      "pageable-h2d",         "pinned-h2d",     "pinned-h2d-2streams",
      "pinned-d2h",           "sm-copy-mapped", "um-prefetch-h2d",
      "um-prefetch-resident", "um-fault-h2d",   "um-host-write"};
  EXPECT_EQ(names, want);
}

TEST(PrimitiveRegistry, FactoriesMakeAPrimitiveThatNamesItsClock) {
  std::set<std::string_view> seen;
  for (const auto& e : primitive_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    EXPECT_GT(e.description.size(), 30u) << e.name;
    auto p = e.make();  // constructing allocates nothing (prepare does)
    ASSERT_NE(p, nullptr) << e.name;
    const bool host_work = e.name == "pageable-h2d" || e.name == "um-host-write";
    EXPECT_EQ(p->timed_by(), host_work ? TimedBy::SteadyClock : TimedBy::CudaEvents) << e.name;
    EXPECT_NE(e.description.find(host_work ? "host clock" : "events"), std::string_view::npos)
        << e.name << ": the description says which clock times it: " << e.description;
  }
  EXPECT_EQ(find_primitive("um-fault-h2d")->make()->direction(), Direction::HostToDevice);
  EXPECT_EQ(find_primitive("um-host-write")->make()->direction(), Direction::DeviceToHost);
  EXPECT_EQ(find_primitive("um-prefetch-resident")->make()->direction(), Direction::None);
  EXPECT_EQ(find_primitive("nope"), nullptr);
}

TEST(PrimitiveRegistry, WaivedWithAReasonWhereTheDeviceLacksTheFeature) {
  DeviceCaps full;
  full.concurrent_managed_access = full.managed_memory = full.can_map_host_memory = true;
  const DeviceCaps none;
  for (const auto& e : primitive_registry()) {
    EXPECT_EQ(e.unsupported(full), "") << e.name;
    const bool needs_feature = e.name.substr(0, 3) == "um-" || e.name == "sm-copy-mapped";
    EXPECT_EQ(e.unsupported(none).empty(), !needs_feature) << e.name;
  }
  DeviceCaps no_concurrent = full;
  no_concurrent.concurrent_managed_access = false;
  EXPECT_NE(
      find_primitive("um-fault-h2d")->unsupported(no_concurrent).find("concurrentManagedAccess"),
      std::string::npos);
}

// ---- record -------------------------------------------------------------------------------

TEST(PrimitiveRecord, FollowsTheRunRecordConventionsWithEveryPointField) {
  PrimitivesArgs a;
  a.max_size = "8KiB";
  const PrimitivesConfig c = make_primitives_config(a);
  PrimitiveOutcome o;
  o.entry = find_primitive("pinned-h2d");
  o.run_id = "20261124T000000Z-00000000";
  o.started_at = "2026-11-24T00:00:00Z";
  for (const std::size_t b : c.sizes) {
    SizePoint p;
    p.bytes = b;
    p.samples_us = {2.0, 3.0, 4.0};
    p.us = spread_of(p.samples_us);
    p.gbps = gbps(b, p.us.median);
    p.verified_samples = 5;
    o.points.push_back(p);
  }
  o.summary = summarize_curve({4 * KiB, 8 * KiB}, {3.0, 3.0});
  o.self_check_skipped = "largest size 8 KiB is below 16 MiB";
  o.env_end = GpuState{1980, 3201, std::vector<std::string>{"sw_power_cap"}, 45, 420.5};
  const nlohmann::json env = {{"gpu_name", "test GPU"}};
  const std::vector<std::string> argv = {"memstrat", "primitives"};
  nlohmann::json r = primitive_record(o, c, 0, argv, env);
  for (const char* key : {"schema_version", "record", "run_id", "started_at", "status", "error",
                          "waived_reason", "argv", "env", "config", "primitive", "results",
                          "summary", "self_check", "env_end"})
    EXPECT_TRUE(r.contains(key)) << key;
  EXPECT_EQ(r["env_end"], o.env_end->to_json());
  EXPECT_EQ(r["env_end"]["clock_event_reasons"], nlohmann::json::array({"sw_power_cap"}));
  EXPECT_EQ(r["schema_version"], kPrimitiveSchemaVersion);
  EXPECT_EQ(r["record"], "primitive");
  EXPECT_EQ(r["status"], "ok");
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_EQ(r["config"]["primitive"], "pinned-h2d");
  EXPECT_EQ(r["config"]["sizes"], (std::vector<std::size_t>{4 * KiB, 8 * KiB}));
  EXPECT_EQ(r["primitive"]["timed_by"], "cuda-events");
  EXPECT_EQ(r["primitive"]["direction"], "host-to-device");
  ASSERT_EQ(r["results"].size(), 2u);
  const nlohmann::json& p = r["results"][1];
  EXPECT_EQ(p["bytes"], 8 * KiB);
  EXPECT_EQ(p["median_us"], 3.0);
  EXPECT_EQ(p["p25_us"], 2.5);
  EXPECT_EQ(p["p75_us"], 3.5);
  EXPECT_EQ(p["min_us"], 2.0);
  EXPECT_EQ(p["max_us"], 4.0);
  EXPECT_NEAR(p["gbps"].get<double>(), 8192 / 3e3, 1e-12);
  EXPECT_EQ(p["samples_us"].size(), 3u);
  EXPECT_EQ(p["verified_samples"], 5);
  EXPECT_EQ(r["summary"]["peak_bytes"], 8 * KiB);
  EXPECT_EQ(r["summary"]["latency_4k_us"], 3.0);
  EXPECT_TRUE(r["self_check"]["passed"].is_null());
  EXPECT_EQ(r["self_check"]["skipped"], o.self_check_skipped);

  o.status = "failed";  // a failed record keeps what was measured but claims no summary
  o.error = "CUDA error";
  r = primitive_record(o, c, 0, argv, env);
  EXPECT_EQ(r["error"], "CUDA error");
  EXPECT_TRUE(r["summary"].is_null());
  EXPECT_EQ(r["results"].size(), 2u);
  PrimitiveOutcome w;
  w.entry = find_primitive("um-fault-h2d");
  w.status = "waived";
  w.waived_reason = "no managed memory";
  r = primitive_record(w, c, 0, argv, env);
  EXPECT_EQ(r["waived_reason"], "no managed memory");
  EXPECT_TRUE(r["results"].empty());
  EXPECT_TRUE(r["self_check"].is_null());
  EXPECT_TRUE(r["env_end"].is_null());  // nothing ran: no end state to read
}

// ---- options -------------------------------------------------------------------------------

TEST(PrimitiveOptions, DefaultsAreEveryPrimitiveOverPowersOfTwo) {
  const Parsed p = parse({"primitives"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.command, Command::Primitives);
  const PrimitivesConfig c = make_primitives_config(p.req.primitives);
  EXPECT_EQ(c.primitives.size(), primitive_registry().size());
  EXPECT_EQ(c.sizes.size(), 17u);
  EXPECT_EQ(c.min_bytes, 4 * KiB);
  EXPECT_EQ(c.max_bytes, 256 * MiB);
  EXPECT_EQ(c.samples, 9);
  EXPECT_EQ(c.warmup, 2);
  EXPECT_FALSE(p.req.primitives.quiet);
}

TEST(PrimitiveOptions, PrimitivesRepeatedOrCommaSeparatedEachOnceInOrder) {
  const Parsed p = parse({"primitives",
                          "-p",
                          "pinned-d2h,pinned-h2d",
                          "--primitive",
                          "pinned-d2h",
                          "-p",
                          "um-host-write",
                          "--min-size",
                          "64K",
                          "--max-size",
                          "1MiB",
                          "--sizes-per-octave",
                          "2",
                          "-n",
                          "5",
                          "-w",
                          "0",
                          "--json",
                          "x.jsonl",
                          "-q",
                          "--device",
                          "1"});
  ASSERT_FALSE(p.code) << p.err;
  const PrimitivesConfig c = make_primitives_config(p.req.primitives);
  ASSERT_EQ(c.primitives.size(), 3u);
  EXPECT_EQ(c.primitives[0]->name, "pinned-d2h");
  EXPECT_EQ(c.primitives[1]->name, "pinned-h2d");
  EXPECT_EQ(c.primitives[2]->name, "um-host-write");
  EXPECT_EQ(c.sizes.size(), 9u);  // 4 octaves x 2 + 1
  EXPECT_EQ(c.samples, 5);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(p.req.primitives.json, "x.jsonl");
  EXPECT_TRUE(p.req.primitives.quiet);
  EXPECT_EQ(p.req.primitives.device, 1);
}

TEST(PrimitiveOptions, EachBadOptionIsAUsageErrorThatNamesIt) {
  struct Bad {
    std::vector<const char*> args;
    const char* says;
  };
  const std::vector<Bad> bad = {
      {{"primitives", "--primitive", "teleport"},
       "unknown primitive 'teleport'; choose from: pageable-h2d"},
      {{"primitives", "-p", "pinned-h2d,nope"}, "'nope'"},
      {{"primitives", "--min-size", "1MiB", "--max-size", "4KiB"}, "swap them"},
      {{"primitives", "--max-size", "100M"}, "--max-size 100 MiB is not a power of two"},
      {{"primitives", "--min-size", "3K"}, "--min-size 3 KiB is not a power of two"},
      {{"primitives", "--min-size", "8"}, "--min-size 8 B is below the smallest transfer"},
      {{"primitives", "--min-size", "lots"}, "--min-size: 'lots' is not a size"},
      {{"primitives", "--max-size", "4TiB"}, "--max-size: '4TiB' is not a size"},
      {{"primitives", "--sizes-per-octave", "0"}, "--sizes-per-octave 0"},
      {{"primitives", "--sizes-per-octave", "17"}, "--sizes-per-octave 17"},
      {{"primitives", "--samples", "0"}, "--samples 0 is out of range"},
      {{"primitives", "-n", "-3"}, "--samples -3"},
      {{"primitives", "--warmup", "-1"}, "--warmup -1"},
      {{"primitives", "--device", "-1"}, "--device -1"},
      {{"primitives", "--samples", "many"}, "many"},
      {{"primitives", "--no-such-option"}, "--no-such-option"},
  };
  for (const Bad& b : bad) {
    const Parsed p = parse(b.args);
    std::string joined;
    for (const char* a : b.args) joined += std::string(a) + " ";
    ASSERT_TRUE(p.code) << joined;
    EXPECT_EQ(*p.code, 2) << joined;
    EXPECT_NE(p.err.find(b.says), std::string::npos) << joined << "\n" << p.err;
  }
}

// ---- the binary ----------------------------------------------------------------------------

TEST(PrimitivesBinary, HelpAndListWorkWithoutAGpu) {
  Ran r = run_binary("primitives --help");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* opt : {"--primitive", "--min-size", "--max-size", "--sizes-per-octave",
                          "--samples", "--warmup", "--json", "--quiet", "--list", "--device"})
    EXPECT_NE(r.output.find(opt), std::string::npos) << opt;
  r = run_binary("primitives --list");
  EXPECT_EQ(r.code, 0) << r.output;
  int lines = 0;
  for (char c : r.output) lines += c == '\n';
  EXPECT_EQ(lines, static_cast<int>(primitive_registry().size())) << r.output;
  for (const auto& e : primitive_registry())
    EXPECT_NE(r.output.find(std::string(e.name) + " "), std::string::npos) << e.name;
}

TEST(PrimitivesBinary, BadOptionsExit2BeforeAnyDeviceWork) {
  // On a GPU-less machine device work would end in exit 3: a 2 shows validation came first.
  for (const char* args : {"primitives --min-size 1M --max-size 4K", "primitives -p teleport",
                           "primitives --samples 0", "primitives --max-size 100M",
                           "primitives --json /nonexistent-dir/memstrat/p.jsonl"}) {
    const Ran r = run_binary(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("memstrat: "), std::string::npos) << r.output;
  }
}

TEST(PrimitivesBinary, NoGpuIsExit3WithAMessage) {
  std::string reason;
  if (cuda_device_available(&reason))
    GTEST_SKIP() << "a GPU is present; this test is for GPU-less machines";
  const Ran r = run_binary("primitives -p pinned-h2d --max-size 64K");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("`primitives` needs an NVIDIA GPU"), std::string::npos) << r.output;
}
