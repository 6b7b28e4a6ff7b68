#include "memory_strategies/managed.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/nvtx.h"
#include "memory_strategies/host_shared_set.h"  // shard_region
#include "memory_strategies/replica_group.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

void ManagedStrategy::advise_range(const void* ptr, std::size_t bytes, const AdviseSet& a) {
  if (a.read_mostly) advise(ptr, bytes, UmAdvice::ReadMostly, device_);
  if (a.preferred_device) advise(ptr, bytes, UmAdvice::PreferredLocationDevice, device_);
  if (a.accessed_by) advise(ptr, bytes, UmAdvice::AccessedByDevice, device_);
}

std::uint64_t ManagedStrategy::device_footprint(const StrategyOptions& opt,
                                               const BatchGeometry& g) {
  // Managed memory counts in full: the suite never lets it exceed the device (check_managed_fits),
  // so a managed set the device must hold whole is what it takes. The stream scenario's host-fed
  // slots are the managed memory there.
  if (opt.scenario == Scenario::Stream && !gathers_on_gpu(opt))
    return static_cast<std::uint64_t>(opt.prefetch) *
           stream_slot_bytes(opt.batch, g.image_bytes_per_sample);
  const std::uint64_t epoch = g.epoch_bytes();
  // Refresh on the GPU: the uint8 set and the epoch the kernel writes (both managed), and the
  // order. Stream, the GPU gathers: the set in its format (uint8 where the GPU augments), the
  // order and one batch.
  if (writes_epoch_on_gpu(opt))
    return GpuEpochWriter::set_bytes(g, opt.transfer) + epoch + GpuEpochWriter::order_bytes(g);
  if (gathers_on_gpu(opt)) return GatherInput::set_bytes(opt, g) + GatherInput::device_bytes(g);
  return epoch;
}

