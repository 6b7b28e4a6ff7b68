// primitives.cpp: the transfer primitives, one small class each, and their registry.
//
// Every primitive moves words written with the pattern of pattern.h and checks them after the
// timed region. Sources that never change are written once with kSourceSeed; a destination in
// device memory is cleared before each sample, so a transfer that did not happen leaves zeros,
// which the pattern never contains. Unified-memory primitives put the pages back where a sample
// starts from (host or device) before each sample, outside the timed region.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/cuda_raii.h"
#include "experiments/primitives/device_pattern.h"
#include "experiments/primitives/pattern.h"
#include "experiments/primitives/sizes.h"
#include "experiments/primitives/sm_copy.h"
#include "experiments/primitives/transfer_primitive.h"
#include "memory_strategies/um_hints.h"
#include "memory_strategies/um_hints.h"

namespace memstrat {

std::string_view to_string(TimedBy t) {
  return t == TimedBy::CudaEvents ? "cuda-events" : "steady-clock";
}

std::string_view to_string(Direction d) {
  switch (d) {
    case Direction::HostToDevice:
      return "host-to-device";
    case Direction::DeviceToHost:
      return "device-to-host";
    case Direction::None:
      return "none";
  }
  return "?";
}

namespace {

constexpr std::uint32_t kSourceSeed = 0x5EED;
std::size_t words(std::size_t bytes) { return bytes / sizeof(std::uint32_t); }

// Unified memory migrates within 2 MiB blocks: a fault or a CPU touch may move the rest of the
// block around the pages it needs. Putting [0, block_span) back undoes all a sample moved.
constexpr std::size_t kUvmBlock = std::size_t{2} << 20;
std::size_t block_span(std::size_t bytes, std::size_t max_bytes) {
  return std::min(max_bytes, (bytes + kUvmBlock - 1) / kUvmBlock * kUvmBlock);
}

// Managed memory the CPU wrote (so its pages start on the host), after the free-memory guard.
ManagedBuffer<std::uint32_t> host_written_managed(std::size_t max_bytes, const char* name) {
  try {
    check_managed_fits(max_bytes, name);
  } catch (const std::runtime_error& e) {  // its advice is for training runs; add ours
    throw std::runtime_error(std::string(e.what()) + " Here: a smaller --max-size.");
  }
  ManagedBuffer<std::uint32_t> b(words(max_bytes));
  fill_pattern_host(b.data(), b.size(), kSourceSeed);
  return b;
}

// ---- destination in device memory ------------------------------------------------------------

class IntoDeviceMemory : public TransferPrimitive {
 public:
  TimedBy timed_by() const override { return TimedBy::CudaEvents; }
  Direction direction() const override { return Direction::HostToDevice; }
  Phase phase() const override { return Phase::H2D; }
  void prepare(std::size_t max_bytes, const PrimitiveContext& ctx) override {
    ctx_ = ctx;
    max_ = max_bytes;
    dst_ = DeviceBuffer<std::uint32_t>(words(max_bytes));
    check_ = DevicePatternCheck::create();
    prepare_source(max_bytes);  // last: the managed guard sees the device buffer already taken
  }
  void reset(std::size_t bytes, std::uint32_t) override {
    reset_source(bytes);
    CUDA_CHECK(cudaMemsetAsync(dst_.data(), 0, bytes, ctx_.stream));
  }
  std::string verify(std::size_t bytes, std::uint32_t) override {
    return check_.run(dst_.data(), bytes, kSourceSeed, ctx_.stream);
  }

 protected:
  virtual void prepare_source(std::size_t max_bytes) = 0;
  virtual void reset_source(std::size_t) {}
  PrimitiveContext ctx_;
  std::size_t max_ = 0;
  DeviceBuffer<std::uint32_t> dst_;

