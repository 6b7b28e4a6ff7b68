// Results-record helpers: statistics, run ids, atomic JSON Lines append.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

#include "common/run_record.h"

using namespace memstrat;

TEST(RunRecord, SpreadOfKnownValues) {
  const Spread s = spread_of({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p25, 2);
  EXPECT_DOUBLE_EQ(s.p75, 4);
  const Spread e = spread_of({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(e.median, 2.5);
  EXPECT_DOUBLE_EQ(e.p25, 1.75);
  const Spread z = spread_of({});
  EXPECT_DOUBLE_EQ(z.median, 0);
}

TEST(RunRecord, RunIdsAreUniqueAndSortable) {
  const std::string a = make_run_id(), b = make_run_id();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), std::string("20261121T233012Z-4f3a9c1e").size()) << a;
  EXPECT_EQ(a[8], 'T');
  const std::string t = iso_utc_now();
  EXPECT_EQ(t.size(), 20u) << t;
  EXPECT_EQ(t.back(), 'Z');
}

TEST(RunRecord, AppendWritesWholeLinesEvenFromConcurrentWriters) {
  char tmpl[] = "/tmp/memstrat_rec_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        nlohmann::json j = {{"schema_version", kSchemaVersion}, {"t", t}, {"i", i},
                            {"pad", std::string(5000, 'x')}};
        append_jsonl(path, j);
      }
    });
  for (auto& th : ts) th.join();
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);  // throws on a torn line
    EXPECT_EQ(j["schema_version"], kSchemaVersion);
    ++n;
  }
  EXPECT_EQ(n, 100);
  std::remove(path.c_str());
}

TEST(RunRecord, AppendToAnUnwritablePathThrowsWithThePath) {
  try {
    append_jsonl("/nonexistent-dir/x.jsonl", {{"a", 1}});
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.jsonl"), std::string::npos);
  }
}

TEST(RunRecord, HostEnvironmentNeedsNoGpu) {
  const Environment env = host_environment();
  EXPECT_FALSE(env.host.empty());
  EXPECT_FALSE(env.git_sha.empty());
  EXPECT_FALSE(env.gpu.has_value());
  const auto j = env.to_json();
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"boot_id", "cpu_affinity", "cpu_affinity_count",
                                            "cpu_count", "cpu_model", "git_dirty", "git_sha",
                                            "host", "host_memory_bytes", "memstrat_version"}))
      << j.dump();
  EXPECT_TRUE(j["git_dirty"].is_boolean());
  // Linux always tells these; a null here would be a broken reader, not a platform gap.
  EXPECT_GT(j["cpu_count"].get<int>(), 0);
  EXPECT_GT(j["host_memory_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_GE(j["cpu_count"].get<int>(), j["cpu_affinity_count"].get<int>());
  EXPECT_FALSE(j["cpu_affinity"].get<std::string>().empty());
}

TEST(RunRecord, GpuEnvironmentFlattensIntoEnvWithNullsForWhatIsMissing) {
  Environment env = host_environment();
  GpuEnvironment& g = env.gpu.emplace();
  g.name = "NVIDIA H200";
  g.pcie_gen = 5;
  const auto j = env.to_json();
  EXPECT_EQ(j["gpu_name"], "NVIDIA H200");
  EXPECT_EQ(j["pcie_gen"], 5);
  EXPECT_TRUE(j["pcie_width"].is_null());
  EXPECT_TRUE(j["driver_release"].is_null());
  // Host 10 + CUDA 14 + NVML/sysfs 12; what nothing measured is null (gpu_uuid too: not set).
  EXPECT_EQ(j.size(), 36u) << j.dump();
  for (const char* k : {"gpu_uuid", "sm_clock_mhz", "mem_clock_mhz", "clock_event_reasons", "temperature_c",
                        "power_w", "sm_clock_max_mhz", "mem_clock_max_mhz", "pcie_max_gen",
                        "pcie_max_width", "persistence_mode", "gpu_numa_node", "nvml_note"})
    EXPECT_TRUE(j.contains(k) && j[k].is_null()) << k;
}

TEST(RunRecord, Utf8IsTheRecordWritersRule) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("cell-1 \xc3\xa9\xe2\x82\xac"));  // é, €
  EXPECT_FALSE(is_utf8("\xff"));
  EXPECT_FALSE(is_utf8("runs/\xc3"));  // cut in the middle of a character
}

// A string that is not UTF-8 (argv, a path, an error message) must not cost a finished run its
// record: the bytes become U+FFFD and the line is written.
TEST(RunRecord, AppendKeepsARecordWithBytesThatAreNotUtf8) {
  char tmpl[] = "/tmp/memstrat_rec_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  const nlohmann::json rec = {{"argv", {"memstrat", "--run-tag", "a\xff" "b"}},
                              {"config", {{"dataset", {{"path", "/data/\xfe"}}}}}};
  ASSERT_NO_THROW(append_jsonl(path, rec));
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["argv"][2], "a\xef\xbf\xbd" "b");  // U+FFFD
  EXPECT_EQ(j["config"]["dataset"]["path"], "/data/\xef\xbf\xbd");
  std::remove(path.c_str());
}

TEST(RunRecord, AppendToAFullDeviceThrows) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full here";
  EXPECT_THROW(append_jsonl("/dev/full", {{"a", 1}}), std::runtime_error);
}
