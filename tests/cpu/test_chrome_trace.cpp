// test_chrome_trace.cpp: ChromeTrace writes files that parse and pass validate_trace_events();
// the validator catches each kind of format error; trace_overlap_us measures overlap.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "common/profiler/chrome_trace.h"
#include "tests/support/trace_checks.h"

namespace memstrat {
namespace {

using nlohmann::json;

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + stem + "_" + std::to_string(::getpid()) + ".json";
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  for (const auto& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

ChromeTrace sample_trace() {
  ChromeTrace t;
  t.set_process_name(1, "host");
  t.set_process_sort_index(1, 0);
  t.set_thread_name(1, 42, "thread 42 - NVTX");
  t.set_thread_sort_index(1, 42, 1);
  t.set_process_name(10, "GPU 0");
  t.set_thread_name(10, 700, "stream 7");
  t.add_complete("epoch 1", "epoch", 1, 42, 0.0, 1000.0, {{"domain", "memstrat"}});
  t.add_complete("batch 0", "batch", 1, 42, 10.0, 100.0);   // nested in epoch 1
  t.add_complete("forward", "forward", 1, 42, 20.0, 30.0);  // nested in batch 0
  t.add_complete("batch 1", "batch", 1, 42, 110.0, 100.0);  // after batch 0
  t.add_complete("Memcpy HtoD", "memcpy", 10, 700, 5.5, 20.25,
                 {{"bytes", 200704}, {"kind", "HtoD"}});
  t.add_complete("gemm", "kernel", 10, 700, 30.0, 12.0);
  t.add_instant("mark", "nvtx", 1, 42, 500.0);
  t.add_counter("UM GPU page faults per 100 us", 10, 0.0, {{"faults", 12}});
  t.add_counter("UM GPU page faults per 100 us", 10, 100.0, {{"faults", 0}});
  t.set_other_data({{"memstrat", {{"notes", json::array({"a note"})}}}});
  return t;
}

TEST(ChromeTrace, WrittenFileParsesAndValidates) {
  ChromeTrace t = sample_trace();
  const std::string path = temp_path("trace_ok");
  t.write(path);
  json j = read_json(path);
  std::remove(path.c_str());

  EXPECT_TRUE(validate_trace_events(j).empty()) << joined(validate_trace_events(j));
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  EXPECT_EQ(j["otherData"]["memstrat"]["notes"][0], "a note");
  const json& ev = j["traceEvents"];
  EXPECT_EQ(ev.size(), t.size());

  // Metadata comes first; every event carries ph, name, pid, tid; ts except on "M".
  bool seen_non_meta = false;
  int complete = 0;
  for (const auto& e : ev) {
    for (const char* key : {"ph", "name", "pid", "tid"}) EXPECT_TRUE(e.contains(key)) << e;
    if (e["ph"] == "M") {
      EXPECT_FALSE(seen_non_meta) << "metadata after events: " << e;
      EXPECT_TRUE(e["args"].is_object());
    } else {
      seen_non_meta = true;
      EXPECT_TRUE(e["ts"].is_number()) << e;
    }
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(complete, 6);

  // Values survive: fractional microseconds, args.
  bool found = false;
  for (const auto& e : ev) {
    if (e["name"] == "Memcpy HtoD") {
      found = true;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 5.5);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 20.25);
      EXPECT_EQ(e["cat"], "memcpy");
      EXPECT_EQ(e["args"]["bytes"], 200704);
    }
  }
  EXPECT_TRUE(found);
}

TEST(ChromeTrace, ToJsonMatchesTheWrittenFile) {
  ChromeTrace t = sample_trace();
  json in_memory = t.to_json();
  EXPECT_TRUE(validate_trace_events(in_memory).empty()) << joined(validate_trace_events(in_memory));
  EXPECT_EQ(in_memory["traceEvents"].size(), t.size());
}

TEST(ChromeTrace, RejectsNonFiniteAndNegativeValues) {
  ChromeTrace t;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  t.add_complete("a", "c", 1, 1, nan, 1.0);
  t.add_complete("b", "c", 1, 1, 1.0, inf);
  t.add_complete("c", "c", 1, 1, 1.0, -1.0);
  t.add_instant("d", "c", 1, 1, inf);
  t.add_instant("e", "c", 1, 1, 1.0, nullptr, 'x');  // bad scope
  t.add_counter("f", 1, 1.0, {{"v", "not a number"}});
  t.add_counter("g", 1, 1.0, json::object());
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.rejected(), 7u);
  t.add_complete("ok", "c", 1, 1, 0.0, 0.0);  // zero duration is fine
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(validate_trace_events(t.to_json()).empty());
}

TEST(ChromeTrace, LargeTraceRoundTrips) {
  ChromeTrace t;
  t.set_process_name(10, "GPU 0");
  for (int i = 0; i < 100000; ++i)
    t.add_complete("kernel " + std::to_string(i % 17), "kernel", 10, 700, i * 10.0, 9.5,
                   {{"i", i}});
  const std::string path = temp_path("trace_large");
  t.write(path);
  json j = read_json(path);
  std::remove(path.c_str());
  EXPECT_EQ(j["traceEvents"].size(), 100001u);
  EXPECT_TRUE(validate_trace_events(j).empty());
}

TEST(ChromeTrace, InvalidUtf8InNamesDoesNotBreakTheFile) {
  ChromeTrace t;
  t.add_complete(std::string("bad \xff name"), "nvtx", 1, 1, 0.0, 1.0);
  const std::string path = temp_path("trace_utf8");
  t.write(path);
  json j = read_json(path);
  std::remove(path.c_str());
  EXPECT_TRUE(validate_trace_events(j).empty());
}

TEST(ChromeTrace, UnwritablePathThrows) {
  ChromeTrace t;
  EXPECT_THROW(t.write("/nonexistent-dir-memstrat/x/trace.json"), std::runtime_error);
}

// ----------------------------------------------------------------------------------------------
// The validator
// ----------------------------------------------------------------------------------------------

json wrap(json events) { return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}; }