 private:
  DevicePatternCheck check_;
};

class PageableH2D final : public IntoDeviceMemory {
 public:
  TimedBy timed_by() const override { return TimedBy::SteadyClock; }
  void transfer(std::size_t bytes, std::uint32_t) override {
    // From pageable memory the driver stages the copy through pinned buffers and the call
    // returns once the source is consumed, perhaps before the last chunk has landed: the copy
    // is complete when the stream is. (The `pageable` strategy issues the same call.)
    CUDA_CHECK(
        cudaMemcpyAsync(dst_.data(), src_.data(), bytes, cudaMemcpyHostToDevice, ctx_.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }

 private:
  void prepare_source(std::size_t max_bytes) override {
    src_.assign(words(max_bytes), 0);
    fill_pattern_host(src_.data(), src_.size(), kSourceSeed);
  }
  std::vector<std::uint32_t> src_;
};

class FromPinnedHost : public IntoDeviceMemory {
 protected:
  explicit FromPinnedHost(unsigned host_alloc_flags) : flags_(host_alloc_flags) {}
  void prepare_source(std::size_t max_bytes) override {
    src_ = PinnedBuffer<std::uint32_t>(words(max_bytes), flags_);
    fill_pattern_host(src_.data(), src_.size(), kSourceSeed);
  }
  PinnedBuffer<std::uint32_t> src_;

 private:
  unsigned flags_;
};

class PinnedH2D final : public FromPinnedHost {
 public:
  PinnedH2D() : FromPinnedHost(0) {}
  void transfer(std::size_t bytes, std::uint32_t) override {
    CUDA_CHECK(
        cudaMemcpyAsync(dst_.data(), src_.data(), bytes, cudaMemcpyHostToDevice, ctx_.stream));
  }
};

// The same bytes as pinned-h2d, as two halves copied at once from two streams: does a second
// copy stream (double-buffer --copy-streams 2) add host-to-device bandwidth?
class PinnedH2DTwoStreams final : public FromPinnedHost {
 public:
  PinnedH2DTwoStreams() : FromPinnedHost(0) {}
  void transfer(std::size_t bytes, std::uint32_t) override {
    const std::size_t half = bytes / 2 / kSizeGranule * kSizeGranule;
    CUDA_CHECK(cudaEventRecord(fork_, ctx_.stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx_.side, fork_, 0));
    CUDA_CHECK(
        cudaMemcpyAsync(dst_.data(), src_.data(), half, cudaMemcpyHostToDevice, ctx_.stream));
    CUDA_CHECK(cudaMemcpyAsync(dst_.data() + words(half), src_.data() + words(half), bytes - half,
                               cudaMemcpyHostToDevice, ctx_.side));
    CUDA_CHECK(cudaEventRecord(join_, ctx_.side));
    CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, join_, 0));
  }

 private:
  void prepare_source(std::size_t max_bytes) override {
    FromPinnedHost::prepare_source(max_bytes);
    fork_ = Event::create_sync_only();
    join_ = Event::create_sync_only();
  }
  Event fork_, join_;
};

class SmCopyFromMapped final : public FromPinnedHost {
 public:
  SmCopyFromMapped() : FromPinnedHost(cudaHostAllocMapped) {}
  void transfer(std::size_t bytes, std::uint32_t) override {
    sm_copy(dst_.data(), mapped_, bytes, grid_, ctx_.stream);
  }

 private:
  void prepare_source(std::size_t max_bytes) override {
    FromPinnedHost::prepare_source(max_bytes);
    CUDA_CHECK(cudaHostGetDevicePointer(&mapped_, src_.data(), 0));
    grid_ = sm_copy_full_grid(ctx_.device);
  }
  void* mapped_ = nullptr;
  int grid_ = 1;
};

// A kernel's first touch of managed pages that live on the host: every page it reads faults
// and migrates. The kernel is the SM copy, so every byte is read once and lands in dst_.
class UmFaultH2D final : public IntoDeviceMemory {
 public:
  void transfer(std::size_t bytes, std::uint32_t) override {
    sm_copy(dst_.data(), src_.data(), bytes, grid_, ctx_.stream);
  }

