#include "memory_strategies/registry.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "memory_strategies/augment_after_copy.h"
#include "memory_strategies/copy_on_compute.h"
#include "memory_strategies/double_buffer.h"
#include "memory_strategies/double_buffer_graph.h"
#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample
#include "memory_strategies/host_shared.h"
#include "memory_strategies/host_shared_ring.h"
#include "memory_strategies/managed.h"
#include "memory_strategies/pageable.h"
#include "memory_strategies/peer_fanout.h"
#include "memory_strategies/peer_fanout_ring.h"
#include "memory_strategies/pinned.h"
#include "memory_strategies/pinned_graph.h"
#include "memory_strategies/resident.h"
#include "memory_strategies/zero_copy.h"
#include "memory_strategies/zero_copy_staged.h"

namespace memstrat {

namespace {
template <typename T>
std::unique_ptr<MemoryStrategy> make() {
  return std::make_unique<T>();
}
/// A copying strategy, wrapped so that it takes --augment-device gpu (augment_after_copy.h).
template <typename T>
std::unique_ptr<MemoryStrategy> after_copy() {
  return std::make_unique<AugmentAfterCopy>(std::make_unique<T>());
}
std::function<std::unique_ptr<MemoryStrategy>()> managed(std::string_view name,
                                                         ManagedStrategy::Hints hints) {
  return [name, hints]() -> std::unique_ptr<MemoryStrategy> {
    return std::make_unique<ManagedStrategy>(name, hints);
  };
}

std::string always(const DeviceCaps&) { return {}; }
std::string needs_mapping(const DeviceCaps& c) {
  return c.can_map_host_memory ? "" : "device cannot map host memory (canMapHostMemory = 0)";
}
std::string needs_managed(const DeviceCaps& c) {
  return c.managed_memory ? "" : "device has no managed memory (managedMemory = 0)";
}
std::string needs_concurrent_managed(const DeviceCaps& c) {
  if (!c.managed_memory) return needs_managed(c);
  return c.concurrent_managed_access
             ? ""
             : "prefetch/advise need concurrentManagedAccess = 1 (not on this device/OS)";
}

// Several GPUs: a rank whose GPU cannot read rank 0's memory, which holds the set (peer-fanout).
std::string needs_first_gpu_access(const DeviceCaps& c) {
  return c.can_access_first_gpu
             ? ""
             : "GPU " + std::to_string(c.device) + " cannot read the memory of GPU " +
                   std::to_string(c.first_gpu) +
                   " (rank 0, which holds the set): cudaDeviceCanAccessPeer = 0, no NVLink or "
                   "PCIe peer path between them; choose GPUs that have one (nvidia-smi topo -m)";
}
// The set is written once, on rank 0's GPU, at set-up (peer-fanout).
std::string static_only(const StrategyOptions& o, const DeviceCaps&) {
  return o.scenario == Scenario::Static
             ? ""
             : "the set is written once, on rank 0's GPU, at set-up, and read by every GPU: "
               "static scenario only (a refresh or stream epoch would rewrite it while other "
               "GPUs read it)";
}

// ---- what the stream scenario needs (StrategyEntry::unsupported_with) ----
// Host workers produce the stream's batches: it augments, on the host.
bool host_produced(const StrategyOptions& o) {
  return o.scenario == Scenario::Stream && o.augment != Augment::None &&
         o.augment_device == AugmentDevice::Host;
}
std::string stream_needs_gather(const StrategyOptions& o, const DeviceCaps&) {
  return host_produced(o)
             ? "in the stream scenario resident runs --augment none, or light/heavy with "
               "--augment-device gpu (the GPU gathers, and augments, each batch from the "
               "resident set); host augmentation makes every batch cross the bus, which the "
               "copying strategies measure"
             : "";
}
// um alone: the other managed forms need concurrentManagedAccess in every scenario.
std::string stream_needs_concurrent_managed(const StrategyOptions& o, const DeviceCaps& c) {
  return host_produced(o) && !c.concurrent_managed_access
             ? "the stream scenario needs concurrentManagedAccess = 1: host workers write "
               "managed slots while kernels run"
             : "";
}

// The forms built on one captured epoch (graph forms, and zero-copy-staged's slot ring, which
// stages ahead from a fixed layout): the stream scenario hands batches over at run time.
std::string not_in_stream(const StrategyOptions& o, const DeviceCaps&) {
  return o.scenario == Scenario::Stream
             ? "the stream scenario hands each batch over from host workers at run time; this "
               "form stages ahead from a fixed layout (replayed as one epoch graph)"
             : "";
}

int staging_blocks(const StrategyOptions& o) { return o.stage_blocks; }

// ---- launch forms (StrategyEntry::launch_forms) ----
using F = EpochForm;
constexpr EpochFormSet kPerBatch{F::PerBatch};
constexpr EpochFormSet kEveryForm{F::PerBatch, F::Graph, F::ChunkKernels, F::Kernel};
// Every batch acquired ahead, but work no graph can hold (prefetches).
constexpr EpochFormSet kNoGraph{F::PerBatch, F::ChunkKernels, F::Kernel};
// A chunk's batches acquired together, an epoch captured as a graph.
constexpr EpochFormSet kChunks{F::PerBatch, F::Graph, F::ChunkKernels};
constexpr EpochFormSet kGraph{F::PerBatch, F::Graph};
constexpr LaunchFormTable every_form{kEveryForm, kEveryForm, kPerBatch};
constexpr LaunchFormTable per_batch_only{kPerBatch, kPerBatch, kPerBatch};
constexpr LaunchFormTable no_graph{kNoGraph, kNoGraph, kPerBatch};
constexpr LaunchFormTable graph_too{kGraph, kGraph, kPerBatch};
constexpr LaunchFormTable chunks_not_in_stream{kChunks, kChunks, {}};
constexpr LaunchFormTable static_every_form{kEveryForm, {}, {}};

// Why a strategy's data path allows no other form (StrategyEntry::launch_note).
constexpr std::string_view kOneBatchBuffer =
    "every batch is copied into the one device batch buffer, so a batch can be acquired only "
    "after the step before it (no kernel form)";
constexpr std::string_view kPageableNote =
    "every batch is copied into the one device batch buffer, so a batch can be acquired only "
    "after the step before it (no kernel form); and the driver stages each copy from pageable "
    "memory through its own buffer as the call runs, which a graph cannot replay (no graph)";
constexpr std::string_view kDoubleBufferNote =
    "a batch's copy into its slot waits for the step that read the slot before, so no group of "
    "batches can be acquired ahead of its steps (no kernel form); and those hand-over events "
    "reach from one epoch into the next, which one replayed epoch graph cannot hold (no graph)";
constexpr std::string_view kPrefetchNote =
    "cudaMemPrefetchAsync has no graph node (no graph)";
constexpr std::string_view kCoarseNote =
    "cudaMemPrefetchAsync has no graph node, and its first static epoch prefetches while the "
    "later ones do not (no graph)";
constexpr std::string_view kChunkRingNote =
    "its batches arrive a chunk at a time in K device chunk slots, so not all of an epoch's "
    "batches can be acquired before its first step (no epoch kernel)";
constexpr std::string_view kPeerNote =
    "static scenario only; on one GPU a batch is an offset into the set (resident's forms); "
    "several GPUs run one launch per batch (the data-parallel trainer)";
constexpr std::string_view kOneChunkSlotNote =
    "one device slot holds one chunk, so not all of an epoch's batches can be acquired before "
    "its first step (no epoch kernel)";

// The device memory each strategy's data path allocates (StrategyEntry::device_footprint),
// declared by the strategy class beside its attach.
using Footprint = std::uint64_t (*)(const StrategyOptions&, const BatchGeometry&);
/// A copying strategy's footprint, plus what its AugmentAfterCopy wrapper allocates.
template <Footprint F>
std::uint64_t after_copy_footprint(const StrategyOptions& o, const BatchGeometry& g) {
  return F(o, g) + AugmentAfterCopy::device_bytes(o);
}
const std::pair<std::string_view, Footprint> kFootprints[] = {
    {"resident", ResidentStrategy::device_footprint},
    {"pageable", after_copy_footprint<CopyOnComputeStream::device_footprint>},
    {"pinned", after_copy_footprint<CopyOnComputeStream::device_footprint>},
    {"double-buffer", after_copy_footprint<DoubleBufferStrategy::device_footprint>},
    {"zero-copy", ZeroCopyStrategy::device_footprint},
    {"um", ManagedStrategy::device_footprint},
    {"um-prefetch", ManagedStrategy::device_footprint},
    {"um-advise", ManagedStrategy::device_footprint},
    {"zero-copy-staged", after_copy_footprint<ZeroCopyStagedStrategy::device_footprint>},
    {"um-prefetch-coarse", ManagedStrategy::device_footprint},
    {"pinned-graph", after_copy_footprint<PinnedGraphStrategy::device_footprint>},
    {"double-buffer-graph", after_copy_footprint<DoubleBufferGraphStrategy::device_footprint>},
    {"peer-fanout", PeerFanoutStrategy::device_footprint},
    {"peer-fanout-ring", PeerFanoutRingStrategy::device_footprint},
    {"host-shared", CopyOnComputeStream::device_footprint},
    {"host-shared-ring", DoubleBufferGraphStrategy::device_footprint},
    {"um-shared", ManagedStrategy::device_footprint},
    {"um-shared-host", ManagedStrategy::device_footprint},
    {"um-shared-prefetch", ManagedStrategy::device_footprint},
    {"um-shared-read-mostly", ManagedStrategy::device_footprint},
};

std::vector<StrategyEntry> with_footprints(std::vector<StrategyEntry> r) {
  for (StrategyEntry& e : r) {
    for (const auto& [name, f] : kFootprints)
      if (name == e.name) e.device_footprint = f;
    if (e.device_footprint == nullptr)
      throw std::logic_error("strategy '" + std::string(e.name) + "' declares no device footprint");
  }
  return r;
}

std::vector<StrategyEntry> make_registry() {
  const StrategyOption depth{
      "depth", "device slots in flight (a batch each; a chunk each in double-buffer-graph, zero-copy-staged, peer-fanout-ring and host-shared-ring)",
      OptionKind::Integer, 2, 64, {}, "2",
      [](const StrategyOptions& o) { return std::to_string(o.depth); }};
  const StrategyOption copy_streams{
      "copy-streams", "copy streams, used round-robin", OptionKind::Integer, 1, 16, {}, "1",
      [](const StrategyOptions& o) { return std::to_string(o.copy_streams); }};
  const StrategyOption advise{
      "advise", "cudaMemAdvise hints set once at attach", OptionKind::HintSet, 0, 0,
      {std::begin(kAdviseHints), std::end(kAdviseHints)}, "read-mostly,preferred-device,accessed-by",
      [](const StrategyOptions& o) { return o.advise.to_string(); }};
  // Default 8 MiB: provisional (docs/strategies.md, um-prefetch-coarse), to be set from the
  // primitives benchmark's prefetch-bandwidth curve.
  const StrategyOption prefetch_chunk{
      "prefetch-chunk", "MiB per prefetch chunk (whole batches, at least one)", OptionKind::Integer,
      1, 1024, {}, "8",
      [](const StrategyOptions& o) { return std::to_string(o.prefetch_chunk_mib); }};
  // Default 8 MiB: past the knee of the pinned copy's bandwidth-versus-size curve, which
  // `memstrat primitives` measures per GPU (docs/strategies.md, "Copies of whole chunks").
  const StrategyOption copy_chunk{
      "copy-chunk", "MiB per copy (whole packed batches, at least one)", OptionKind::Integer, 1,
      1024, {}, "8", [](const StrategyOptions& o) { return std::to_string(o.copy_chunk_mib); }};
  // Default 8 (docs/strategies.md, zero-copy-staged): of 8, 16, 32, 64 on an H200 the fastest
  // epoch at u8 and within the spread at f32; more blocks slow the step they share SMs with.
  const StrategyOption stage_blocks{
      "stage-blocks",
      "thread blocks of the staging kernel; the single-launch step leaves as many block slots "
      "free, so that staging and step run side by side",
      OptionKind::Integer, 1, 128, {}, "8",
      [](const StrategyOptions& o) { return std::to_string(o.stage_blocks); }};
  // --augment-device gpu (StrategyEntry::gpu_augment): the strategies whose set the GPU reads
  // where it lies. The CPU writes the uint8 set once, in data-set order, into the strategy's
  // memory, and never again; per epoch only the order goes up explicitly (h2d_bytes: 4 bytes a
  // sample, in refresh also the epoch number). Refresh: before the first batch one kernel writes
  // the epoch (the light shift) from the set into the strategy's epoch storage
  // (gpu_epoch_writer.h): resident's device memory; zero-copy's mapped memory (the kernel reads
  // the set and writes the epoch over the bus and the steps read it there, none of it in
  // h2d_bytes, as no read of mapped memory is); the um family's managed memory (the set migrates
  // in epoch 1, or is prefetched: um-prefetch and um-advise before every epoch, the requested
  // bytes in h2d_bytes; um-prefetch-coarse before epoch 1 only). Stream: the GPU gathers and
  // augments each batch from the set into one device batch (gather_input.h). The copying
  // strategies move the host's augmented bytes: that bus is what they measure.
  const std::vector<Scenario> gpu_augment{Scenario::Refresh, Scenario::Stream};
  // The copying strategies take it too (augment_after_copy.h): their bus carries the raw rows
  // (refresh: the host reshuffles the epoch but does not shift it; stream: the host workers only
  // gather), and the GPU augments each batch in device memory after its copy, before its step.
  // Those that never run the stream scenario take it in refresh only.
  const std::vector<Scenario> copied_refresh_gpu_augment{Scenario::Refresh};
  return {
      {"resident", "whole data set in device memory, uploaded once; batch = pointer offset (upper bound)", always, {}, make<ResidentStrategy>, every_form, "", {}, false, stream_needs_gather, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment},
      {"pageable", "malloc'ed host memory; per batch a staged cudaMemcpy into one device buffer", always, {}, after_copy<PageableStrategy>, per_batch_only, kPageableNote, {}, false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment, /*device_footprint=*/nullptr, /*one_gpu_as=*/{}, /*gpu_augment_after_copy=*/true},
      {"pinned", "cudaMallocHost memory; per batch cudaMemcpyAsync on the compute stream (no overlap)", always, {}, after_copy<PinnedStrategy>, graph_too, kOneBatchBuffer, {}, false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment, /*device_footprint=*/nullptr, /*one_gpu_as=*/{}, /*gpu_augment_after_copy=*/true},
      {"double-buffer", "pinned memory; K device buffers filled by copy stream(s) while compute runs (--depth, --copy-streams)", always, {depth, copy_streams}, after_copy<DoubleBufferStrategy>, per_batch_only, kDoubleBufferNote, {}, false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment, /*device_footprint=*/nullptr, /*one_gpu_as=*/{}, /*gpu_augment_after_copy=*/true},
      {"zero-copy", "mapped pinned memory read by the kernels over PCIe; nothing copied", needs_mapping, {}, make<ZeroCopyStrategy>, every_form, "", /*improves=*/{}, /*batch_in_host_memory=*/true, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment},
      {"um", "cudaMallocManaged memory written by the CPU; no hints, pages fault in on first GPU touch", needs_managed, {}, managed("um", {/*prefetch=*/false, /*advise=*/false}), every_form, "", {}, false, stream_needs_concurrent_managed, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment},
      {"um-prefetch", "managed memory; cudaMemPrefetchAsync of batch i+1 on a side stream while batch i computes", needs_concurrent_managed, {}, managed("um-prefetch", {/*prefetch=*/true, /*advise=*/false}), no_graph, kPrefetchNote, {}, false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment},
      {"um-advise", "um-prefetch plus cudaMemAdvise ReadMostly / PreferredLocation / AccessedBy (--advise)", needs_concurrent_managed, {advise}, managed("um-advise", {/*prefetch=*/true, /*advise=*/true}), no_graph, kPrefetchNote, {}, false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment},
      {"peer-fanout", "several GPUs: data set resident once on rank 0's GPU; every other GPU's SMs read its batch from it over peer access (one copy kernel) into one local slot on its compute stream before the step; rank 0 and one GPU read in place (resident)", needs_first_gpu_access, {}, make<PeerFanoutStrategy>, static_every_form, kPeerNote, {}, false, static_only, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"resident"},
      {"host-shared", "several GPUs: the data set once in ONE page-locked host allocation (cudaHostAllocPortable), each GPU's shard a region of it, copied by that GPU's copy engine as pinned copies (cudaMemcpyAsync on its compute stream, no overlap), all GPUs at once; one GPU: pinned", always, {}, make<HostSharedStrategy>, graph_too, kOneBatchBuffer, {}, false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"pinned"},
      {"um-shared", "several GPUs: the data set once in ONE managed allocation (cudaMallocManaged), each GPU's shard a 2 MiB-aligned region of it written by the CPU, no hints: each GPU faults its region in on first touch; one GPU: um", needs_concurrent_managed, {}, managed("um-shared", {/*prefetch=*/false, /*advise=*/false, /*chunked=*/false, /*skip_resident=*/false, ManagedStrategy::SharedSet::NoHint}), every_form, "", {}, false, stream_needs_concurrent_managed, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"um"},
      {"um-shared-host", "several GPUs: um-shared, but the set kept in host memory (PreferredLocation = host) and mapped for every GPU of the run (AccessedBy): nothing migrates, each GPU's kernels read its batch over the bus; one GPU: um", needs_concurrent_managed, {}, managed("um-shared-host", {/*prefetch=*/false, /*advise=*/false, /*chunked=*/false, /*skip_resident=*/false, ManagedStrategy::SharedSet::HostAccessed}), every_form, "", {}, false, stream_needs_concurrent_managed, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"um"},
      // Best forms: each names the naive form it improves.
      {"zero-copy-staged", "zero-copy, but an SM kernel reads each chunk of whole packed batches (--copy-chunk MiB) from mapped memory once (16-byte coalesced loads) into K device chunk slots (--depth), in block slots the step leaves free (--stage-blocks), overlapped with the previous chunk's steps (one kernel launch per chunk)", needs_mapping, {depth, stage_blocks, copy_chunk}, after_copy<ZeroCopyStagedStrategy>, chunks_not_in_stream, kChunkRingNote, "zero-copy", false, not_in_stream, staging_blocks, /*gpu_augment=*/copied_refresh_gpu_augment, /*device_footprint=*/nullptr, /*one_gpu_as=*/{}, /*gpu_augment_after_copy=*/true},
      {"um-prefetch-coarse", "um-prefetch, but chunks of whole batches (--prefetch-chunk MiB) one chunk ahead, and no prefetch of data already resident (static: epochs after the first)", needs_concurrent_managed, {prefetch_chunk}, managed("um-prefetch-coarse", {/*prefetch=*/true, /*advise=*/false, /*chunked=*/true, /*skip_resident=*/true}), no_graph, kCoarseNote, "um-prefetch", false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/gpu_augment},
      {"pinned-graph", "pinned, but one copy per chunk of whole packed batches (--copy-chunk MiB; images and labels in one block per batch) on the compute stream, and the whole epoch replayed as one CUDA graph", always, {copy_chunk}, after_copy<PinnedGraphStrategy>, chunks_not_in_stream, kOneChunkSlotNote, "pinned", false, not_in_stream, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/copied_refresh_gpu_augment, /*device_footprint=*/nullptr, /*one_gpu_as=*/{}, /*gpu_augment_after_copy=*/true},
      {"double-buffer-graph", "double-buffer, but one copy per chunk of whole packed batches (--copy-chunk MiB) into K device chunk slots (--depth) on copy stream(s) (--copy-streams), and each chunk's steps in one kernel launch (the whole epoch replayed as one CUDA graph with a step that cannot)", always, {depth, copy_streams, copy_chunk}, after_copy<DoubleBufferGraphStrategy>, chunks_not_in_stream, kChunkRingNote, "double-buffer", false, not_in_stream, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/copied_refresh_gpu_augment, /*device_footprint=*/nullptr, /*one_gpu_as=*/{}, /*gpu_augment_after_copy=*/true},
      {"peer-fanout-ring", "peer-fanout, but one peer copy per chunk of whole packed batches (--copy-chunk MiB) into K local chunk slots (--depth) on copy stream(s) (--copy-streams), overlapped with the previous chunk's steps", needs_first_gpu_access, {depth, copy_streams, copy_chunk}, make<PeerFanoutRingStrategy>, static_every_form, kPeerNote, "peer-fanout", false, static_only, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"resident"},
      {"host-shared-ring", "host-shared, but each GPU's region in the packed layout and moved as double-buffer-graph moves it: one copy per chunk of whole packed batches (--copy-chunk MiB) into K device chunk slots (--depth) on copy stream(s) (--copy-streams), overlapped with the previous chunk's steps; one GPU: double-buffer-graph", always, {depth, copy_streams, copy_chunk}, make<HostSharedRingStrategy>, chunks_not_in_stream, kChunkRingNote, "host-shared", false, not_in_stream, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"double-buffer-graph"},
      {"um-shared-prefetch", "um-shared, but GPU r's region advised PreferredLocation = GPU r and prefetched there as um-prefetch-coarse prefetches (chunks of --prefetch-chunk MiB one ahead, the first epoch only); one GPU: um-prefetch-coarse", needs_concurrent_managed, {prefetch_chunk}, managed("um-shared-prefetch", {/*prefetch=*/true, /*advise=*/false, /*chunked=*/true, /*skip_resident=*/true, ManagedStrategy::SharedSet::RankGpu}), no_graph, kCoarseNote, "um-shared", false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"um-prefetch-coarse"},
      {"um-shared-read-mostly", "um-shared, but the regions advised ReadMostly and GPU r's prefetched to it as um-shared-prefetch's: a read-only duplicate on each GPU, the host copy kept valid; one GPU: um-prefetch-coarse", needs_concurrent_managed, {prefetch_chunk}, managed("um-shared-read-mostly", {/*prefetch=*/true, /*advise=*/false, /*chunked=*/true, /*skip_resident=*/true, ManagedStrategy::SharedSet::ReadMostly}), no_graph, kCoarseNote, "um-shared", false, /*unsupported_with=*/nullptr, /*blocks_beside_step=*/nullptr, /*gpu_augment=*/{}, /*device_footprint=*/nullptr, /*one_gpu_as=*/"um-prefetch-coarse"},
  };
}
}  // namespace

std::string StrategyOption::allowed() const {
  if (kind == OptionKind::Integer) return std::to_string(min) + ".." + std::to_string(max);
  std::string s = "comma-separated subset of ";
  for (std::size_t i = 0; i < choices.size(); ++i) s += (i ? "," : "") + std::string(choices[i]);
  return s + ", or none";
}

const std::vector<StrategyEntry>& strategy_registry() {
  static const std::vector<StrategyEntry> r = with_footprints(make_registry());
  return r;
}

const StrategyEntry* find_strategy(std::string_view name) {
  for (const auto& e : strategy_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string strategy_names() {
  std::string s;
  for (const auto& e : strategy_registry()) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

std::vector<const StrategyEntry*> best_forms_of(std::string_view name) {
  std::vector<const StrategyEntry*> r;
  for (const auto& e : strategy_registry())
    if (!e.improves.empty() && e.improves == name) r.push_back(&e);
  return r;
}

const std::vector<StrategyOption>& strategy_options(std::string_view name) {
  const StrategyEntry* e = find_strategy(name);
  if (e == nullptr)
    throw std::invalid_argument("unknown strategy '" + std::string(name) +
                                "'; choose one of: " + strategy_names());
  return e->options;
}

std::string waiver_reason(const StrategyEntry& e, const StrategyOptions& opt,
                          const DeviceCaps& caps) {
  if (std::string why = e.unsupported(caps); !why.empty()) return why;
  if (std::string why = augment_device_refusal(e, opt); !why.empty()) return why;
  return e.unsupported_with ? e.unsupported_with(opt, caps) : "";
}

std::string gpu_augment_takers() {
  std::vector<std::pair<std::string, std::string>> groups;  // scenarios -> strategies
  for (const StrategyEntry& e : strategy_registry()) {
    if (e.gpu_augment.empty()) continue;
    std::string in;
    for (std::size_t i = 0; i < e.gpu_augment.size(); ++i)
      in += (i == 0 ? "" : i + 1 == e.gpu_augment.size() ? " and " : ", ") +
            std::string(to_string(e.gpu_augment[i]));
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == in; });
    if (it == groups.end())
      groups.emplace_back(in, std::string(e.name));
    else
      it->second += ", " + std::string(e.name);
  }
  std::string s;
  for (const auto& [in, names] : groups) s += (s.empty() ? "" : "; ") + names + " in " + in;
  return s;
}

std::string augment_device_refusal(const StrategyEntry& e, const StrategyOptions& opt) {
  if (opt.augment_device == AugmentDevice::Host) return "";
  const std::string gpu = "--augment-device gpu (taken by: " + gpu_augment_takers() + ")";
  if (opt.scenario == Scenario::Static)
    return gpu + ": the static scenario augments nothing";
  if (opt.scenario == Scenario::Stream && opt.augment == Augment::None)
    return gpu + ": --augment none augments nothing";
  for (const Scenario s : e.gpu_augment)
    if (s == opt.scenario) return "";
  return gpu + ": strategy " + std::string(e.name) + " augments on the host in the " +
         std::string(to_string(opt.scenario)) + " scenario";
}

std::string refusal_reason(const StrategyEntry& e, const StrategyOptions& opt) {
  if (std::string why = augment_device_refusal(e, opt); !why.empty()) return why;
  return e.unsupported_with ? e.unsupported_with(opt, DeviceCaps::every()) : "";
}

EpochFormSet LaunchFormTable::in(Scenario s) const {
  switch (s) {
    case Scenario::Static: return static_forms;
    case Scenario::Refresh: return refresh_forms;
    case Scenario::Stream: return stream_forms;
  }
  return {};
}

std::string launch_form_refusal(const StrategyEntry& e, const StrategyOptions& opt, EpochForm f) {
  const EpochFormSet runs = e.launch_forms.in(opt.scenario);
  if (runs.contains(f)) return "";
  std::string why = "strategy " + std::string(e.name) + " runs " +
                    (runs.empty() ? std::string("no launch form") : runs.to_string()) +
                    " in the " + std::string(to_string(opt.scenario)) + " scenario";
  if (opt.scenario == Scenario::Stream)
    return why + ": in the stream scenario batches are handed over at run time (host workers) "
                 "or gathered into one batch buffer, one after the other";
  return e.launch_note.empty() ? why : why + ": " + std::string(e.launch_note);
}

std::uint64_t device_footprint(const StrategyEntry& e, const StrategyOptions& opt,
                               std::int64_t samples, int features) {
  const BatchGeometry g{samples, opt.batch, transfer_bytes_per_sample(features, opt.transfer)};
  return e.device_footprint(opt, g);
}

std::unique_ptr<MemoryStrategy> make_supported(const StrategyEntry& e, const DeviceCaps& caps) {
  if (const std::string why = e.unsupported(caps); !why.empty())
    throw std::runtime_error("strategy '" + std::string(e.name) +
                             "' is waived on this device: " + why);
  return e.make();
}

}  // namespace memstrat
