#include "memory_strategies/batch_producer.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/nvtx.h"
#include "memory_strategies/epoch_data.h"  // write_rows, transfer_bytes_per_sample

namespace memstrat {

namespace {
double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

BatchProducer::BatchProducer(const HostDataset& data, const ProducerConfig& cfg,
                             std::vector<SlotMemory> slot_memory)
    : data_(&data),
      cfg_(cfg),
      slots_(std::move(slot_memory)),
      geom_{cfg.shards > 1 && cfg.batch > 0 && cfg.shard >= 0 && cfg.shard < cfg.shards
                ? shard_rows(data.n_train(), cfg.batch, cfg.shard, cfg.shards)
                : data.n_train(),
            cfg.batch, transfer_bytes_per_sample(data.features(), cfg.transfer)},
      order_(data.n_train(), cfg.seed) {
  if (cfg.shards < 1 || cfg.shard < 0 || cfg.shard >= cfg.shards)
    throw std::invalid_argument("BatchProducer: shard " + std::to_string(cfg.shard) + " of " +
                                std::to_string(cfg.shards) + " does not exist");
  if (cfg.workers < 1)
    throw std::invalid_argument("BatchProducer: workers must be >= 1, got " +
                                std::to_string(cfg.workers));
  if (cfg.batch < 1)
    throw std::invalid_argument("BatchProducer: batch must be >= 1, got " +
                                std::to_string(cfg.batch));
  if (slots_.empty()) throw std::invalid_argument("BatchProducer: needs at least one slot");
  for (const SlotMemory& m : slots_)
    if (m.images == nullptr || m.labels == nullptr)
      throw std::invalid_argument("BatchProducer: a slot without images or labels memory");
  if (data.n_train() < 1) throw std::invalid_argument("BatchProducer: empty training set");

  if (cfg.gpu_release) {
    CUDA_CHECK(cudaGetDevice(&device_));
    for (std::size_t s = 0; s < slots_.size(); ++s)
      // Polled (wait_released), not blocking-sync. A blocking-sync waiter sleeps until the
      // driver's event-handler thread wakes it, one wake-up per released slot; with 8 or 16
      // workers waiting that way, some processes ran every epoch far slower than others
      // (double-buffer, light, 16 workers on an H200: more than twice the epoch), and
      // polling removed that spread at 8 and 16 workers.
      release_events_.push_back(Event::create(cudaEventDisableTiming));
  }
  ring_.resize(slots_.size());
  slot_cvs_ = std::vector<std::condition_variable>(slots_.size());
  for (std::size_t s = 0; s < ring_.size(); ++s) ring_[s].seq = static_cast<std::int64_t>(s);
  scratch_.assign(static_cast<std::size_t>(cfg.workers),
                  std::vector<std::uint8_t>(static_cast<std::size_t>(data.features())));
  worker_busy_ms_.assign(static_cast<std::size_t>(cfg.workers), 0.0);
  stats_.workers = cfg.workers;
  stats_.slots = slots();

  threads_.reserve(static_cast<std::size_t>(cfg.workers));
  try {
    for (int w = 0; w < cfg.workers; ++w) threads_.emplace_back(&BatchProducer::work, this, w);
  } catch (...) {  // could not start them all: stop the ones that run
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
    throw;
  }
}

BatchProducer::~BatchProducer() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  notify_all_slots();
  ready_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchProducer::notify_all_slots() {
  for (std::condition_variable& cv : slot_cvs_) cv.notify_all();
}

void BatchProducer::fail(std::exception_ptr e) {
  if (!error_) error_ = std::move(e);
  work_cv_.notify_all();
  notify_all_slots();
  ready_cv_.notify_all();
}

void BatchProducer::work(int worker) {
  char name[16];
  std::snprintf(name, sizeof name, "producer %d", worker);
  pthread_setname_np(pthread_self(), name);  // shown by Nsight Systems, gdb, top -H
  try {
    if (cfg_.gpu_release) CUDA_CHECK(cudaSetDevice(device_));  // the events' device
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      work_cv_.wait(lk, [&] { return stop_ || error_ || (active_ && next_claim_ < batches()); });
      if (stop_ || error_) return;
      const int b = next_claim_++;
      const int epoch = epoch_;
      const std::int64_t seq = base_ + b;
      const int s = slot_of(seq);
      Slot& slot = ring_[static_cast<std::size_t>(s)];
      const auto wait_start = Clock::now();
      slot_cvs_[static_cast<std::size_t>(s)].wait(lk, [&] {
        return stop_ || error_ ||
               (slot.seq == seq &&
                (slot.state == State::Free || slot.state == State::ReleasePending));
      });
      if (stop_ || error_) return;
      const bool gpu_pending = slot.state == State::ReleasePending;
      slot.state = State::Filling;
      lk.unlock();
      if (gpu_pending)
        wait_released(release_events_[static_cast<std::size_t>(s)]);
      const auto fill_start = Clock::now();
      fill(worker, epoch, b, s);
      const auto fill_end = Clock::now();
      lk.lock();
      slot.state = State::Ready;
      const double busy = ms_between(fill_start, fill_end);
      stats_.slot_wait_ms += ms_between(wait_start, fill_start);
      stats_.busy_ms += busy;
      worker_busy_ms_[static_cast<std::size_t>(worker)] += busy;
      stats_.batches += 1;
      stats_.samples += rows(b);
      stats_.span_ms = ms_between(epoch_start_, fill_end);
      ready_cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu_);
    fail(std::current_exception());
  }
}

void BatchProducer::wait_released(cudaEvent_t e) {
  // Poll, yielding the core between queries: a worker that waits here gives way to any other
  // runnable thread (a worker that fills, the trainer) instead of spinning, and sees the GPU's
  // release within one scheduling round instead of a driver wake-up.
  for (;;) {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) CUDA_CHECK(r);
    std::this_thread::yield();
  }
}

