// run_config.h: RunConfig, the one description of a `memstrat train` run. The CLI fills it
// (cli/options.cpp declares every option against one of its fields, and the field's default
// below is the option's default: --help and `memstrat describe` print it), tests fill it
// directly, and Session builds the run from it. What the components take (StrategyOptions,
// MlpConfig) is derived from it here, in one place, and never stored beside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/host_dataset.h"
#include "common/thread_placement.h"
#include "experiments/core/mlp.h"
#include "experiments/core/process_rank.h"
#include "kernels/common/gemm.h"
#include "memory_strategies/memory_strategy.h"
#include "memory_strategies/registry.h"

namespace memstrat {

/// --fused: which implementation of the training step the Mlp may use.
enum class FusedMode {
  On,      // the single-launch step where it applies and is faster, else the cuBLASLt one
  Single,  // the single-launch step at any size it takes
  Lt,      // cuBLASLt GEMMs + fused kernels (4-5 launches per step)
  Off,     // the layer-by-layer path
};
/// --graphs: replay each batch's step as a CUDA graph.
enum class Graphs { On, Off };
/// What takes each batch in the stream scenario (--consumer): the training step, or nothing but
/// a kernel that reads one element of it (the input pipeline's throughput alone).
enum class Consumer { Train, None };
/// --launch-form: how the Trainer launches an epoch's steps. Auto: the form the strategy was built
/// for, with one launch per epoch where the strategy and the step allow it (choose_epoch_form,
/// launch_request.h); else exactly the form named, or a refusal. --epoch-launch on|off is the
/// older spelling of auto|per-batch.
enum class LaunchForm { Auto, PerBatch, Graph, ChunkKernels, Kernel };

inline std::string_view to_string(FusedMode m) {
  switch (m) {
    case FusedMode::On: return "on";
    case FusedMode::Single: return "single";
    case FusedMode::Lt: return "lt";
    case FusedMode::Off: return "off";
  }
  return "?";
}
inline std::string_view to_string(Graphs g) { return g == Graphs::On ? "on" : "off"; }
inline std::string_view to_string(Consumer c) { return c == Consumer::Train ? "train" : "none"; }
/// --reduce: how data-parallel training (--gpus N > 1) combines the GPUs' gradients. Exact:
/// every GPU's gradients gathered (ncclAllGather) and summed on each GPU in rank order (rank_sum),
/// bitwise equal to --emulate-gpus N; Ring: ncclAllReduce over fixed buckets (GradientBuckets),
/// NCCL's summation order.
enum class Reduce { Exact, Ring };
inline std::string_view to_string(Reduce r) { return r == Reduce::Exact ? "exact" : "ring"; }
/// --processes: how the N GPUs of --gpus N are driven. One: this process, one host thread per GPU
/// (the only way N GPUs share one process's allocations: the peer-fanout forms). PerGpu: one
/// process per GPU, started by a launcher (torchrun, mpirun, srun; process_rank.h) or by memstrat
/// itself (rank_spawn.h), each driving its own GPU and rank.
enum class Processes { One, PerGpu };
inline std::string_view to_string(Processes p) { return p == Processes::One ? "one" : "per-gpu"; }
/// "auto", or the form's name (to_string(EpochForm)).
std::string_view to_string(LaunchForm f);
/// The form asked for by name; none for Auto.
std::optional<EpochForm> asked_form(LaunchForm f);

struct RunConfig {
  // ---- what is measured (the record's `config`) ----
  /// Resolved where the name is read (the CLI checks --strategy against the registry there, the
  /// one validation); everything downstream holds the entry, never the name.
  const StrategyEntry* strategy = find_strategy("resident");
  int epochs = 10;
  /// The batch size, stored here only: the strategy options, the Mlp's max_batch and the
  /// Trainer's batch layout are derived from it.
  int batch = 256;
  std::vector<int> hidden = {256};  // hidden layer sizes
  Transfer transfer = Transfer::U8;
  Scenario scenario = Scenario::Static;
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;  // weights, shuffling and augmentation
  kernels::GemmBackend gemm = kernels::GemmBackend::Cublas;
  bool tf32 = false;
  Graphs graphs = Graphs::On;
  FusedMode fused = FusedMode::On;
  LaunchForm launch_form = LaunchForm::Auto;
  // The strategies' own options: declared (meaning, range, default) with the registry entries
  // that read them (memory_strategies/registry.cpp); these defaults must agree (tested).
  int depth = 2;  // double-buffer, zero-copy-staged: device batch slots in flight
  /// double-buffer: copy streams used round-robin (--copy-streams). The record calls it
  /// config.streams, the key it had before the option got its name; kept for compatibility.
  int copy_streams = 1;
  AdviseSet advise;  // um-advise: the cudaMemAdvise hints
  int prefetch_chunk_mib = 8;  // um-prefetch-coarse: MiB per prefetch call
  // The stream scenario's input pipeline (--workers, --prefetch, --augment: only with
  // --scenario stream, which the CLI checks; the record writes null for them otherwise).
  int workers = 4;                   // host producer threads, started once per run
  int prefetch = 8;                  // batches produced ahead = host slots
  Augment augment = Augment::Light;  // per-sample host augmentation
  /// Where refresh and stream augment (--augment-device); gpu only where the strategy's registry
  /// entry declares it (StrategyEntry::gpu_augment), which the CLI checks.
  AugmentDevice augment_device = AugmentDevice::Host;
  /// --consumer none: no step, no loss, no test accuracy; the stream scenario only (CLI).
  Consumer consumer = Consumer::Train;
  bool trains() const { return consumer == Consumer::Train; }
  /// pinned-graph, double-buffer-graph, zero-copy-staged: MiB per copy; with --launch-form
  /// kernel-per-chunk, any strategy's batches per launch (reads_copy_chunk).
  int copy_chunk_mib = 8;
  int stage_blocks = 8;        // zero-copy-staged: thread blocks of the staging kernel
  /// --replicate K: the training set is K copies of the loaded one, copies 1.. augmented
  /// (memory_strategies/replicated_set.h); 1 = the set as loaded.
  int replicate = 1;
  /// --device-budget GiB: the device memory the data path may use; Session holds the rest
  /// (experiments/core/device_budget.h). None = no limit beyond the device's.
  std::optional<double> device_budget_gib;
  bool profile = true;   // CUPTI counters (--profile / --no-profile)
  /// --thread-placement: where the training thread and the CUDA driver's threads run
  /// (common/thread_placement.h); os = wherever the scheduler puts them. Static, one GPU only
  /// (thread_placement_refusal).
  ThreadPlacement thread_placement = ThreadPlacement::Os;
  int device = 0;
  // Data-parallel training (shard_plan.h): each global batch of N x batch rows cut into N shards.
  int gpus = 1;          // --gpus: GPUs --device .. --device + N - 1, one thread and NCCL rank each
  Reduce reduce = Reduce::Exact;  // --reduce (read only with gpus > 1)
  int emulate_gpus = 1;  // --emulate-gpus: N shards on one GPU in turn, summed in rank order
  Processes processes = Processes::One;  // --processes (read only with gpus > 1)
  /// --processes per-gpu: this process's rank, from the launcher's environment (read when the
  /// options are parsed); none otherwise.
  std::optional<ProcessRank> process;
  /// --processes per-gpu started by no launcher: this process starts the N ranks itself, one
  /// process per GPU on this host (experiments/cli/rank_spawn.h), and trains nothing.
  bool spawn_ranks = false;
  /// The rank whose figures this process reports: 0, or its rank under --processes per-gpu.
  int rank() const { return process ? process->rank : 0; }
  /// N: the shards of a global batch (gpus or emulate_gpus; 1 = single-GPU training as ever).
  int shards() const { return gpus > emulate_gpus ? gpus : emulate_gpus; }
  bool data_parallel() const { return shards() > 1; }
  std::string run_tag;   // free-form, recorded (the matrix runner's cell id); "" = null

