// multi_gpu_bench.cu: MultiGpuBench (see the header). Streams: GPU d's stream towards peer p is
// stream(d, p); a transfer is issued on its source's stream for the copy engines (as PyTorch's
// copy_ between devices does) and on its destination's for the SM forms (the kernel runs where
// the data lands and reads the peer's memory); h2d and NCCL use stream(d, d).
#include "experiments/primitives/multi_gpu_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "common/nccl_comm.h"
#include "common/nccl_settings.h"
#include "experiments/primitives/device_pattern.h"
#include "experiments/primitives/pattern.h"
#include "experiments/primitives/sm_copy.h"

namespace memstrat {

namespace {

constexpr std::uint32_t kDeviceSeed = 0xD000;  // GPU g's device source: kDeviceSeed + g
constexpr std::uint32_t kHostSeed = 0x4000;    // GPU g's pinned host source: kHostSeed + g
std::size_t words(std::size_t bytes) { return bytes / sizeof(std::uint32_t); }

// The collectives' inputs and expected outputs (the header's formulas), kind: 0 all-reduce,
// 1 all-gather, 2 broadcast. Every value is a small integer (+0.5): sums are exact in float.
__device__ float collective_input(int kind, int rank, std::size_t i) {
  const float base = static_cast<float>(i % 251);
  if (kind == 0) return base + static_cast<float>(rank);
  if (kind == 1) return 256.f * static_cast<float>(rank) + base + 1.f;
  return base + 0.5f;
}

__global__ void fill_collective_kernel(float* p, std::size_t n, int kind, int rank) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = collective_input(kind, rank, i);
}

// count: elements per rank (all-gather: out holds gpus x count, chunk r from rank r).
__global__ void check_collective_kernel(const float* out, std::size_t n, int kind, int gpus,
                                        std::size_t count, unsigned long long* bad) {
  unsigned long long wrong = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float want;
    if (kind == 0) {
      want = static_cast<float>(gpus) * static_cast<float>(i % 251) +
             static_cast<float>(gpus * (gpus - 1) / 2);
    } else if (kind == 1) {
      const int r = static_cast<int>(i / count);
      want = collective_input(1, r, i - static_cast<std::size_t>(r) * count);
    } else {
      want = collective_input(2, 0, i);
    }
    if (out[i] != want) ++wrong;
  }
  if (wrong) atomicAdd(bad, wrong);
}

int grid_for(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>((n + 255) / 256, 4096));
}

int collective_kind(MultiGpuPattern p) {
  return p == MultiGpuPattern::NcclAllReduce ? 0 : p == MultiGpuPattern::NcclAllGather ? 1 : 2;
}

bool wants(const std::vector<const MultiGpuPatternEntry*>& ps,
           const std::function<bool(MultiGpuPattern)>& pred) {
  return std::any_of(ps.begin(), ps.end(), [&](const auto* e) { return pred(e->pattern); });
}

struct PerGpu {
  std::vector<Stream> streams;  // [peer]
  std::vector<Event> start, stop;  // [peer]: the timing events of stream [peer]
  DeviceBuffer<std::uint32_t> src, dst;
  DeviceBuffer<std::uint32_t> landing;  // GPU 0, all-to-one: (N-1) slots of max bytes
  PinnedBuffer<std::uint32_t> host;     // host patterns: this GPU's pinned source
  DevicePatternCheck check;
  DeviceBuffer<unsigned long long> bad;
  PinnedBuffer<unsigned long long> bad_host;
  int sm_grid = 0;
};

// A unit of work of one sample: issued on stream(dev, peer), with dev current.
struct Op {
  int dev = 0, peer = 0;
  std::function<void(cudaStream_t)> issue;
};

}  // namespace

struct MultiGpuBench::Impl {
  int n = 0;
  std::size_t max = 0;
  std::vector<PerGpu> g;
  std::vector<std::vector<bool>> peer;
#if MEMSTRAT_HAVE_NCCL
  std::vector<NcclComm> comms;
#endif
  bool have_comms = false;

