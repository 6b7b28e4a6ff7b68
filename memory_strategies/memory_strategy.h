// memory_strategy.h: the MemoryStrategy interface (where the training set lives and how a
// batch becomes readable on the compute stream), its options, BatchView and StrategyStats.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/host_dataset.h"
#include "memory_strategies/augment.h"
#include "memory_strategies/launch_forms.h"
#include "memory_strategies/producer_stats.h"

namespace memstrat {

class ReplicaGroup;  // replica_group.h

/// What crosses the bus: raw pixels (normalised on the GPU) or pre-normalised floats (4x bytes).
enum class Transfer { U8, F32 };
/// Bytes of one pixel in format t.
inline std::size_t pixel_bytes(Transfer t) { return t == Transfer::U8 ? 1 : sizeof(float); }
/// static: the training data never changes. refresh: the host rewrites it every epoch
/// (seeded ±2 px shift augmentation + reshuffle), so every byte must move every epoch.
/// stream: host worker threads produce each batch just in time (a gather of the epoch's fresh
/// permutation, augmented per --augment) into the strategy's slots (StreamSlots), or, with no
/// host augmentation, the GPU gathers it from a data set it can address (GatherInput).
enum class Scenario { Static, Refresh, Stream };

std::string_view to_string(Transfer t);
std::string_view to_string(Scenario s);

/// The cudaMemAdvise hints by their option names (--advise), in AdviseSet's field order.
inline constexpr std::string_view kAdviseHints[] = {"read-mostly", "preferred-device",
                                                    "accessed-by"};

/// cudaMemAdvise hints for um-advise, each selectable.
struct AdviseSet {
  bool read_mostly = true;       // cudaMemAdviseSetReadMostly
  bool preferred_device = true;  // cudaMemAdviseSetPreferredLocation = the GPU
  bool accessed_by = true;       // cudaMemAdviseSetAccessedBy = the GPU
  std::string to_string() const;  // "read-mostly,preferred-device,accessed-by" or "none"
};

struct StrategyOptions {
  int batch = 256;
  Transfer transfer = Transfer::U8;
  Scenario scenario = Scenario::Static;
  int depth = 2;         // double-buffer: device batch buffers in flight (>= 2)
  int copy_streams = 1;  // double-buffer: copy streams, used round-robin
  int prefetch_chunk_mib = 8;  // um-prefetch-coarse: MiB per prefetch (whole batches, >= 1)
  int copy_chunk_mib = 8;  // pinned-graph, double-buffer-graph, zero-copy-staged: MiB per copy (whole batches, >= 1)
  int stage_blocks = 8;    // zero-copy-staged: thread blocks of the staging kernel (>= 1)
  AdviseSet advise;      // um-advise
  std::uint64_t seed = 1;
  /// Several GPUs (--gpus N): this instance serves shard `shard` of `shards`, the single-GPU
  /// batches g·shards + shard of the epoch, as its own epoch of batches 0, 1, 2 ... (each GPU's
  /// strategy holds and moves its shard only, and acquires its batches in order as on one GPU).
  /// 1: the whole epoch. Static scenario only (EpochWriter refuses the others).
  int shard = 0;
  int shards = 1;
  /// Several GPUs: the run's ranks and what their instances share (replica_group.h), owned by the
  /// data-parallel trainer and alive longer than every instance; null on one GPU and in the
  /// emulation (shards == 1). Only strategies that share data across GPUs read it.
  ReplicaGroup* group = nullptr;
  // The stream scenario's input pipeline (read only when scenario == Stream).
  int workers = 4;                   // host producer threads, started once per run
  int prefetch = 8;                  // batches produced ahead = host slots in the ring
  Augment augment = Augment::Light;  // per-sample augmentation on the host (none: GPU gather
                                     // where the strategy's data is device-addressable)
  /// Where the refresh and stream scenarios augment (--augment-device; registry.h says which
  /// strategies take gpu in which scenario).
  AugmentDevice augment_device = AugmentDevice::Host;
};

/// A batch as the compute stream sees it. Exactly one of x_u8 / x_f32 is set (per Transfer);
/// rows x features, row-major. Pointers are device-readable once the work acquire() enqueued
/// on the compute stream has run.
struct BatchView {
  const std::uint8_t* x_u8 = nullptr;
  const float* x_f32 = nullptr;
  const std::int32_t* y = nullptr;
  int rows = 0;
  std::int64_t first_sample = 0;  // index of row 0 in this epoch's order
};

/// Per-epoch figures a strategy knows about itself (the last finished epoch).
struct StrategyStats {
  std::uint64_t h2d_bytes = 0;         // bytes it moved or prefetched host->device (explicit)
  std::uint64_t peer_bytes = 0;        // bytes it copied from another GPU's memory (peer-fanout)
  std::optional<double> copy_ms;       // GPU time of its copies/prefetches (events); none if it issues none
  double host_ms = 0.0;                // host time spent inside acquire/release (e.g. blocking copies)
  /// The stream scenario's host producers (BatchProducer) for the epoch; none when no host
  /// thread produces the batches (other scenarios, or batches gathered on the GPU).
  std::optional<ProducerStats> producer;
};

/// Device properties the registry's capability checks (StrategyEntry::unsupported) look at.
struct DeviceCaps {
  int device = 0;
  bool concurrent_managed_access = false;
  bool managed_memory = false;
  bool can_map_host_memory = false;
  int async_engine_count = 0;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  /// The run's first GPU (rank 0 of --gpus N), whose memory a cross-GPU data path may read
  /// (peer-fanout); -1 when not asked (one GPU), and then can_access_first_gpu is true.
  int first_gpu = -1;
  /// cudaDeviceCanAccessPeer(device, first_gpu): this device can read rank 0's memory over
  /// NVLink or PCIe (true for rank 0 itself).
  bool can_access_first_gpu = true;
  /// `device`'s capabilities; with first_gpu >= 0 also whether it can read first_gpu's memory.
  static DeviceCaps query(int device, int first_gpu = -1);
  /// A device with every capability and all its memory free: what a check that must not depend
  /// on the device (a scenario a strategy never runs) is asked with.
  static DeviceCaps every();
};

/// One memory strategy. Life cycle per run:
///   attach -> { begin_epoch -> (acquire b, release b) for every batch -> end_epoch }* -> dtor.
/// The strategy decides *how* data moves; the trainer decides *what* moves and never branches
/// on which strategy it holds.
class MemoryStrategy {
 public:
  virtual ~MemoryStrategy() = default;
  virtual std::string_view name() const = 0;

