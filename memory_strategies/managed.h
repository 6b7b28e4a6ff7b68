// managed.h: ManagedStrategy, unified memory: the training set in cudaMallocManaged memory
// written by the CPU. Its hints are set by the registry line that names it:
//   um                  none: pages fault in on the GPU's first touch
//   um-prefetch         each batch is prefetched to the GPU on a side stream one batch ahead
//                       (events order it before the step that reads it)
//   um-advise           prefetch, plus the cudaMemAdvise hints of --advise, set once at attach
//   um-prefetch-coarse  the best form of um-prefetch: chunks of --prefetch-chunk MiB (whole
//                       batches) prefetched one chunk ahead, and no prefetch at all of data the
//                       strategy knows is resident (static data after the first epoch)
// What is prefetched when is a ChunkPlan (chunk_plan.h): per batch, or coarse chunks.
//
// Several GPUs (--gpus N, static and refresh): the um-shared forms keep the run's training set
// in ONE managed allocation (ManagedSharedSet, managed_shared_set.h), a 2 MiB-aligned region
// per rank that the rank's epoch writer fills, and place each region by the hint of their
// registry line (Hints::shared), set once at attach after the CPU has written it:
//   um-shared              none: each GPU faults its region in on first touch
//   um-shared-prefetch     region r PreferredLocation = GPU r, prefetched there as
//                          um-prefetch-coarse prefetches (chunks, the first epoch only)
//   um-shared-read-mostly  ReadMostly, prefetched the same way: GPU r holds a read-only
//                          duplicate of region r and the host copy stays valid
//   um-shared-host         PreferredLocation = host, AccessedBy every GPU of the run: nothing
//                          migrates; each GPU's kernels read its batch from host memory over
//                          the bus through that mapping (zero-copy's path, in managed memory)
// The stream scenario has no set to share: each rank's host workers fill its own managed slots,
// as um's (um-prefetch-coarse's) do. One GPU and the emulation (no ReplicaGroup): no shared set
// and no such hint, the strategy's own buffers: um's path (um-shared, um-shared-host) or
// um-prefetch-coarse's (the prefetching forms) exactly, the registry's one_gpu_as.
//
// Stream scenario, host workers: managed slots (stream_slots.h) that the workers write while
// kernels run (hence concurrentManagedAccess); the step reads batch b's slot in place, the
// prefetching forms first prefetch that slot to the GPU on the side stream (um-prefetch /
// um-advise: images and labels, two calls; um-prefetch-coarse: the slot's block, one call), and
// release(b) hands it back with release_after(slot, compute). Hints (--advise) go on the slots.
// Stream scenario, --augment none (or light/heavy with --augment-device gpu): the training set is
// managed memory written once in data-set order (uint8 where the GPU augments), and the GPU
// gathers (and augments) each batch from it (gather_input.h): um faults in the pages its
// scattered rows live on; um-prefetch / um-advise prefetch each batch's rows (one call per run
// of consecutive rows, row_runs.h) and all labels once per epoch; um-prefetch-coarse prefetches
// the whole set in chunks before the first batch, and never again (it stays resident).
// Refresh scenario, --augment-device gpu: the uint8 set is managed memory written once by the CPU
// in data-set order, and before each epoch's first batch one kernel writes the epoch from it into
// a second managed buffer (gpu_epoch_writer.h), which the steps read as the host-written epoch.
// The CPU never writes either again: um faults the set in during epoch 1 (the epoch's pages are
// first touched by the GPU and never leave it); um-prefetch / um-advise prefetch the whole set
// (their plan's chunks: one batch of rows each) before every epoch's kernel; um-prefetch-coarse
// prefetches it in chunks before epoch 1's kernel only. um-advise's hints go on both buffers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/chunk_plan.h"
#include "memory_strategies/copy_timeline.h"
#include "memory_strategies/gather_input.h"
#include "memory_strategies/gpu_epoch_writer.h"
#include "memory_strategies/host_epoch_source.h"
#include "memory_strategies/managed_shared_set.h"
#include "memory_strategies/row_runs.h"
#include "memory_strategies/stream_slots.h"