json x_event(double ts, double dur, int tid = 1) {
  return {{"ph", "X"}, {"name", "s"}, {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
}

TEST(ValidateTraceEvents, AcceptsTheJsonArrayFormToo) {
  EXPECT_TRUE(validate_trace_events(json::array({x_event(0, 1)})).empty());
  EXPECT_TRUE(validate_trace_events(wrap(json::array())).empty());
}

TEST(ValidateTraceEvents, RejectsBadContainers) {
  EXPECT_FALSE(validate_trace_events(json(42)).empty());
  EXPECT_FALSE(validate_trace_events(json{{"events", json::array()}}).empty());
  EXPECT_FALSE(validate_trace_events(json{{"traceEvents", 3}}).empty());
  EXPECT_FALSE(validate_trace_events(json{{"traceEvents", json::array()}, {"displayTimeUnit", "s"}})
                   .empty());
}

TEST(ValidateTraceEvents, CatchesMissingOrWrongKeys) {
  auto check = [](json ev, const std::string& expect) {
    auto p = validate_trace_events(wrap(json::array({ev})));
    EXPECT_TRUE(mentions(p, expect)) << "event " << ev << " problems:\n" << joined(p);
  };
  check({{"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0}}, "\"ph\"");
  check({{"ph", "Q"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0}}, "unknown phase");
  check({{"ph", "X"}, {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", 1}}, "\"name\"");
  check({{"ph", "X"}, {"name", "a"}, {"tid", 1}, {"ts", 0}, {"dur", 1}}, "\"pid\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"ts", 0}, {"dur", 1}}, "\"tid\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1.5}, {"tid", 1}, {"ts", 0}, {"dur", 1}}, "\"pid\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"dur", 1}}, "\"ts\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", "12"}, {"dur", 1}}, "\"ts\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", nullptr}, {"dur", 1}},
        "\"ts\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0}}, "\"dur\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", -2}}, "\"dur\"");
  check({{"ph", "X"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", 1}, {"args", 3}},
        "\"args\"");
  check({{"ph", "i"}, {"name", "a"}, {"pid", 1}, {"tid", 1}, {"ts", 0}, {"s", "x"}}, "scope");
  check({{"ph", "C"}, {"name", "a"}, {"pid", 1}, {"ts", 0}}, "\"C\"");
  check({{"ph", "C"}, {"name", "a"}, {"pid", 1}, {"ts", 0}, {"args", {{"v", "x"}}}},
        "not a number");
  check({{"ph", "M"}, {"name", "thread_colour"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "x"}}}},
        "unknown metadata");
  check({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 1}}, "args.name");
  check({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"args", {{"name", "x"}}}}, "\"tid\"");
  check({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", 1}, {"args", {{"sort_index", "a"}}}},
        "sort_index");
  check(json(5), "not an object");
}

