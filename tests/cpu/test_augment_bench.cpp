// augment_bench (experiments/tools/): finds the data as memstrat does and nowhere else, and
// answers bad input with exit 2 and a message.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_support.h"

using namespace memstrat::testing;

namespace {
// Built beside memstrat (CMakeLists.txt puts both in the build directory).
std::string bench() {
  return (std::filesystem::path(MEMSTRAT_BINARY).parent_path() / "augment_bench").string();
}
Ran run_bench(const std::string& args) {
  return run_command(bench() + " " + args);
}
}  // namespace

TEST(AugmentBench, LooksForTheDataWhereMemstratDoes) {
  ASSERT_TRUE(std::filesystem::exists(bench())) << bench() << " is not built";
  const Ran r = run_bench("--help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("$MEMSTRAT_DATA, then data/mnist"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("shared"), std::string::npos) << r.output;
}

TEST(AugmentBench, BadInputIsAUsageError) {
  Ran r = run_bench("--data /nonexistent/memstrat-data");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/memstrat-data"), std::string::npos) << r.output;
  r = run_command("MEMSTRAT_DATA=/nonexistent/memstrat-env " + bench());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/memstrat-env"), std::string::npos) << r.output;
  r = run_bench("--batch 0");
  EXPECT_EQ(r.code, 2) << r.output;
}
