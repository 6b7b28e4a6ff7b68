// test_rank_spawn.cpp: memstrat as its own launcher (experiments/cli/rank_spawn.h), with a shell
// standing in for memstrat: every rank gets its variables and the one NCCL_COMM_ID, the parent
// waits for all of them, and a failing rank stops the others and gives the exit status. No GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/rank_spawn.h"

namespace memstrat {
namespace {

std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

TEST(RankSpawn, EveryRankGetsItsVariablesAndTheOneCommId) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "rank_spawn";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ostringstream err;
  const int code = spawn_ranks(
      "/bin/sh",
      sh("echo $MEMSTRAT_RANK $MEMSTRAT_WORLD_SIZE $MEMSTRAT_LOCAL_RANK $NCCL_COMM_ID > " +
         dir.string() + "/rank$MEMSTRAT_RANK"),
      3, 29711, err);
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_EQ(err.str(), "");
  for (int r = 0; r < 3; ++r) {
    std::ifstream f(dir / ("rank" + std::to_string(r)));
    std::string line;
    ASSERT_TRUE(std::getline(f, line)) << "rank " << r << " did not run";
    EXPECT_EQ(line, std::to_string(r) + " 3 " + std::to_string(r) + " 127.0.0.1:29711");
  }
}

TEST(RankSpawn, AFailingRankStopsTheOthersAndGivesItsStatus) {
  std::ostringstream err;
  const auto t0 = std::chrono::steady_clock::now();
  // Rank 1 fails at once; ranks 0 and 2 would wait a minute (as ranks waiting for a peer in
  // NCCL's bootstrap would wait for ever).
  const int code = spawn_ranks(
      "/bin/sh", sh("if [ \"$MEMSTRAT_RANK\" = 1 ]; then exit 5; fi; exec sleep 60"), 3, 1, err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(code, 5);
  EXPECT_NE(err.str().find("rank 1 of 3 ended with exit status 5; stopping the other ranks"),
            std::string::npos)
      << err.str();
  EXPECT_LT(s, 20.0) << "the other ranks were not stopped";
}

TEST(RankSpawn, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  std::ostringstream err;
  const auto t0 = std::chrono::steady_clock::now();
  const int code = spawn_ranks(
      "/bin/sh",
      // the shell ignores SIGTERM; its sleep, orphaned by the SIGKILL, holds no output open
      sh("if [ \"$MEMSTRAT_RANK\" = 0 ]; then exit 3; fi; trap '' TERM; "
         "sleep 60 </dev/null >/dev/null 2>&1 & wait; wait"),
      2,
      1, err, /*grace_s=*/0.5);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(code, 3) << err.str();
  EXPECT_LT(s, 20.0);
}

TEST(RankSpawn, SignalsAndExecFailuresAreFailures) {
  std::ostringstream err;
  EXPECT_EQ(spawn_ranks("/bin/sh", sh("kill -9 $$"), 1, 1, err), 128 + 9);
  EXPECT_EQ(spawn_ranks("/nonexistent/memstrat", {"memstrat"}, 2, 1, err), 127);
  EXPECT_THROW(spawn_ranks("/bin/sh", {}, 2, 1, err), std::invalid_argument);
  EXPECT_THROW(spawn_ranks("/bin/sh", sh("true"), 0, 1, err), std::invalid_argument);
}

TEST(RankSpawn, AFreePortIsAPort) {
  const int p = free_local_port();
  EXPECT_GT(p, 0);
  EXPECT_LT(p, 65536);
}

}  // namespace
}  // namespace memstrat