void ManagedStrategy::attach(const HostDataset& data, const StrategyOptions& opt,
                             cudaStream_t compute) {
  if (hints_.chunked && opt.prefetch_chunk_mib < 1)
    throw std::invalid_argument(name_ + ": --prefetch-chunk must be >= 1 (MiB)");
  CUDA_CHECK(cudaGetDevice(&device_));
  source_.configure(data, opt, compute);
  const BatchGeometry& g = source_.geometry();
  const bool stream = opt.scenario == Scenario::Stream;
  const bool gpu_epoch = writes_epoch_on_gpu(opt);
  // The data the CPU writes once and never again: static data, the set the GPU gathers from, the
  // set the GPU writes each epoch from (what the prefetches move).
  static_data_ = opt.scenario == Scenario::Static || gathers_on_gpu(opt) || gpu_epoch;
  // The stream scenario's batches come from host workers into each rank's own managed slots
  // (there is no set to share); several GPUs never gather on the GPU, nor augment on it
  // (data_parallel_request.h).
  const bool shared = hints_.shared != SharedSet::Off && opt.group != nullptr && !stream;
  if (shared && (gathers_on_gpu(opt) || gpu_epoch))
    throw std::logic_error(name_ + ": several GPUs do not gather or augment batches on the GPU");
  // The set in managed memory: the epoch the CPU writes, the set the GPU gathers from (in its
  // format), or the uint8 set the GPU writes each epoch from (the epoch beside it).
  const std::size_t set_row_bytes =
      gpu_epoch ? static_cast<std::size_t>(data.features())
      : gathers_on_gpu(opt)
          ? transfer_bytes_per_sample(data.features(), GatherInput::set_format(opt))
          : g.image_bytes_per_sample;
  const BatchGeometry set_geom{g.samples, g.batch, set_row_bytes};
  const std::size_t set_image_bytes = static_cast<std::size_t>(g.samples) * set_row_bytes;
  if (stream && !gathers_on_gpu(opt)) {
    slots_.attach(data, opt, SlotKind::Managed, name_.c_str());
  } else if (!shared) {
    const std::size_t epoch_bytes = gpu_epoch ? source_.image_bytes() + source_.label_bytes() : 0;
    check_managed_fits(set_image_bytes + source_.label_bytes() + epoch_bytes, name_.c_str());
    images_ = ManagedBuffer<std::uint8_t>(set_image_bytes);
    labels_ = ManagedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()));
    images_at_ = images_.data();
    labels_at_ = labels_.data();
    if (gpu_epoch) {
      epoch_images_ = ManagedBuffer<std::uint8_t>(source_.image_bytes());
      epoch_labels_ = ManagedBuffer<std::int32_t>(static_cast<std::size_t>(source_.samples()));
    }
  }
  if (hints_.advise) {
    NvtxRange r(Phase::Advise, "advise");
    if (slots_.attached()) {
      advise_range(slots_.memory(), slots_.memory_bytes(), opt.advise);
    } else if (!shared) {
      advise_range(images_.data(), images_.bytes(), opt.advise);
      advise_range(labels_.data(), labels_.bytes(), opt.advise);
      if (gpu_epoch) {
        // The GPU rewrites the epoch every epoch: ReadMostly (data written rarely, read copies
        // kept) would make each rewrite collapse them. The placement hints only.
        AdviseSet epoch_hints = opt.advise;
        epoch_hints.read_mostly = false;
        advise_range(epoch_images_.data(), epoch_images_.bytes(), epoch_hints);
        advise_range(epoch_labels_.data(), epoch_labels_.bytes(), epoch_hints);
      }
    }
  }
  if (hints_.prefetch) {
    // What is prefetched: the epoch the CPU wrote, or the set the GPU reads (the GPU writes the
    // epoch itself, where it is).
    const BatchGeometry& pg = slots_.attached() ? g : set_geom;
    plan_ = hints_.chunked
                ? ChunkPlan::split(pg, static_cast<std::size_t>(opt.prefetch_chunk_mib) << 20)
                : ChunkPlan::per_batch(pg);
    prefetch_stream_ = Stream::create();
    nvtx_name_stream(prefetch_stream_, "prefetch");
    // Per chunk; the stream scenario's host slots and per-batch gathers prefetch per batch.
    const int events = stream ? std::max(plan_->chunks(), g.batches()) : plan_->chunks();
    for (int c = 0; c < events; ++c) ready_.push_back(Event::create_sync_only());
    timeline_.allocate(events);
    if (gathers_on_gpu(opt)) {
      sorted_.resize(static_cast<std::size_t>(opt.batch));
      runs_.resize(static_cast<std::size_t>(opt.batch));
    }
  }
  if (slots_.attached()) return;
  if (shared) {
    attach_shared(data, opt);
    return;
  }
  if (gathers_on_gpu(opt)) {
    // Written once by the CPU, in data-set order; the GPU gathers batches from it.
    GatherInput::write_set(data, GatherInput::set_format(opt), images_.data(), labels_.data());
    gather_.attach(data, opt, images_.data(), labels_.data(), compute);
    return;
  }
  if (gpu_epoch) {
    // The uint8 set written once by the CPU, in data-set order; the GPU writes each epoch from it
    // into the managed epoch (first touch on the GPU: its pages never visit the host).
    GatherInput::write_set(data, Transfer::U8, images_.data(), labels_.data());
    const GatherSource set{images_.data(), labels_.data(), data.n_train(),
                           static_cast<std::size_t>(data.features())};
    gpu_writer_.attach_to(data, opt, set, epoch_images_.data(), epoch_labels_.data(), compute);
    return;
  }
  // The CPU writes the data (first touch on the host): the GPU has to fault or prefetch it in.
  source_.bind(images_at_, labels_at_);
}

