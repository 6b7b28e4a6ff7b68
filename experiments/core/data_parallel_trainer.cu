#include "experiments/core/data_parallel_trainer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "common/nccl_comm.h"
#include "common/nvtx.h"
#include "experiments/core/data_parallel_request.h"
#include "experiments/core/gradient_reduction.h"
#include "experiments/core/test_evaluator.h"
#include "memory_strategies/registry.h"
#include "memory_strategies/replica_group.h"

namespace memstrat {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

// Declared so that they are destroyed communicator first, stream last.
struct DataParallelTrainer::Replica {
  int device = 0;
  int first_shard = 0;  // the rank (several GPUs), 0 (the emulation)
  Stream compute;
  std::unique_ptr<Mlp> mlp;
  std::unique_ptr<MemoryStrategy> strategy;
  std::unique_ptr<GradientReduction> reduction;
  std::optional<TestEvaluator> test;     // rank 0 only
  std::vector<Event> ready, data, done;  // ready/data per shard turn, done per global batch
  DeviceBuffer<float> sample_loss;
  DeviceBuffer<std::int32_t> sample_correct;
  PinnedBuffer<float> host_loss;
  PinnedBuffer<std::int32_t> host_correct;
#if MEMSTRAT_HAVE_NCCL
  NcclComm comm;
#endif
};

struct DataParallelTrainer::Times {
  double host_ms = 0, gpu_ms = 0, stall_ms = 0, compute_ms = 0, idle_ms = 0;
};

DataParallelTrainer::DataParallelTrainer(const RunConfig& cfg, const HostDataset& data)
    : plan_(data.n_train(), cfg.batch, cfg.shards()),
      local_shards_(cfg.gpus > 1 ? 1 : cfg.shards()),
      off_reason_(kDataParallelFormReason) {
  if (!cfg.data_parallel()) throw std::invalid_argument("DataParallelTrainer: one shard");
  if (const std::string why = data_parallel_refusal(cfg); !why.empty())
    throw std::invalid_argument(why);
  const int n = cfg.gpus;  // replicas
  std::vector<int> devices;
  for (int r = 0; r < n; ++r) devices.push_back(cfg.device + r);
  // What the ranks' strategies share (peer-fanout: the set on rank 0's GPU); declared before the
  // replicas, so it outlives every strategy.
  if (n > 1) group_ = std::make_unique<ReplicaGroup>(devices);
#if MEMSTRAT_HAVE_NCCL
  std::vector<NcclComm> comms;
  if (n > 1) comms = NcclComm::init_all(devices);
#endif
  MlpConfig mc = mlp_config(cfg, data.features(), data.classes);
  mc.step = StepKind::Layerwise;  // gradients apart from the update (kDataParallelStepReason)
  const std::size_t n_train = static_cast<std::size_t>(data.n_train());
  for (int r = 0; r < n; ++r) {
    auto p = std::make_unique<Replica>();
    p->device = devices[r];
    p->first_shard = n > 1 ? r : 0;
    CUDA_CHECK(cudaSetDevice(p->device));
    p->compute = Stream::create();
    nvtx_name_stream(p->compute, ("compute gpu " + std::to_string(p->device)).c_str());
    p->mlp = std::make_unique<Mlp>(mc, p->compute);
    // Every call below runs with this replica's device current (cudaSetDevice above, and again
    // on each replica's thread): the strategy's streams, events, device buffers and kernels, its
    // host memory's mapping and the device its prefetches and hints name are this GPU's.
    StrategyOptions so = strategy_options(cfg);
    if (n > 1) {  // its own shard as its own epoch, its batches acquired in order
      so.shard = r;
      so.shards = n;
      so.group = group_.get();
    }
    p->strategy = cfg.strategy->make();
    p->strategy->attach(data, so, p->compute);
    ncclComm* comm = nullptr;
#if MEMSTRAT_HAVE_NCCL
    if (n > 1) {
      p->comm = std::move(comms[static_cast<std::size_t>(r)]);
      comm = p->comm.get();
    }
#endif
    p->reduction = std::make_unique<GradientReduction>(cfg.reduce, mc.layers, plan_.shards(),
                                                       p->first_shard, local_shards_,
                                                       p->mlp->gradient_buffer(), comm, p->compute);
    const int turns = plan_.global_batches() * local_shards_;
    for (int i = 0; i < turns; ++i) {
      p->ready.push_back(Event::create());
      p->data.push_back(Event::create());
    }
    for (int g = 0; g < plan_.global_batches(); ++g) p->done.push_back(Event::create());
    p->sample_loss = DeviceBuffer<float>(n_train);
    p->sample_correct = DeviceBuffer<std::int32_t>(n_train);
    p->host_loss = PinnedBuffer<float>(n_train);
    p->host_correct = PinnedBuffer<std::int32_t>(n_train);
    if (r == 0) p->test.emplace(*p->mlp, data, cfg.batch, p->compute);
    replicas_.push_back(std::move(p));
  }
  host_loss_.resize(n_train);
  // One reduction of zeros now: NCCL connects its channels at a communicator's first collective
  // (allocating), which belongs to the set-up, not to epoch 1. It writes only the gradient
  // buffers, which every step overwrites.
  on_replicas([&](int i) {
    Replica& p = *replicas_[static_cast<std::size_t>(i)];
    CUDA_CHECK(cudaSetDevice(p.device));
    for (int s = 0; s < local_shards_; ++s)
      CUDA_CHECK(cudaMemsetAsync(p.reduction->shard_buffer(p.first_shard + s), 0,
                                 p.reduction->count() * sizeof(float), p.compute));
    p.reduction->combine();
    wait(p);
  });
  CUDA_CHECK(cudaSetDevice(replicas_.front()->device));  // the caller's device: rank 0's
}

DataParallelTrainer::~DataParallelTrainer() = default;

Mlp& DataParallelTrainer::model() { return *replicas_.front()->mlp; }

void DataParallelTrainer::on_replicas(const std::function<void(int)>& fn) {
  if (replicas_.size() == 1) {
    fn(0);
    return;
  }
  failed_ = false;
  std::exception_ptr first;
  std::mutex m;
  std::vector<std::thread> threads;
  for (int i = 0; i < replicas(); ++i)
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        failed_ = true;
        std::lock_guard<std::mutex> lock(m);
        if (!first) first = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

void DataParallelTrainer::wait(Replica& p) {
#if MEMSTRAT_HAVE_NCCL
  if (p.comm) {
    // A rank whose peer failed would wait for ever on a collective the peer never joins: poll.
    for (;;) {
      const cudaError_t q = cudaStreamQuery(p.compute);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(p.comm.get(), &async));
      if (async != ncclSuccess) {
        p.comm.abort();
        throw_nccl_error(async, "ncclCommGetAsyncError", __FILE__, __LINE__);
      }
      if (failed_) {
        p.comm.abort();
        throw std::runtime_error("GPU " + std::to_string(p.device) +
                                 ": stopped, another GPU's replica failed");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
#endif
  CUDA_CHECK(cudaStreamSynchronize(p.compute));
}

void DataParallelTrainer::run_replica(Replica& p, int epoch, Times& t) {
  CUDA_CHECK(cudaSetDevice(p.device));
  const auto t0 = Clock::now();
  {
    NvtxRange hr(Phase::HostPrep, "host-prep");
    p.strategy->begin_epoch(epoch);
  }
  t.host_ms = ms_since(t0);
  const std::size_t grad_bytes = p.reduction->count() * sizeof(float);
  for (int g = 0; g < plan_.global_batches(); ++g) {
    NvtxRange br(Phase::Batch, "global batch " + std::to_string(g));
    const float scale = plan_.gradient_scale(g);
    for (int s = 0; s < local_shards_; ++s) {
      const int r = p.first_shard + s;
      const int turn = g * local_shards_ + s;
      const ShardRange sh = plan_.shard(g, r);
      float* slot = p.reduction->shard_buffer(r);
      CUDA_CHECK(cudaEventRecord(p.ready[turn], p.compute));
      if (sh.rows == 0) {  // past the end of the epoch: a zero gradient
        CUDA_CHECK(cudaEventRecord(p.data[turn], p.compute));
        CUDA_CHECK(cudaMemsetAsync(slot, 0, grad_bytes, p.compute));
        continue;
      }
      // Several GPUs: the strategy serves this rank's shard as its own epoch, in which single-GPU
      // batch g·N + r is its batch g (StrategyOptions::shard); its rows keep their epoch rows.
      const int b = replicas() > 1 ? g : sh.batch;
      BatchView v = p.strategy->acquire(b);
      if (v.rows != sh.rows)
        throw std::logic_error("GPU " + std::to_string(p.device) + ": strategy " +
                               std::string(p.strategy->name()) + " gave " +
                               std::to_string(v.rows) + " rows for shard " + std::to_string(r) +
                               " of global batch " + std::to_string(g) + ", which has " +
                               std::to_string(sh.rows));
      v.first_sample = sh.first;
      CUDA_CHECK(cudaEventRecord(p.data[turn], p.compute));
      p.mlp->shard_gradients(v, scale, slot, p.sample_loss.data(), p.sample_correct.data());
      p.strategy->release(b);
    }
    p.reduction->combine();
    p.mlp->apply_gradients(p.reduction->result());
    CUDA_CHECK(cudaEventRecord(p.done[g], p.compute));
  }
  p.strategy->end_epoch();
  wait(p);

  // Outside the timed region.
  const int G = plan_.global_batches();
  t.gpu_ms = elapsed_ms(p.ready.front(), p.done.back());
  for (int g = 0; g < G; ++g)
    for (int s = 0; s < local_shards_; ++s) {
      const int turn = g * local_shards_ + s;
      t.stall_ms += elapsed_ms(p.ready[turn], p.data[turn]);
    }
  for (int g = 0; g + 1 < G; ++g)
    t.idle_ms += elapsed_ms(p.done[g], p.ready[(g + 1) * local_shards_]);
  t.compute_ms = t.gpu_ms - t.stall_ms - t.idle_ms;
  const std::size_t n = p.sample_loss.size();
  CUDA_CHECK(cudaMemcpyAsync(p.host_loss.data(), p.sample_loss.data(), n * sizeof(float),
                             cudaMemcpyDeviceToHost, p.compute));
  CUDA_CHECK(cudaMemcpyAsync(p.host_correct.data(), p.sample_correct.data(),
                             n * sizeof(std::int32_t), cudaMemcpyDeviceToHost, p.compute));
  CUDA_CHECK(cudaStreamSynchronize(p.compute));
}

EpochResult DataParallelTrainer::run_epoch(int epoch) {
  EpochResult r;
  r.epoch = epoch;
  NvtxRange er(Phase::Epoch, "epoch " + std::to_string(epoch));
  std::vector<Times> times(replicas_.size());
  const auto t0 = Clock::now();
  on_replicas([&](int i) {
    run_replica(*replicas_[static_cast<std::size_t>(i)], epoch, times[static_cast<std::size_t>(i)]);
  });
  r.wall_ms = ms_since(t0);

  // Everything below is outside the timed region.
  const auto slowest = std::max_element(times.begin(), times.end(), [](const Times& a, const Times& b) {
    return a.gpu_ms < b.gpu_ms;
  });
  r.gpu_ms = slowest->gpu_ms;
  r.stall_ms = slowest->stall_ms;
  r.compute_ms = slowest->compute_ms;
  r.idle_ms = slowest->idle_ms;
  for (const Times& t : times) r.host_ms = std::max(r.host_ms, t.host_ms);
  for (const auto& p : replicas_) {
    const StrategyStats s = p->strategy->stats();
    r.strategy.h2d_bytes += s.h2d_bytes;
    r.strategy.peer_bytes += s.peer_bytes;
    r.strategy.host_ms += s.host_ms;
    if (s.copy_ms) r.strategy.copy_ms = r.strategy.copy_ms.value_or(0.0) + *s.copy_ms;
    if (replicas_.size() == 1) r.strategy.producer = s.producer;
  }
  // Each row's loss from the replica that computed it.
  double loss = 0, correct = 0;
  for (int g = 0; g < plan_.global_batches(); ++g)
    for (int rank = 0; rank < plan_.shards(); ++rank) {
      const ShardRange sh = plan_.shard(g, rank);
      const Replica& p = *replicas_[static_cast<std::size_t>(local_shards_ == 1 ? rank : 0)];
      for (std::int64_t i = sh.first; i < sh.first + sh.rows; ++i) {
        host_loss_[static_cast<std::size_t>(i)] = p.host_loss[i];
        loss += p.host_loss[i];
        correct += p.host_correct[i];
      }
    }
  const double n = static_cast<double>(plan_.samples());
  r.train_loss = loss / n;
  r.train_acc = correct / n;
  return r;
}

EvalResult DataParallelTrainer::evaluate() {
  Replica& p = *replicas_.front();
  CUDA_CHECK(cudaSetDevice(p.device));
  return p.test->evaluate();
}

}  // namespace memstrat