 private:
  void prepare_source(std::size_t max_bytes) override {
    src_ = host_written_managed(max_bytes, "um-fault-h2d");
    grid_ = sm_copy_full_grid(ctx_.device);
  }
  void reset_source(std::size_t bytes) override {
    prefetch_to_host(src_.data(), block_span(bytes, max_), ctx_.stream);
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  ManagedBuffer<std::uint32_t> src_;
  int grid_ = 1;
};

// ---- destination in host memory --------------------------------------------------------------

class PinnedD2H final : public TransferPrimitive {
 public:
  TimedBy timed_by() const override { return TimedBy::CudaEvents; }
  Direction direction() const override { return Direction::DeviceToHost; }
  Phase phase() const override { return Phase::H2D; }  // the explicit-copy category
  void prepare(std::size_t max_bytes, const PrimitiveContext& ctx) override {
    ctx_ = ctx;
    src_ = DeviceBuffer<std::uint32_t>(words(max_bytes));
    dst_ = PinnedBuffer<std::uint32_t>(words(max_bytes));
  }
  void reset(std::size_t bytes, std::uint32_t seed) override {
    // A new pattern per sample: what an earlier sample left in host memory can not pass.
    fill_pattern_device(src_.data(), words(bytes), seed, ctx_.stream);
  }
  void transfer(std::size_t bytes, std::uint32_t) override {
    CUDA_CHECK(
        cudaMemcpyAsync(dst_.data(), src_.data(), bytes, cudaMemcpyDeviceToHost, ctx_.stream));
  }
  std::string verify(std::size_t bytes, std::uint32_t seed) override {
    return check_pattern_host(dst_.data(), words(bytes), seed);
  }

 private:
  PrimitiveContext ctx_;
  DeviceBuffer<std::uint32_t> src_;
  PinnedBuffer<std::uint32_t> dst_;
};

// ---- managed pages moved in place --------------------------------------------------------------

// Managed pages the CPU wrote, moved in place. The default transfer is the prefetch of [0, n)
// to the GPU; where the pages start from (host or GPU) is the subclass's choice.
class ManagedPages : public TransferPrimitive {
 public:
  ManagedPages(const char* name, bool starts_on_device)
      : name_(name), on_device_(starts_on_device) {}
  TimedBy timed_by() const override { return TimedBy::CudaEvents; }
  Phase phase() const override { return Phase::Prefetch; }
  void prepare(std::size_t max_bytes, const PrimitiveContext& ctx) override {
    ctx_ = ctx;
    max_ = max_bytes;
    check_ = DevicePatternCheck::create();
    pages_ = host_written_managed(max_bytes, name_);
    if (on_device_) to_device(max_bytes);
  }
  void transfer(std::size_t bytes, std::uint32_t) override {
    prefetch_to_device(pages_.data(), bytes, ctx_.device, ctx_.stream);
  }
  std::string verify(std::size_t bytes, std::uint32_t) override {
    return check_.run(pages_.data(), bytes, kSourceSeed, ctx_.stream);
  }