void ManagedStrategy::attach_shared(const HostDataset& data, const StrategyOptions& opt) {
  set_ = ManagedSharedSet::for_rank(
      opt, [&](int rank) { return shard_region(data, opt, rank).bytes; }, name_.c_str());
  const ShardRegion l = shard_region(data, opt, opt.shard);
  if (l.image_bytes != source_.image_bytes() ||
      l.bytes - l.label_offset !=
          static_cast<std::uint64_t>(source_.samples()) * sizeof(std::int32_t))
    throw std::logic_error(name_ + ": rank " + std::to_string(opt.shard) +
                           "'s region disagrees with its epoch's size");
  std::uint8_t* region = set_->region(opt.shard);
  images_at_ = region;
  labels_at_ = reinterpret_cast<std::int32_t*>(region + l.label_offset);
  // The CPU writes the shard (first touch on the host), then the region is placed: the whole
  // region, alignment padding included, so that its pages carry one placement.
  source_.bind(images_at_, labels_at_);
  const std::size_t bytes = static_cast<std::size_t>(set_->region_bytes(opt.shard));
  NvtxRange r(Phase::Advise, "advise");
  switch (hints_.shared) {
    case SharedSet::Off:
    case SharedSet::NoHint: break;
    case SharedSet::RankGpu: advise(region, bytes, UmAdvice::PreferredLocationDevice, device_); break;
    case SharedSet::ReadMostly: advise(region, bytes, UmAdvice::ReadMostly, device_); break;
    case SharedSet::HostAccessed:
      advise(region, bytes, UmAdvice::PreferredLocationHost, device_);
      for (int rank = 0; rank < opt.group->ranks(); ++rank)
        advise(region, bytes, UmAdvice::AccessedByDevice, opt.group->device(rank));
      break;
  }
}

void ManagedStrategy::begin_epoch(int epoch) {
  // GPU idle here; with concurrentManagedAccess the CPU may write managed memory, which moves
  // (or, with ReadMostly, invalidates) the pages the GPU held.
  if (slots_.attached()) slots_.begin_epoch(epoch);
  if (gather_.attached()) gather_.begin_epoch(epoch);
  if (gpu_writer_.attached())
    gpu_writer_.begin_epoch(epoch);  // the order into staging; acquire(0) enqueues the rest
  else
    source_.begin_epoch(epoch);
  issued_ = 0;
  timeline_.begin_epoch();
  prefetching_ = hints_.prefetch && !(hints_.skip_resident && resident_);
}

void ManagedStrategy::compute_waits(int e) {
  CUDA_CHECK(cudaEventRecord(ready_[e], prefetch_stream_));
  CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), ready_[e], 0));
}

void ManagedStrategy::prefetch_chunk(int c) {
  const SplitChunk k = plan_->split_chunk(c);
  NvtxRange r(Phase::Prefetch, "prefetch");
  timeline_.start(c, prefetch_stream_);
  prefetch_to_device(images_at_ + k.image_offset, k.image_bytes, device_, prefetch_stream_);
  prefetch_to_device(reinterpret_cast<const std::uint8_t*>(labels_at_) + k.label_offset,
                     k.label_bytes, device_, prefetch_stream_);
  timeline_.stop(c, prefetch_stream_, k.bytes());
  CUDA_CHECK(cudaEventRecord(ready_[c], prefetch_stream_));
}

void ManagedStrategy::prefetch_slot(int b, int slot) {
  // The workers finished writing the slot before take() returned, and its previous batch's step
  // finished before they started (release_after), so the prefetch moves this batch only.
  NvtxRange r(Phase::Prefetch, "prefetch");
  const std::uint8_t* block = slots_.device(slot);
  const BatchGeometry& g = slots_.geometry();
  timeline_.start(b, prefetch_stream_);
  std::uint64_t bytes = 0;
  if (hints_.chunked) {  // the slot is the chunk: one call for images and labels
    bytes = slots_.block_bytes(b);
    prefetch_to_device(block, bytes, device_, prefetch_stream_);
  } else {
    prefetch_to_device(block, g.image_bytes(b), device_, prefetch_stream_);
    prefetch_to_device(block + slots_.label_offset(), g.label_bytes(b), device_, prefetch_stream_);
    bytes = g.bytes(b);
  }
  timeline_.stop(b, prefetch_stream_, bytes);
  compute_waits(b);
}

void ManagedStrategy::prefetch_set() {
  while (issued_ < plan_->chunks()) prefetch_chunk(issued_++);
  CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), ready_[plan_->chunks() - 1], 0));
}

