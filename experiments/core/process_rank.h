// process_rank.h: where this process stands in a data-parallel run started by a launcher, one
// process per GPU (--processes per-gpu): its rank, the number of processes, and its rank among
// the processes of its host, read from the environment the launcher sets. No rendezvous of our
// own: NCCL's bootstrap connects the ranks at NCCL_COMM_ID (host:port where rank 0's NCCL
// listens; every process must be given the same one), the contract NCCL documents for
// ncclGetUniqueId. Launchers understood, in this order:
//   memstrat itself (rank_spawn.h):                    MEMSTRAT_RANK, _WORLD_SIZE, _LOCAL_RANK;
//   torchrun (and any launcher following its contract): RANK, WORLD_SIZE, LOCAL_RANK;
//   Open MPI's mpirun:                                  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK;
//   Slurm's srun:                                       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
//   MPICH / Intel MPI (PMI):                            PMI_RANK, PMI_SIZE, MPI_LOCALRANKID.
// Pure functions of the environment passed in: tested on the CPU.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace memstrat {

struct ProcessRank {
  int rank = 0;        // this process's rank, 0 .. world - 1: its shard of each global batch
  int world = 1;       // the number of processes (= --gpus)
  int local_rank = 0;  // its rank among the processes of its host: which of the host's GPUs
  // The variables it came from, e.g. "torchrun (RANK, WORLD_SIZE, LOCAL_RANK)".
  std::string launcher;
  std::string comm_id;   // NCCL_COMM_ID
};

/// Reads a variable: nullptr when it is not set (std::getenv's contract).
using EnvReader = std::function<const char*(const char*)>;

/// The rank of this process from the first launcher whose rank variable is set. Throws
/// std::invalid_argument, saying what to set, when none is, when a value is not a whole number
/// in range (0 <= rank < world, 0 <= local_rank), or when NCCL_COMM_ID is unset or not
/// host:port.
ProcessRank process_rank_from(const EnvReader& env);
/// process_rank_from(std::getenv).
ProcessRank process_rank_from_environment();
/// Whether any launcher's rank variable is set: a process of a launched run (else, under
/// --processes per-gpu, memstrat starts the ranks itself: rank_spawn.h).
bool launcher_rank_set(const EnvReader& env);

/// The GPU of a process with local rank `local_rank` when it sees `visible` CUDA devices from
/// --device `first`: first + local_rank where it sees every GPU of its host, `first` where the
/// launcher gave it one GPU of its own (CUDA_VISIBLE_DEVICES per process: it sees exactly one).
/// Throws std::invalid_argument when neither holds.
int process_device(int first, int local_rank, int visible);

}  // namespace memstrat