  // ---- the inputs ----
  std::string data;                 // MNIST directory; "" = $MEMSTRAT_DATA, then data/mnist
  std::int64_t train_samples = 0;   // use the first N training samples; 0 = all
  std::int64_t test_samples = 0;

  // ---- what the run writes besides the console ----
  std::string json;         // append the record to this JSON Lines file
  std::string trace;        // Chrome trace-event JSON
  std::string loss_curve;   // per-batch mean losses, CSV epoch,batch,loss
  std::string export_init;  // directory for the initial weights and the epoch-1 order
  bool quiet = false;       // only the summary line on the console
  std::vector<std::string> argv;  // the command line as typed (recorded as argv)
};

/// Why the run cannot take its --thread-placement; "" where it can. Only the static scenario on
/// one GPU: refresh's rewrite and stream's workers run on threads the training thread starts,
/// which would inherit its one CPU, and several GPUs are driven by several threads.
std::string thread_placement_refusal(const RunConfig& c);
/// The strategy's part of the run.
StrategyOptions strategy_options(const RunConfig& c);
/// True when the run reads --copy-chunk: its strategy declares it, or kernel-per-chunk is asked
/// for (a strategy without chunks of its own then has its epoch cut into --copy-chunk groups).
bool reads_copy_chunk(const RunConfig& c);
/// The model's part: layers = features, hidden..., classes; the step implementation per --fused
/// and per where the strategy's batches are when the step reads them (batch_in_host_memory).
MlpConfig mlp_config(const RunConfig& c, int features, int classes);
/// "512,256": hidden sizes as typed on the command line.
inline std::string hidden_string(const std::vector<int>& hidden) {
  std::string s;
  for (const int h : hidden) s += (s.empty() ? "" : ",") + std::to_string(h);
  return s;
}

}  // namespace memstrat
