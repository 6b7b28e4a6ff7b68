// cuda_raii.h: move-only owners for CUDA resources: Stream, Event, DeviceBuffer, PinnedBuffer
// (cudaMallocHost / cudaHostAlloc with flags), ManagedBuffer, CublasHandle, GraphExec (and
// capture_graph, which makes one from a stream capture).
// No raw cudaFree / cudaFreeHost outside common/.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "common/cuda_check.h"

namespace memstrat {

class Stream {
 public:
  Stream() = default;
  /// Non-blocking: never implicitly synchronises with the legacy default stream. `priority`:
  /// 0 is the default; lower (negative) numbers are scheduled first, down to the greatest
  /// priority of cudaDeviceGetStreamPriorityRange.
  static Stream create(unsigned flags = cudaStreamNonBlocking, int priority = 0) {
    Stream s;
    if (priority == 0)
      CUDA_CHECK(cudaStreamCreateWithFlags(&s.s_, flags));
    else
      CUDA_CHECK(cudaStreamCreateWithPriority(&s.s_, flags, priority));
    return s;
  }
  ~Stream() { reset(); }
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) { reset(); s_ = std::exchange(o.s_, nullptr); }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }
  void reset() {
    if (s_) CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_));
    s_ = nullptr;
  }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  static Event create(unsigned flags = cudaEventDefault) {
    Event e;
    CUDA_CHECK(cudaEventCreateWithFlags(&e.e_, flags));
    return e;
  }
  /// An event used only for ordering between streams (cheaper: no timestamp).
  static Event create_sync_only() { return create(cudaEventDisableTiming); }
  ~Event() { reset(); }
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    if (this != &o) { reset(); e_ = std::exchange(o.e_, nullptr); }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  operator cudaEvent_t() const { return e_; }
  void reset() {
    if (e_) CUDA_CHECK_NOTHROW(cudaEventDestroy(e_));
    e_ = nullptr;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

/// Milliseconds between two recorded timing events (both must have completed).
inline float elapsed_ms(cudaEvent_t start, cudaEvent_t stop) {
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

namespace detail {
enum class MemKind { Device, Pinned, Managed };
void* alloc(MemKind k, std::size_t bytes, unsigned flags);
void release(MemKind k, void* p) noexcept;
}  // namespace detail

/// Typed owner of `count` elements of memory of one kind.
template <typename T, detail::MemKind K>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t count, unsigned flags = 0)
      : p_(static_cast<T*>(detail::alloc(K, count * sizeof(T), flags))), n_(count) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  bool empty() const { return n_ == 0; }
  T& operator[](std::size_t i) const { return p_[i]; }  // host-visible kinds only
  void reset() noexcept {
    if (p_) detail::release(K, p_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// cudaMalloc
template <typename T>
using DeviceBuffer = Buffer<T, detail::MemKind::Device>;
/// cudaHostAlloc(flags): flags 0 = plain pinned (== cudaMallocHost), cudaHostAllocMapped for zero-copy
template <typename T>
using PinnedBuffer = Buffer<T, detail::MemKind::Pinned>;
/// cudaMallocManaged(flags = cudaMemAttachGlobal)
template <typename T>
using ManagedBuffer = Buffer<T, detail::MemKind::Managed>;

class CublasHandle {
 public:
  CublasHandle() = default;
  static CublasHandle create();
  ~CublasHandle() { reset(); }
  CublasHandle(CublasHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& o) noexcept {
    if (this != &o) { reset(); h_ = std::exchange(o.h_, nullptr); }
    return *this;
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }
  void reset() noexcept;

 private:
  cublasHandle_t h_ = nullptr;
};

/// The device's address of host memory `p` allocated with cudaHostAllocMapped (a PinnedBuffer
/// with that flag): what a kernel reads it through, zero-copy.
template <typename T>
T* mapped_device_pointer(T* p) {
  void* d = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&d, const_cast<void*>(static_cast<const void*>(p)), 0));
  return static_cast<T*>(d);
}

/// True when at least one CUDA device is usable. Never throws.
bool cuda_device_available(std::string* reason = nullptr);

}  // namespace memstrat

namespace memstrat {

/// Owner of an instantiated CUDA graph.
class GraphExec {
 public:
  GraphExec() = default;
  explicit GraphExec(cudaGraphExec_t g) : g_(g) {}
  ~GraphExec() { reset(); }
  GraphExec(GraphExec&& o) noexcept : g_(std::exchange(o.g_, nullptr)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    if (this != &o) { reset(); g_ = std::exchange(o.g_, nullptr); }
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  cudaGraphExec_t get() const { return g_; }
  explicit operator bool() const { return g_ != nullptr; }
  void reset() {
    if (g_) CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(g_));
    g_ = nullptr;
  }

 private:
  cudaGraphExec_t g_ = nullptr;
};

/// Captures what `body()` enqueues on `stream` (stream capture in `mode`) and instantiates it.
/// If body or the capture fails, the capture is ended and the partial graph destroyed before
/// the exception leaves.
template <typename Body>
GraphExec capture_graph(cudaStream_t stream, cudaStreamCaptureMode mode, Body&& body) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
  CUDA_CHECK(err);
  return GraphExec(exec);
}

}  // namespace memstrat
