// rank_spawn.h: memstrat as its own launcher. `train --gpus N --processes per-gpu` started by no
// launcher (no rank variable of process_rank.h in its environment) starts N copies of itself on
// this host, one per GPU, with the same arguments and MEMSTRAT_RANK, MEMSTRAT_WORLD_SIZE,
// MEMSTRAT_LOCAL_RANK and NCCL_COMM_ID=127.0.0.1:<a free port> added to its environment, and
// waits for them: what torchrun --nproc-per-node N does, without torchrun. The parent touches no
// GPU (it forks before any CUDA call); rank 0 prints and writes the outputs as under any
// launcher. When a rank fails, the others are stopped (SIGTERM, then SIGKILL after a grace), as
// a rank left waiting in NCCL's bootstrap for a peer that is gone would never end; a rank also
// ends when its parent does (PR_SET_PDEATHSIG). Several hosts need a launcher (srun, mpirun).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace memstrat {

/// A TCP port on 127.0.0.1 that was free when asked (bound to port 0, read, released).
int free_local_port();

/// Runs `exe` with arguments `args` (args[0] is its name) `ranks` times at once, rank r with the
/// MEMSTRAT_* rank variables and NCCL_COMM_ID = 127.0.0.1:`port` added, and waits for all of
/// them. Returns 0 when every rank exits 0; else the first failure's exit status (128 + the
/// signal for a rank killed by one), after stopping the others (SIGTERM, SIGKILL after
/// `grace_s` seconds) and saying which rank failed on `err`.
int spawn_ranks(const std::string& exe, const std::vector<std::string>& args, int ranks, int port,
                std::ostream& err, double grace_s = 10.0);

}  // namespace memstrat
