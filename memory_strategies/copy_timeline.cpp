#include "memory_strategies/copy_timeline.h"

#include <algorithm>

namespace memstrat {

namespace {
// Under stream capture a plain cudaEventRecord only expresses a dependency inside the graph and
// never records at replay; an external event node records the event every time the graph runs,
// so the copy times of a replayed epoch can be read like those of an enqueued one.
void record(cudaEvent_t e, cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  CUDA_CHECK(cudaEventRecordWithFlags(
      e, s,
      st == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault));
}
}  // namespace

void CopyTimeline::allocate(int batches) {
  start_.clear();
  stop_.clear();
  for (int i = 0; i < batches; ++i) {
    start_.push_back(Event::create());
    stop_.push_back(Event::create());
  }
  used_.assign(static_cast<std::size_t>(batches), 0);
  bytes_.assign(static_cast<std::size_t>(batches), 0);
}

void CopyTimeline::begin_epoch() {
  std::fill(used_.begin(), used_.end(), 0);
  std::fill(bytes_.begin(), bytes_.end(), 0);
}

void CopyTimeline::start(int b, cudaStream_t s) { record(start_[b], s); }

void CopyTimeline::stop(int b, cudaStream_t s, std::uint64_t bytes) {
  record(stop_[b], s);
  used_[b] = 1;
  bytes_[b] = bytes;
}

std::optional<double> CopyTimeline::total_ms() const {
  double total = 0.0;
  bool any = false;
  for (std::size_t b = 0; b < used_.size(); ++b) {
    if (!used_[b]) continue;
    total += elapsed_ms(start_[b], stop_[b]);
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

StrategyStats CopyTimeline::stats() const {
  StrategyStats s;
  for (const std::uint64_t b : bytes_) s.h2d_bytes += b;
  s.copy_ms = total_ms();
  return s;
}

}  // namespace memstrat