  cudaStream_t stream(int d, int p) { return g[d].streams[p]; }

  // The copies of one sample of c, in the order of MultiGpuSample::stream_us.
  std::vector<Op> copies(const MultiGpuCase& c, std::size_t bytes) {
    std::vector<Op> ops;
    auto ce = [&](int from, int to, std::uint32_t* dst) {
      ops.push_back({from, to, [this, from, to, dst, bytes](cudaStream_t s) {
                       CUDA_CHECK(cudaMemcpyPeerAsync(dst, to, g[from].src.data(), from, bytes, s));
                     }});
    };
    auto sm = [&](int from, int to) {
      ops.push_back({to, from, [this, from, to, bytes](cudaStream_t s) {
                       sm_copy(g[to].dst.data(), g[from].src.data(), bytes, g[to].sm_grid, s);
                     }});
    };
    auto h2d = [&](int d) {
      ops.push_back({d, d, [this, d, bytes](cudaStream_t s) {
                       CUDA_CHECK(cudaMemcpyAsync(g[d].dst.data(), g[d].host.data(), bytes,
                                                  cudaMemcpyHostToDevice, s));
                     }});
    };
    switch (c.entry->pattern) {
      case MultiGpuPattern::H2dAlone: h2d(c.dst); break;
      case MultiGpuPattern::H2dAll: for (int d = 0; d < n; ++d) h2d(d); break;
      case MultiGpuPattern::D2dCe: ce(c.src, c.dst, g[c.dst].dst.data()); break;
      case MultiGpuPattern::D2dSm: sm(c.src, c.dst); break;
      case MultiGpuPattern::D2dCeBothWays:
        ce(c.src, c.dst, g[c.dst].dst.data());
        ce(c.dst, c.src, g[c.src].dst.data());
        break;
      case MultiGpuPattern::D2dSmBothWays:
        sm(c.src, c.dst);
        sm(c.dst, c.src);
        break;
      case MultiGpuPattern::OneToAll:
        for (int k = 1; k < n; ++k) ce(0, k, g[k].dst.data());
        break;
      case MultiGpuPattern::AllToOne:
        for (int k = 1; k < n; ++k) ce(k, 0, landing_slot(k));
        break;
      default:
        break;
    }
    return ops;
  }

  std::uint32_t* landing_slot(int from) {
    return g[0].landing.data() + static_cast<std::size_t>(from - 1) * words(max);
  }

  // One repetition of a collective over every rank, as one NCCL group.
  void collective(MultiGpuPattern p, std::size_t bytes) {
#if MEMSTRAT_HAVE_NCCL
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      const float* in = reinterpret_cast<const float*>(g[r].src.data());
      float* out = reinterpret_cast<float*>(g[r].dst.data());
      if (p == MultiGpuPattern::NcclAllReduce)
        NCCL_CHECK(ncclAllReduce(in, out, bytes / sizeof(float), ncclFloat, ncclSum,
                                 comms[r].get(), stream(r, r)));
      else if (p == MultiGpuPattern::NcclAllGather)
        NCCL_CHECK(ncclAllGather(in, out, all_gather_count(bytes, n), ncclFloat, comms[r].get(),
                                 stream(r, r)));
      else
        NCCL_CHECK(ncclBroadcast(in, out, bytes / sizeof(float), ncclFloat, 0, comms[r].get(),
                                 stream(r, r)));
    }
    NCCL_CHECK(ncclGroupEnd());
#else
    (void)p;
    (void)bytes;
    throw std::logic_error("NCCL collective in a build without NCCL");
#endif
  }

  ~Impl() {
#if MEMSTRAT_HAVE_NCCL
    comms.clear();
#endif
    for (int d = 0; d < static_cast<int>(g.size()); ++d) {
      cudaSetDevice(d);  // each GPU's resources are released with it current
      g[d] = PerGpu{};
    }
  }
};