TEST(ValidateTraceEvents, MetadataNeedsNoTimestamp) {
  json ev = {{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "host"}}}};
  EXPECT_TRUE(validate_trace_events(wrap(json::array({ev}))).empty());
}

TEST(ValidateTraceEvents, ChecksBeginEndBalance) {
  json b = {{"ph", "B"}, {"name", "r"}, {"pid", 1}, {"tid", 1}, {"ts", 0}};
  json e = {{"ph", "E"}, {"pid", 1}, {"tid", 1}, {"ts", 5}};
  EXPECT_TRUE(validate_trace_events(wrap(json::array({b, e}))).empty());
  EXPECT_TRUE(mentions(validate_trace_events(wrap(json::array({e}))), "without a matching"));
  EXPECT_TRUE(mentions(validate_trace_events(wrap(json::array({b}))), "never ended"));
}

TEST(ValidateTraceEvents, SlicesOnOneTrackMustNestOrBeDisjoint) {
  // nested and disjoint: fine; touching ends: fine
  EXPECT_TRUE(
      validate_trace_events(wrap(json::array({x_event(0, 100), x_event(10, 20), x_event(30, 70),
                                              x_event(100, 5), x_event(30, 10)})))
          .empty());
  // partial overlap on the same track: reported
  auto p = validate_trace_events(wrap(json::array({x_event(0, 100), x_event(50, 100)})));
  EXPECT_TRUE(mentions(p, "partially overlaps")) << joined(p);
  // the same overlap on two tracks: fine
  EXPECT_TRUE(
      validate_trace_events(wrap(json::array({x_event(0, 100, 1), x_event(50, 100, 2)}))).empty());
}

TEST(ValidateTraceEvents, CapsTheNumberOfMessages) {
  json events = json::array();
  for (int i = 0; i < 200; ++i) events.push_back({{"ph", "X"}, {"name", "a"}});
  auto p = validate_trace_events(wrap(events));
  EXPECT_LE(p.size(), 51u);
  EXPECT_TRUE(mentions(p, "more problems"));
}

// ----------------------------------------------------------------------------------------------
// Overlap
// ----------------------------------------------------------------------------------------------

json cat_event(const char* cat, double ts, double dur, int tid) {
  json e = x_event(ts, dur, tid);
  e["cat"] = cat;
  return e;
}

TEST(TraceOverlap, MeasuresCopyComputeOverlap) {
  // copies [0,10) and [20,30) on a copy stream; kernels [5,25) on the compute stream:
  // overlap = [5,10) + [20,25) = 10 us
  json t = wrap(json::array({cat_event("memcpy", 0, 10, 1), cat_event("memcpy", 20, 10, 1),
                             cat_event("kernel", 5, 20, 2)}));
  EXPECT_DOUBLE_EQ(trace_overlap_us(t, "memcpy", "kernel"), 10.0);
  EXPECT_DOUBLE_EQ(trace_overlap_us(t, "kernel", "memcpy"), 10.0);
}

TEST(TraceOverlap, SerialisedWorkHasNone) {
  json t = wrap(json::array({cat_event("memcpy", 0, 10, 1), cat_event("kernel", 10, 10, 1),
                             cat_event("memcpy", 20, 10, 1), cat_event("kernel", 30, 5, 1)}));
  EXPECT_DOUBLE_EQ(trace_overlap_us(t, "memcpy", "kernel"), 0.0);
  EXPECT_DOUBLE_EQ(trace_overlap_us(json::array(), "memcpy", "kernel"), 0.0);
}

TEST(TraceOverlap, OverlappingEventsOfOneCategoryCountOnce) {
  json t = wrap(json::array({cat_event("memcpy", 0, 10, 1), cat_event("memcpy", 0, 10, 2),
                             cat_event("kernel", 0, 10, 3), cat_event("kernel", 2, 4, 4)}));
  EXPECT_DOUBLE_EQ(trace_overlap_us(t, "memcpy", "kernel"), 10.0);
}

}  // namespace
}  // namespace memstrat