void ManagedStrategy::prefetch_rows(int b) {
  const BatchGeometry& g = gather_.geometry();
  if (hints_.chunked) {
    // The whole set, chunk by chunk, before the first gather (any row may be in any batch);
    // end_epoch marks it resident, and later epochs prefetch nothing.
    if (b == 0) prefetch_set();
    return;
  }
  // One call per run of consecutive rows the batch gathers (the driver moves whole pages); the
  // labels, 4 bytes a row, all at once at the epoch's first batch.
  NvtxRange r(Phase::Prefetch, "prefetch");
  timeline_.start(b, prefetch_stream_);
  const int n = row_runs(gather_.rows_of(b), g.rows(b), sorted_.data(), runs_.data());
  std::uint64_t bytes = 0;
  const std::size_t row = gather_.set_row_bytes();  // uint8 where the GPU augments
  for (int i = 0; i < n; ++i) {
    const std::size_t len = static_cast<std::size_t>(runs_[i].count) * row;
    prefetch_to_device(images_.data() + runs_[i].first * row, len, device_, prefetch_stream_);
    bytes += len;
  }
  if (b == 0) {
    prefetch_to_device(labels_.data(), labels_.bytes(), device_, prefetch_stream_);
    bytes += labels_.bytes();
  }
  timeline_.stop(b, prefetch_stream_, bytes);
  compute_waits(b);
}

BatchView ManagedStrategy::acquire(int b) {
  if (slots_.attached()) {
    const int s = slots_.take(b);
    if (prefetching_) prefetch_slot(b, s);
    return slots_.view(slots_.device(s), b);
  }
  if (gather_.attached()) {
    if (prefetching_) prefetch_rows(b);
    return gather_.gather(b);
  }
  if (gpu_writer_.attached()) {
    // Before the epoch's first batch: the set the kernel reads (all of it: any row may be in any
    // batch) goes up on the side stream, then the order and the kernel that writes the epoch.
    if (b == 0) {
      if (prefetching_) prefetch_set();
      gpu_writer_.write();
    }
    return source_.epoch_view(gpu_writer_.images(), gpu_writer_.labels(), b);
  }
  if (prefetching_) {
    // The chunk of batch b (at the first batch only) and the next one go up on the side stream
    // while b computes; per batch, a chunk is one batch.
    const int c = plan_->chunk_of(b);
    const int last = std::min(plan_->chunks(), c + 2);
    while (issued_ < last) prefetch_chunk(issued_++);
    if (plan_->starts_chunk(b)) CUDA_CHECK(cudaStreamWaitEvent(source_.compute(), ready_[c], 0));
  }
  return source_.epoch_view(images_at_, labels_at_, b);
}

void ManagedStrategy::release(int b) {
  // The step that reads batch b's slot in place has been enqueued on the compute stream.
  if (slots_.attached()) slots_.release_after(slots_.slot_of(b), source_.compute());
}

void ManagedStrategy::end_epoch() {
  // Static data, every chunk prefetched this epoch: resident from now on (the CPU never writes
  // it again), so later epochs issue no prefetch at all.
  if (hints_.skip_resident && prefetching_ && static_data_ && issued_ == plan_->chunks())
    resident_ = true;
}

LaunchForms ManagedStrategy::launch_forms() const {
  const bool fixed = !slots_.attached() && !gather_.attached();
  return {fixed, 0, fixed && !hints_.prefetch && source_.written_before_epoch()};
}

StrategyStats ManagedStrategy::stats() const {
  StrategyStats s = timeline_.stats();
  if (slots_.attached()) s.producer = slots_.stats();
  // Plus the order's upload, where the GPU gathers or writes the epoch.
  const auto add = [&s](const StrategyStats& u) {
    s.h2d_bytes += u.h2d_bytes;
    if (u.copy_ms) s.copy_ms = s.copy_ms.value_or(0.0) + *u.copy_ms;
  };
  if (gather_.attached()) add(gather_.stats());
  if (gpu_writer_.attached()) add(gpu_writer_.stats());
  return s;
}

}  // namespace memstrat
