// augment_bench (experiments/tools/): finds the data as memstrat does and nowhere else, and
// answers bad input with exit 2 and a message.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "cli_test_support.h"
#include "tests/support/mnist_test_data.h"

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

// With no --data and no $MEMSTRAT_DATA, augment_bench reads data/mnist below the working
// directory and nothing else: a valid MNIST at ../shared/data/mnist (where a developer's
// checkout keeps one) is not found, one at ./data/mnist is.
TEST(AugmentBench, NeverFallsBackToASharedFolderBesideTheCheckout) {
  MEMSTRAT_REQUIRE_MNIST();
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() /
                        ("memstrat-augment-bench-" + std::to_string(::getpid()));
  fs::remove_all(base);
  const fs::path work = base / "work", shared = base / "shared" / "data" / "mnist";
  fs::create_directories(work);
  fs::create_directories(shared);
  for (const auto& f : fs::directory_iterator(memstrat::testing::mnist_dir()))
    fs::create_symlink(fs::absolute(f.path()), shared / f.path().filename());
  const std::string cmd = "cd '" + work.string() + "' && env -u MEMSTRAT_DATA " + bench() +
                          " --batches 1 --reps 1 --workers 1";
  Ran r = run_command(cmd);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("data/mnist"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("shared"), std::string::npos) << r.output;
  fs::create_directories(work / "data");
  fs::create_directory_symlink(shared, work / "data" / "mnist");
  r = run_command(cmd);
  EXPECT_EQ(r.code, 0) << r.output;
  fs::remove_all(base);
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
