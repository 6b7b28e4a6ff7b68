// test_process_rank.cpp: where a process of --processes per-gpu stands, read from the launcher's
// environment (experiments/core/process_rank.h): each launcher's variables, the order they are
// tried in, every malformed value refused with what to set, and the GPU a local rank takes.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "experiments/core/process_rank.h"

namespace memstrat {
namespace {

EnvReader env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* n) -> const char* {
    const auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string refusal(std::map<std::string, std::string> vars) {
  try {
    process_rank_from(env_of(std::move(vars)));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ProcessRank, EachLauncherSContract) {
  const std::string id = "node7:29600";
  const ProcessRank t = process_rank_from(
      env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"NCCL_COMM_ID", id}}));
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world, 4);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.comm_id, id);
  EXPECT_NE(t.launcher.find("torchrun"), std::string::npos);
  const ProcessRank o = process_rank_from(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                                  {"OMPI_COMM_WORLD_SIZE", "2"},
                                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                  {"NCCL_COMM_ID", id}}));
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world, 2);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_NE(o.launcher.find("Open MPI"), std::string::npos);
  const ProcessRank s = process_rank_from(env_of({{"SLURM_PROCID", "0"},
                                                  {"SLURM_NTASKS", "8"},
                                                  {"SLURM_LOCALID", "0"},
                                                  {"NCCL_COMM_ID", id}}));
  EXPECT_EQ(s.world, 8);
  EXPECT_NE(s.launcher.find("Slurm"), std::string::npos);
  const ProcessRank m = process_rank_from(
      env_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"NCCL_COMM_ID", "[::1]:29600"}}));
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.local_rank, 0) << "no local rank variable: one process on its host";
}

TEST(ProcessRank, TorchrunSVariablesWinOverASlurmAllocationAround) {
  // torchrun started inside an srun allocation: the processes are torchrun's.
  const ProcessRank p = process_rank_from(env_of({{"RANK", "1"},
                                                  {"WORLD_SIZE", "2"},
                                                  {"LOCAL_RANK", "1"},
                                                  {"SLURM_PROCID", "0"},
                                                  {"SLURM_NTASKS", "1"},
                                                  {"NCCL_COMM_ID", "h:1"}}));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world, 2);
}

// memstrat's own ranks (rank_spawn.h) come first: a memstrat started by torchrun that starts its
// ranks itself has children with both sets, and they are memstrat's.
TEST(ProcessRank, MemstratsOwnRanksWinAndAnyRankVariableMeansALauncher) {
  const ProcessRank p = process_rank_from(env_of({{"MEMSTRAT_RANK", "1"},
                                                  {"MEMSTRAT_WORLD_SIZE", "3"},
                                                  {"MEMSTRAT_LOCAL_RANK", "1"},
                                                  {"RANK", "0"},
                                                  {"WORLD_SIZE", "1"},
                                                  {"NCCL_COMM_ID", "127.0.0.1:40000"}}));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world, 3);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_NE(p.launcher.find("memstrat (MEMSTRAT_RANK"), std::string::npos) << p.launcher;
  EXPECT_FALSE(launcher_rank_set(env_of({{"WORLD_SIZE", "2"}, {"NCCL_COMM_ID", "h:1"}})));
  for (const char* v : {"MEMSTRAT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"})
    EXPECT_TRUE(launcher_rank_set(env_of({{v, "0"}}))) << v;
}

TEST(ProcessRank, MalformedEnvironmentsAreRefusedWithWhatToSet) {
  EXPECT_NE(refusal({}).find("no launcher's rank"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"NCCL_COMM_ID", "h:1"}}).find("WORLD_SIZE is not"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"NCCL_COMM_ID", "h:1"}})
                .find("is not below"),
            std::string::npos);
  for (const char* bad : {"", "x", "1.5", "-1", "1 "})
    EXPECT_NE(refusal({{"RANK", bad}, {"WORLD_SIZE", "2"}, {"NCCL_COMM_ID", "h:1"}})
                  .find("not a whole number"),
              std::string::npos)
        << "RANK='" << bad << "'";
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"NCCL_COMM_ID", "h:1"}})
                .find("not a whole number >= 1"),
            std::string::npos);
  for (const char* id : {"", "host", ":29600", "host:", "host:port"})
    EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"NCCL_COMM_ID", id}}).find(
                  id[0] == '\0' || std::string(id) == "host" || std::string(id) == ":29600" ||
                          std::string(id) == "host:"
                      ? "NCCL_COMM_ID=HOST:PORT"
                      : "port of NCCL_COMM_ID"),
              std::string::npos)
        << "NCCL_COMM_ID='" << id << "'";
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("NCCL_COMM_ID=HOST:PORT"),
            std::string::npos);
}

TEST(ProcessRank, ALocalRankTakesItsGpuOrTheOneItWasGiven) {
  EXPECT_EQ(process_device(0, 1, 2), 1);  // sees the host's GPUs
  EXPECT_EQ(process_device(2, 1, 4), 3);  // from --device 2
  EXPECT_EQ(process_device(0, 3, 1), 0);  // CUDA_VISIBLE_DEVICES gave it one GPU
  EXPECT_THROW(process_device(0, 2, 2), std::invalid_argument);
  EXPECT_THROW(process_device(1, 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace memstrat