MultiGpuBench::MultiGpuBench(int gpus, std::size_t max_bytes,
                             const std::vector<const MultiGpuPatternEntry*>& patterns)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.n = gpus;
  m.max = max_bytes;
  const bool host = wants(patterns, [](MultiGpuPattern p) {
    return p == MultiGpuPattern::H2dAlone || p == MultiGpuPattern::H2dAll;
  });
  const bool landing = wants(patterns, [](MultiGpuPattern p) { return p == MultiGpuPattern::AllToOne; });
  const bool nccl = wants(patterns, is_collective);
  m.g.resize(gpus);
  for (int d = 0; d < gpus; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    PerGpu& x = m.g[d];
    for (int p = 0; p < gpus; ++p) {
      x.streams.push_back(Stream::create());
      x.start.push_back(Event::create());
      x.stop.push_back(Event::create());
    }
    x.src = DeviceBuffer<std::uint32_t>(words(max_bytes));
    x.dst = DeviceBuffer<std::uint32_t>(words(max_bytes));
    x.check = DevicePatternCheck::create();
    x.bad = DeviceBuffer<unsigned long long>(1);
    x.bad_host = PinnedBuffer<unsigned long long>(1);
    x.sm_grid = sm_copy_full_grid(d);
    if (host) {
      x.host = PinnedBuffer<std::uint32_t>(words(max_bytes));
      fill_pattern_host(x.host.data(), x.host.size(), kHostSeed + static_cast<std::uint32_t>(d));
    }
    if (d == 0 && landing)
      x.landing = DeviceBuffer<std::uint32_t>(words(max_bytes) * static_cast<std::size_t>(gpus - 1));
  }
  m.peer.assign(gpus, std::vector<bool>(gpus, false));
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
      m.peer[a][b] = can != 0;
      if (!can) continue;
      CUDA_CHECK(cudaSetDevice(a));
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // enabled before (process-wide state): fine
      else
        CUDA_CHECK(e);
    }
#if MEMSTRAT_HAVE_NCCL
  if (nccl) {
    std::vector<int> devices(gpus);
    for (int d = 0; d < gpus; ++d) devices[d] = d;
    m.comms = NcclComm::init_all(devices);
    m.have_comms = true;
  }
#else
  (void)nccl;
#endif
  CUDA_CHECK(cudaSetDevice(0));
}

MultiGpuBench::~MultiGpuBench() = default;

int MultiGpuBench::gpus() const { return impl_->n; }

const std::vector<std::vector<bool>>& MultiGpuBench::peer_access() const { return impl_->peer; }

std::string MultiGpuBench::unsupported(const MultiGpuCase& c) const {
  const Impl& m = *impl_;
  const MultiGpuPattern p = c.entry->pattern;
  if (is_collective(p) && !kHaveNccl) return kNcclHowTo;
  if (p == MultiGpuPattern::D2dSm || p == MultiGpuPattern::D2dSmBothWays) {
    // the kernel on dst reads src's memory: dst needs access to src (both, both ways)
    const bool ok = m.peer[c.dst][c.src] &&
                    (p == MultiGpuPattern::D2dSm || m.peer[c.src][c.dst]);
    if (!ok)
      return "no peer access between GPU " + std::to_string(c.src) + " and GPU " +
             std::to_string(c.dst) + " (cudaDeviceCanAccessPeer): an SM cannot read the other "
             "GPU's memory";
  }
  return "";
}