namespace memstrat {

class ManagedStrategy final : public MemoryStrategy {
 public:
  /// Several GPUs: the run's one managed set and where each region is placed (see above).
  enum class SharedSet { Off, NoHint, RankGpu, ReadMostly, HostAccessed };
  struct Hints {
    bool prefetch = false;  // cudaMemPrefetchAsync, one chunk (default: one batch) ahead
    bool advise = false;    // cudaMemAdvise (the set in StrategyOptions::advise) at attach
    bool chunked = false;   // chunks of StrategyOptions::prefetch_chunk_mib, not single batches
    /// Prefetch only what may not be resident: static data once, in the first epoch after
    /// attach (the CPU never writes it again); refresh data every epoch (the host rewrite moves
    /// its pages back). Assumes nothing evicts the pages afterwards: attach refuses data that
    /// does not fit in free device memory with a margin (check_managed_fits), and if pages were
    /// evicted anyway the GPU would fault them back in: slower, never wrong.
    bool skip_resident = false;
    /// Off: every rank its own managed buffers. Else, with a ReplicaGroup (several GPUs), its
    /// region of the run's ManagedSharedSet, placed so; without one, Off.
    SharedSet shared = SharedSet::Off;
  };
  ManagedStrategy(std::string_view name, Hints hints) : name_(name), hints_(hints) {}

  std::string_view name() const override { return name_; }
  /// Device memory attach() allocates for the data, for options `opt` and data of geometry `g`
  /// (batch = opt.batch, bytes per sample in opt.transfer): pure, no device needed
  /// (StrategyEntry::device_footprint).
  static std::uint64_t device_footprint(const StrategyOptions& opt, const BatchGeometry& g);
  void attach(const HostDataset& data, const StrategyOptions& opt, cudaStream_t compute) override;
  void begin_epoch(int epoch) override;
  BatchView acquire(int b) override;
  void release(int b) override;
  void end_epoch() override;
  /// Prefetched bytes are requested, not necessarily moved (pages already resident are skipped);
  /// CUPTI's unified-memory counters report what actually migrated. Without prefetch: none.
  /// Where the GPU gathers or writes the epoch, plus the order's upload.
  StrategyStats stats() const override;
  /// Static and refresh (the data set in managed memory, a batch a fixed offset into it): every
  /// batch can be acquired before any step, the prefetching forms' acquires enqueue prefetches on
  /// the side stream that need no compute in between (the kernel forms; all of an epoch's
  /// prefetches then precede its one launch). Without hints (um) acquire enqueues nothing at all,
  /// so an epoch graph holds only the steps: pages fault in inside its kernels as in any launch,
  /// and the refresh rewrite moves them back to the host in begin_epoch, outside the graph. With
  /// the epoch written on the GPU, acquire(0) also enqueues the order's upload and the kernel that
  /// writes the epoch (after the prefetch of the set it reads), the same work every epoch.
  /// cudaMemPrefetchAsync has no graph node: the prefetching forms have no epoch graph. The
  /// stream scenario (slots handed over at run time, or one gathered batch buffer): per batch.
  LaunchForms launch_forms() const override;

 private:
  void prefetch_chunk(int c);
  void prefetch_slot(int b, int slot);  // stream, host workers
  void prefetch_rows(int b);            // stream, GPU gather
  void prefetch_set();                  // every chunk of the plan, then compute waits for them
  void advise_range(const void* ptr, std::size_t bytes, const AdviseSet& a);
  /// Several GPUs, a shared form: this rank's region of the run's set (allocated by the first
  /// rank to ask), its images and labels pointers, written by the CPU, then placed.
  void attach_shared(const HostDataset& data, const StrategyOptions& opt);
  /// Make the compute stream wait for what the side stream enqueued up to now (event `e`).
  void compute_waits(int e);
  std::string name_;
  Hints hints_;
  int device_ = 0;
  HostEpochSource source_;
  ManagedBuffer<std::uint8_t> images_;  // own buffers (no shared set)
  ManagedBuffer<std::int32_t> labels_;
  std::shared_ptr<ManagedSharedSet> set_;  // a shared form on several GPUs
  std::uint8_t* images_at_ = nullptr;      // the set's images and labels, own or the region's
  std::int32_t* labels_at_ = nullptr;
  std::optional<ChunkPlan> plan_;  // with prefetch
  Stream prefetch_stream_;
  std::vector<Event> ready_;  // per chunk: its prefetch is done
  CopyTimeline timeline_;     // per chunk
  int issued_ = 0;            // chunks [0, issued_) of this epoch are enqueued
  bool prefetching_ = false;  // this epoch prefetches
  bool resident_ = false;     // skip_resident: static data already prefetched in full
  bool static_data_ = false;  // the CPU never writes the prefetched data again after attach
  StreamSlots slots_;         // stream scenario, host workers
  GatherInput gather_;        // stream scenario, --augment none or --augment-device gpu
  ManagedBuffer<std::uint8_t> epoch_images_;  // refresh, --augment-device gpu: the epoch the
  ManagedBuffer<std::int32_t> epoch_labels_;  // GPU writes (images_, labels_: the uint8 set)
  GpuEpochWriter gpu_writer_;                 // ... and what writes it
  std::vector<std::int32_t> sorted_;  // prefetch_rows: the batch's rows, sorted
  std::vector<RowRun> runs_;          // prefetch_rows: their runs
};

}  // namespace memstrat