  /// Allocate everything this strategy will ever need; write the (static) data. No allocation
  /// after this. `compute` is the stream the MLP runs on.
  virtual void attach(const HostDataset& data, const StrategyOptions& opt,
                      cudaStream_t compute) = 0;
  /// Called with the GPU idle (previous epoch finished). Refresh: rewrite host data here.
  virtual void begin_epoch(int epoch) = 0;
  /// Enqueue what makes batch `b` readable on the compute stream; return its view.
  virtual BatchView acquire(int b) = 0;
  /// Compute work reading batch `b` has been enqueued (not waited for).
  virtual void release(int b) = 0;
  /// All batches enqueued. Strategies may record their end-of-epoch events here.
  virtual void end_epoch() = 0;
  /// Figures for the last epoch; valid after the compute stream finished that epoch.
  virtual StrategyStats stats() const = 0;
  // Launch forms. The three methods below say which one-launch forms the strategy takes by
  // itself (the form it was built for: --launch-form auto takes the first of kernel,
  // kernel-per-chunk, graph they allow); launch_forms() says every form its data path allows when
  // one is asked for by name (--launch-form). A true (or non-zero) answer from either carries the
  // contract stated here.

  /// True when one epoch's device work can be captured into a CUDA graph and the graph
  /// replayed for every later epoch instead of the calls (a trainer's whole-epoch graph mode:
  /// begin_epoch(e) on the host, then, captured from the compute stream once and replayed
  /// after: acquire(0), step 0, release(0), ..., release(n-1), end_epoch()). A strategy that
  /// says true guarantees:
  ///  - The same work every epoch: what acquire/release/end_epoch enqueue and the views acquire
  ///    returns do not depend on the epoch; no host-side decision in them differs between
  ///    epochs. Per-epoch host work (the refresh rewrite) belongs in begin_epoch, which runs
  ///    before each replay with the GPU idle and is never captured.
  ///  - Only capturable work: kernels, copies, event records and waits. No host
  ///    synchronisation, allocation, cudaStreamQuery / cudaEventQuery, cudaMemPrefetchAsync or
  ///    cudaMemAdvise (graphs have no node for these) inside acquire/release/end_epoch.
  ///  - Fork and join: each side stream's first work of the epoch waits on an event recorded on
  ///    the compute stream in acquire(0), and end_epoch() makes the compute stream wait on an
  ///    event recorded after each side stream's last work. No event recorded in another epoch
  ///    is waited on (slot hand-overs across epochs are covered by the fork).
  ///  - stats() holds after a replay: byte counts come from the geometry, times from events the
  ///    graph records (CopyTimeline records external event nodes while capturing).
  ///  - Only where all of an epoch's data is in place before the epoch starts (static, refresh:
  ///    HostEpochSource::written_before_epoch); false in any scenario that writes batches while
  ///    the epoch runs. Asked after attach (before it: as for the static scenario).
  virtual bool epoch_capturable() const { return false; }
  /// True when acquire(b) may be called for every batch of the epoch before any batch's compute
  /// is enqueued, and the views stay valid until end_epoch(): whatever acquire enqueues (if
  /// anything) needs no compute in between. The trainer may then run the whole epoch's steps in
  /// one kernel launch (Trainer's epoch launch).
  virtual bool acquire_ahead() const { return false; }
  /// acquire_ahead() for groups of k batches, [g·k, min((g+1)·k, n)), or 0 for none (asked
  /// after attach): acquire(b) may be called for every batch of one group before any of the
  /// group's compute is enqueued, the group's views stay valid until its last batch is
  /// released, and the groups run in order (a group's acquires after the previous group's
  /// releases). The trainer may then run each group's steps in one kernel launch (Trainer's
  /// kernel-per-chunk form). A strategy that is acquire_ahead() has one group: the epoch.
  virtual int launch_group() const { return 0; }
  /// Every form the data path allows (asked after attach; before it: as for the static
  /// scenario), each field under the contract of the method it is named after: at least what
  /// those methods say, and more where the strategy was built for another form but its data path
  /// keeps the contract of this one too (resident's epoch graph, pinned's, um's epoch kernel).
  virtual LaunchForms launch_forms() const {
    return {acquire_ahead(), launch_group(), epoch_capturable()};
  }
};

}  // namespace memstrat
