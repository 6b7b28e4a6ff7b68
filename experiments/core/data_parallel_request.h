// data_parallel_request.h: which data-parallel requests (--gpus N, --emulate-gpus N, --reduce)
// can run, judged from the RunConfig alone, before any device work: the CLI refuses the others
// with exit 2 and Session again (tests build runs without the CLI). What needs a device (are
// there N GPUs?) is checked by Session.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "experiments/core/run_config.h"
#include "experiments/core/step_choice.h"  // kDataParallelStepReason

namespace memstrat {

/// The most shards (--gpus, --emulate-gpus) a run takes: the GPUs of one host.
inline constexpr int kMaxShards = 8;

/// The strategies --gpus N > 1 runs: every strategy of the registry, each GPU its own instance
/// serving its shard (StrategyOptions::shard) with its GPU current.
bool runs_on_several_gpus(std::string_view strategy);

/// The scenarios in which `strategy` runs with --gpus N > 1 (`memstrat describe`'s
/// several_gpus): static, refresh and stream (host workers: each GPU's strategy runs its own
/// producers over its shard) for the strategies runs_on_several_gpus names, where the registry
/// runs them (the peer-fanout forms: static only; stream needs host workers, so not resident's
/// GPU gather), none for the others. A shard served as its own epoch takes the whole epoch's
/// order and augmentation keys (EpochRows::whole_row).
std::vector<Scenario> several_gpu_scenarios(std::string_view strategy);

/// "" when `c` can run; else what is wrong and what to do. Single-GPU runs (shards() == 1) are
/// always "". Refused besides --fused lt (kDataParallelStepReason) and the one-launch forms:
/// --device-budget with any N > 1 (its hold sits between one Mlp's and one strategy's
/// allocations); with --gpus N > 1, --replicate K > 1 (each GPU's strategy keeps a host copy)
/// the stream scenario's GPU gather (--augment none) and --augment-device gpu; with
/// --processes per-gpu, a
/// launcher's process count other than N and the peer-fanout forms (their set lives in one
/// process's GPU memory). Reads the NCCL_* environment through nvls_refusal
/// (common/nccl_settings.h).
std::string data_parallel_refusal(const RunConfig& c);

/// Whether the data-parallel step (each shard's gradients; the reduction and the update) replays
/// CUDA graphs: with --graphs on, on one GPU (the emulation) and with one process per GPU; never
/// with several GPUs in one process, where NCCL's documentation warns that graph capture may
/// deadlock (kThreadedGraphsReason).
bool data_parallel_graphs(const RunConfig& c);
inline constexpr const char* kThreadedGraphsReason =
    "several GPUs in one process do not replay NCCL in CUDA graphs (NCCL's documentation: graph "
    "capture with several GPUs per process may deadlock; one GPU per process is the supported "
    "case, --processes per-gpu)";
/// Why the data-parallel trainer runs per batch (for the record). Which step it runs:
/// choose_gradient_step (step_choice.h, with kDataParallelStepReason).
inline constexpr const char* kDataParallelFormReason =
    "data-parallel training enqueues each global batch's shards, reduction and update per batch";

}  // namespace memstrat