 protected:
  void to_device(std::size_t bytes) {
    prefetch_to_device(pages_.data(), bytes, ctx_.device, ctx_.stream);
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  PrimitiveContext ctx_;
  std::size_t max_ = 0;
  ManagedBuffer<std::uint32_t> pages_;
  DevicePatternCheck check_;

 private:
  const char* name_;
  bool on_device_;
};

class UmPrefetchH2D final : public ManagedPages {
 public:
  UmPrefetchH2D() : ManagedPages("um-prefetch-h2d", false) {}
  Direction direction() const override { return Direction::HostToDevice; }
  void reset(std::size_t bytes, std::uint32_t) override {
    prefetch_to_host(pages_.data(), block_span(bytes, max_), ctx_.stream);
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
};

// The pages are on the GPU already and stay there: what a prefetch costs when nothing moves
// (um-prefetch in the static scenario after epoch 1). Its "bandwidth" is bytes covered per second.
class UmPrefetchResident final : public ManagedPages {
 public:
  UmPrefetchResident() : ManagedPages("um-prefetch-resident", true) {}
  Direction direction() const override { return Direction::None; }
  void reset(std::size_t, std::uint32_t) override {}
};

// The refresh path: one host thread writes managed pages that live on the GPU; each CPU fault
// migrates its pages back before the write lands. Timed with the host clock: it is host work.
class UmHostWrite final : public ManagedPages {
 public:
  UmHostWrite() : ManagedPages("um-host-write", true) {}
  TimedBy timed_by() const override { return TimedBy::SteadyClock; }
  Direction direction() const override { return Direction::DeviceToHost; }
  Phase phase() const override { return Phase::HostPrep; }
  void reset(std::size_t bytes, std::uint32_t) override { to_device(block_span(bytes, max_)); }
  void transfer(std::size_t bytes, std::uint32_t seed) override {
    fill_pattern_host(pages_.data(), words(bytes), seed);
  }
  std::string verify(std::size_t bytes, std::uint32_t seed) override {
    // The GPU must see what the host wrote (a new pattern per sample).
    prefetch_to_device(pages_.data(), bytes, ctx_.device, ctx_.stream);
    return check_.run(pages_.data(), bytes, seed, ctx_.stream);
  }
};

// ---- registry ------------------------------------------------------------------------------

template <typename T>
std::unique_ptr<TransferPrimitive> make() {
  return std::make_unique<T>();
}
std::string always(const DeviceCaps&) { return {}; }
std::string needs_mapping(const DeviceCaps& c) {
  return c.can_map_host_memory ? "" : "device cannot map host memory (canMapHostMemory = 0)";
}
std::string needs_concurrent_managed(const DeviceCaps& c) {
  if (!c.managed_memory) return "device has no managed memory (managedMemory = 0)";
  return c.concurrent_managed_access
             ? ""
             : "needs concurrentManagedAccess = 1 (fault-driven migration and prefetch; not on "
               "this device/OS)";
}

}  // namespace

// One line per primitive.
// clang-format off
const std::vector<PrimitiveEntry>& primitive_registry() {
  static const std::vector<PrimitiveEntry> r = {
      {"pageable-h2d", "std::vector host memory -> device: cudaMemcpyAsync (staged by the driver) + stream sync; host clock", always, make<PageableH2D>},
      {"pinned-h2d", "cudaMallocHost memory -> device: one cudaMemcpyAsync on a copy engine; CUDA events", always, make<PinnedH2D>},
      {"pinned-h2d-2streams", "pinned -> device as two halves, one cudaMemcpyAsync on each of two streams at once; events fork to join", always, make<PinnedH2DTwoStreams>},
      {"pinned-d2h", "device -> cudaMallocHost memory: one cudaMemcpyAsync on a copy engine; CUDA events", always, make<PinnedD2H>},
      {"sm-copy-mapped", "mapped pinned memory -> device by an SM kernel (16-byte coalesced loads, grid fills the GPU); CUDA events", needs_mapping, make<SmCopyFromMapped>},
      {"um-prefetch-h2d", "cudaMemPrefetchAsync of host-resident managed pages to the GPU; CUDA events", needs_concurrent_managed, make<UmPrefetchH2D>},
      {"um-prefetch-resident", "cudaMemPrefetchAsync of managed pages already on the GPU (nothing moves: the call's cost); CUDA events", needs_concurrent_managed, make<UmPrefetchResident>},
      {"um-fault-h2d", "kernel first touch (SM copy) of host-resident managed pages: fault-driven migration; CUDA events", needs_concurrent_managed, make<UmFaultH2D>},
      {"um-host-write", "one host thread writes managed pages that live on the GPU (CPU faults migrate them back: the refresh path); host clock", needs_concurrent_managed, make<UmHostWrite>},
  };
  return r;
}
// clang-format on

const PrimitiveEntry* find_primitive(std::string_view name) {
  for (const auto& e : primitive_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string primitive_names() {
  std::string s;
  for (const auto& e : primitive_registry()) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

}  // namespace memstrat