void MultiGpuBench::prepare(const MultiGpuCase& c) {
  Impl& m = *impl_;
  const MultiGpuPattern p = c.entry->pattern;
  if (p == MultiGpuPattern::H2dAlone || p == MultiGpuPattern::H2dAll) return;  // written once
  for (int d = 0; d < m.n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    const cudaStream_t s = m.stream(d, d);
    if (is_collective(p)) {
      const std::size_t n = words(m.max);
      fill_collective_kernel<<<grid_for(n), 256, 0, s>>>(reinterpret_cast<float*>(m.g[d].src.data()),
                                                        n, collective_kind(p), d);
      CUDA_CHECK(cudaGetLastError());
    } else {
      fill_pattern_device(m.g[d].src.data(), words(m.max), kDeviceSeed + static_cast<std::uint32_t>(d), s);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
  }
  CUDA_CHECK(cudaSetDevice(0));
}

void MultiGpuBench::clear(const MultiGpuCase& c, std::size_t bytes) {
  Impl& m = *impl_;
  const MultiGpuPattern p = c.entry->pattern;
  const std::size_t moved = measured_bytes(p, bytes, m.n);
  for (int d = 0; d < m.n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMemsetAsync(m.g[d].dst.data(), 0, moved, m.stream(d, d)));
    if (d == 0 && p == MultiGpuPattern::AllToOne)
      for (int k = 1; k < m.n; ++k)
        CUDA_CHECK(cudaMemsetAsync(m.landing_slot(k), 0, moved, m.stream(0, 0)));
    CUDA_CHECK(cudaStreamSynchronize(m.stream(d, d)));
  }
  CUDA_CHECK(cudaSetDevice(0));
}

MultiGpuSample MultiGpuBench::sample(const MultiGpuCase& c, std::size_t bytes, int iters) {
  Impl& m = *impl_;
  const MultiGpuPattern p = c.entry->pattern;
  const std::size_t moved = measured_bytes(p, bytes, m.n);
  MultiGpuSample out;
  clear(c, bytes);  // not timed
  if (is_collective(p)) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) m.collective(p, moved);
    for (int d = 0; d < m.n; ++d) CUDA_CHECK(cudaStreamSynchronize(m.stream(d, d)));
    const auto t1 = std::chrono::steady_clock::now();
    out.us = std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
    CUDA_CHECK(cudaSetDevice(0));
    return out;
  }
  const std::vector<Op> ops = m.copies(c, moved);
  if (!is_host_timed(p)) {  // one stream: its events
    const Op& op = ops.front();
    CUDA_CHECK(cudaSetDevice(op.dev));
    const cudaStream_t s = m.stream(op.dev, op.peer);
    CUDA_CHECK(cudaEventRecord(m.g[op.dev].start[op.peer], s));
    op.issue(s);
    CUDA_CHECK(cudaEventRecord(m.g[op.dev].stop[op.peer], s));
    CUDA_CHECK(cudaEventSynchronize(m.g[op.dev].stop[op.peer]));
    out.us = 1e3 * static_cast<double>(elapsed_ms(m.g[op.dev].start[op.peer], m.g[op.dev].stop[op.peer]));
    CUDA_CHECK(cudaSetDevice(0));
    return out;
  }
  // Several streams at once: the host clock over all of them, each stream's own events beside.
  const auto t0 = std::chrono::steady_clock::now();
  for (const Op& op : ops) {
    CUDA_CHECK(cudaSetDevice(op.dev));
    CUDA_CHECK(cudaEventRecord(m.g[op.dev].start[op.peer], m.stream(op.dev, op.peer)));
  }
  for (int i = 0; i < iters; ++i)
    for (const Op& op : ops) {
      CUDA_CHECK(cudaSetDevice(op.dev));
      op.issue(m.stream(op.dev, op.peer));
    }
  for (const Op& op : ops) {
    CUDA_CHECK(cudaSetDevice(op.dev));
    CUDA_CHECK(cudaEventRecord(m.g[op.dev].stop[op.peer], m.stream(op.dev, op.peer)));
  }
  for (const Op& op : ops) CUDA_CHECK(cudaEventSynchronize(m.g[op.dev].stop[op.peer]));
  const auto t1 = std::chrono::steady_clock::now();
  out.us = std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
  for (const Op& op : ops)
    out.stream_us.push_back(
        1e3 * static_cast<double>(elapsed_ms(m.g[op.dev].start[op.peer], m.g[op.dev].stop[op.peer])) /
        iters);
  CUDA_CHECK(cudaSetDevice(0));
  return out;
}