void BatchProducer::fill(int worker, int epoch, int b, int s) {
  char name[32];
  std::snprintf(name, sizeof name, "produce batch %d", b);
  NvtxRange range(Phase::Produce, name);
  const EpochRows rows{data_,      order_.order(), cfg_.augment, cfg_.transfer, cfg_.seed,
                       epoch,      cfg_.shard,     cfg_.shards,  cfg_.batch};
  const SlotMemory& m = slots_[static_cast<std::size_t>(s)];
  write_rows(rows, geom_.first(b), geom_.rows(b), m.images, m.labels,
             scratch_[static_cast<std::size_t>(worker)].data());
  if (cfg_.after_fill) cfg_.after_fill(worker, b);
}

void BatchProducer::begin_epoch(int epoch) {
  std::lock_guard<std::mutex> lk(mu_);
  if (error_) std::rethrow_exception(error_);
  if (active_ && next_wait_ < batches())
    throw std::logic_error("BatchProducer::begin_epoch(" + std::to_string(epoch) + "): batch " +
                           std::to_string(next_wait_) + " of epoch " + std::to_string(epoch_) +
                           " was never taken (wait_ready every batch of an epoch)");
  if (active_) {
    // The next multiple of K: batch b of this epoch goes to slot b mod K, as in every epoch.
    const std::int64_t k = slots();
    base_ = (base_ + batches() + k - 1) / k * k;
    // A slot handed back already waits for a number that may have been skipped; held slots
    // are moved on when they come back (advance).
    for (Slot& slot : ring_)
      if (slot.state == State::Free || slot.state == State::ReleasePending)
        while (slot.seq < base_) slot.seq += k;
  }
  // No worker reads the order now: every batch of the last epoch is written and taken.
  order_.set_epoch(epoch);
  epoch_ = epoch;
  next_claim_ = next_wait_ = 0;
  active_ = true;
  stats_ = ProducerStats{};
  stats_.workers = cfg_.workers;
  stats_.slots = slots();
  std::fill(worker_busy_ms_.begin(), worker_busy_ms_.end(), 0.0);
  epoch_start_ = Clock::now();
  work_cv_.notify_all();
  notify_all_slots();  // slots moved on to this epoch's numbers
}

int BatchProducer::wait_ready(int b) {
  std::unique_lock<std::mutex> lk(mu_);
  if (error_) std::rethrow_exception(error_);
  if (!active_ || b != next_wait_ || b >= batches())
    throw std::logic_error("BatchProducer::wait_ready(" + std::to_string(b) + "): expected batch " +
                           std::to_string(next_wait_) + " of " + std::to_string(batches()) +
                           (active_ ? "" : " (begin_epoch first)"));
  const std::int64_t seq = base_ + b;
  const int s = slot_of(seq);
  Slot& slot = ring_[static_cast<std::size_t>(s)];
  if (slot.state == State::Held)  // by an earlier batch: nobody else can ever free it
    throw std::logic_error("BatchProducer::wait_ready(" + std::to_string(b) + "): its slot " +
                           std::to_string(s) + " is still held by an earlier batch; release it " +
                           "first (the consumer may hold at most K-1 = " +
                           std::to_string(slots() - 1) + " slots while it waits)");
  auto ready = [&] { return error_ || (slot.seq == seq && slot.state == State::Ready); };
  if (!ready()) {
    const auto t0 = Clock::now();
    ready_cv_.wait(lk, ready);
    const double waited = ms_between(t0, Clock::now());
    stats_.consumer_wait_ms += waited;
    stats_.consumer_waits += 1;
    if (b == 0) stats_.first_wait_ms = waited;
  }
  if (error_) std::rethrow_exception(error_);
  slot.state = State::Held;
  ++next_wait_;
  return s;
}

BatchProducer::Slot& BatchProducer::checked_held(int s, const char* what) {
  if (s < 0 || s >= slots() || ring_[static_cast<std::size_t>(s)].state != State::Held)
    throw std::logic_error(std::string("BatchProducer::") + what + "(" + std::to_string(s) +
                           "): not a slot returned by wait_ready and not yet released");
  return ring_[static_cast<std::size_t>(s)];
}

void BatchProducer::release(int s) {
  std::lock_guard<std::mutex> lk(mu_);
  Slot& slot = checked_held(s, "release");
  slot.state = State::Free;
  advance(slot);
  slot_cvs_[static_cast<std::size_t>(s)].notify_all();
}

void BatchProducer::release_after(int s, cudaStream_t stream) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!cfg_.gpu_release)
    throw std::logic_error("BatchProducer::release_after: constructed without gpu_release");
  Slot& slot = checked_held(s, "release_after");
  CUDA_CHECK(cudaEventRecord(release_events_[static_cast<std::size_t>(s)], stream));
  slot.state = State::ReleasePending;
  advance(slot);
  slot_cvs_[static_cast<std::size_t>(s)].notify_all();
}

void BatchProducer::advance(Slot& slot) const {
  slot.seq += slots();
  while (slot.seq < base_) slot.seq += slots();  // held across an epoch boundary
}

ProducerStats BatchProducer::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  ProducerStats s = stats_;
  for (double b : worker_busy_ms_) s.busy_max_ms = std::max(s.busy_max_ms, b);
  return s;
}

}  // namespace memstrat