std::string MultiGpuBench::verify(const MultiGpuCase& c, std::size_t bytes) {
  Impl& m = *impl_;
  const MultiGpuPattern p = c.entry->pattern;
  const std::size_t moved = measured_bytes(p, bytes, m.n);
  std::string why;
  // `at` GPU's memory `mem` must hold the pattern of `seed`
  auto expect = [&](int at, const std::uint32_t* mem, std::uint32_t seed, const std::string& what) {
    if (!why.empty()) return;
    CUDA_CHECK(cudaSetDevice(at));
    if (const std::string w = m.g[at].check.run(mem, moved, seed, m.stream(at, at)); !w.empty())
      why = what + ": " + w;
  };
  auto from_gpu = [](int d) { return kDeviceSeed + static_cast<std::uint32_t>(d); };
  switch (p) {
    case MultiGpuPattern::H2dAlone:
      expect(c.dst, m.g[c.dst].dst.data(), kHostSeed + static_cast<std::uint32_t>(c.dst),
             "GPU " + std::to_string(c.dst));
      break;
    case MultiGpuPattern::H2dAll:
      for (int d = 0; d < m.n; ++d)
        expect(d, m.g[d].dst.data(), kHostSeed + static_cast<std::uint32_t>(d), "GPU " + std::to_string(d));
      break;
    case MultiGpuPattern::D2dCe:
    case MultiGpuPattern::D2dSm:
      expect(c.dst, m.g[c.dst].dst.data(), from_gpu(c.src), "GPU " + std::to_string(c.dst));
      break;
    case MultiGpuPattern::D2dCeBothWays:
    case MultiGpuPattern::D2dSmBothWays:
      expect(c.dst, m.g[c.dst].dst.data(), from_gpu(c.src), "GPU " + std::to_string(c.dst));
      expect(c.src, m.g[c.src].dst.data(), from_gpu(c.dst), "GPU " + std::to_string(c.src));
      break;
    case MultiGpuPattern::OneToAll:
      for (int k = 1; k < m.n; ++k)
        expect(k, m.g[k].dst.data(), from_gpu(0), "GPU " + std::to_string(k));
      break;
    case MultiGpuPattern::AllToOne:
      for (int k = 1; k < m.n; ++k)
        expect(0, m.landing_slot(k), from_gpu(k), "GPU 0's copy from GPU " + std::to_string(k));
      break;
    default: {  // the collectives: every rank's output
      const int kind = collective_kind(p);
      const std::size_t n = moved / sizeof(float);
      const std::size_t count = p == MultiGpuPattern::NcclAllGather ? all_gather_count(bytes, m.n) : n;
      for (int d = 0; d < m.n && why.empty(); ++d) {
        CUDA_CHECK(cudaSetDevice(d));
        PerGpu& x = m.g[d];
        const cudaStream_t s = m.stream(d, d);
        CUDA_CHECK(cudaMemsetAsync(x.bad.data(), 0, sizeof(unsigned long long), s));
        check_collective_kernel<<<grid_for(n), 256, 0, s>>>(
            reinterpret_cast<const float*>(x.dst.data()), n, kind, m.n, count, x.bad.data());
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(x.bad_host.data(), x.bad.data(), sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        if (x.bad_host[0] != 0)
          why = "GPU " + std::to_string(d) + ": " + std::to_string(x.bad_host[0]) + " of " +
                std::to_string(n) + " floats differ from the exact result";
      }
    }
  }
  CUDA_CHECK(cudaSetDevice(0));
  return why;
}

}  // namespace memstrat
