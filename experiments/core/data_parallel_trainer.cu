#include "experiments/core/data_parallel_trainer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"
#include "common/nccl_comm.h"
#include "common/nvtx.h"
#include "experiments/core/captured_step.h"
#include "experiments/core/data_parallel_request.h"
#include "experiments/core/gradient_reduction.h"
#include "experiments/core/process_rank.h"
#include "experiments/core/test_evaluator.h"
#include "kernels/single_launch/step_launcher.h"  // step_unsupported_here
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
  int rank = 0;         // the rank (several GPUs), 0 (the emulation)
  Stream compute;
  std::unique_ptr<Mlp> mlp;
  std::unique_ptr<MemoryStrategy> strategy;
  std::unique_ptr<GradientReduction> reduction;
  std::optional<TestEvaluator> test;     // rank 0 only
  std::vector<Event> ready, data, done;  // ready/data per shard turn, done per global batch
  // Per global batch, the combination of the shards' gradients (GradientReduction::combine):
  // recorded on each side of it, inside the update's graph where there is one.
  std::vector<Event> reduce_from, reduced;
  DeviceBuffer<float> sample_loss;
  DeviceBuffer<std::int32_t> sample_correct;
  PinnedBuffer<float> host_loss;
  PinnedBuffer<std::int32_t> host_correct;
  // One process per GPU: this rank's epoch figures and every rank's, gathered after the epoch.
  DeviceBuffer<double> figures, all_figures;
  PinnedBuffer<double> host_figures;
#if MEMSTRAT_HAVE_NCCL
  NcclComm comm;
#endif
  // --graphs on where data_parallel_graphs(): each shard turn's gradients and each global batch's
  // reduction and update, captured in epoch 1 and replayed (a turn's recaptured where its view
  // changes). After the communicator, so destroyed before it: the update graphs hold its NCCL work.
  std::vector<CapturedStep> shard_graphs;  // per turn
  std::vector<GraphExec> update_graphs;    // per global batch
};

struct DataParallelTrainer::Times {
  double host_ms = 0, gpu_ms = 0, stall_ms = 0, compute_ms = 0, idle_ms = 0, reduce_ms = 0;
};

namespace {
// An event recorded on `s` as part of the step: while `s` is being captured, an event-record node
// of the graph (recorded, with its time, at each replay); otherwise an ordinary record
// (cudaEventRecordExternal is refused outside capture).
void record_in_step(cudaEvent_t e, cudaStream_t s, bool capturing) {
  CUDA_CHECK(cudaEventRecordWithFlags(e, s, capturing ? cudaEventRecordExternal
                                                      : cudaEventRecordDefault));
}
}  // namespace

DataParallelTrainer::DataParallelTrainer(const RunConfig& cfg, const HostDataset& data)
    : plan_(data.n_train(), cfg.batch, cfg.shards()),
      local_shards_(cfg.gpus > 1 ? 1 : cfg.shards()),
      sharded_(cfg.gpus > 1),
      per_process_(cfg.gpus > 1 && cfg.processes == Processes::PerGpu),
      graphs_(data_parallel_graphs(cfg)),
      time_reduce_(cfg.profile),
      off_reason_(kDataParallelFormReason) {
  if (!cfg.data_parallel()) throw std::invalid_argument("DataParallelTrainer: one shard");
  if (const std::string why = data_parallel_refusal(cfg); !why.empty())
    throw std::invalid_argument(why);
  // Replicas in this process: every GPU's (one process), or this process's own (one per GPU).
  const int n = per_process_ ? 1 : cfg.gpus;
  std::vector<int> devices;
  if (per_process_) {
    devices.push_back(local_device(cfg));
  } else {
    for (int r = 0; r < n; ++r) devices.push_back(cfg.device + r);
  }
  // What the ranks' strategies share (peer-fanout: the set on rank 0's GPU); declared before the
  // replicas, so it outlives every strategy. One process per GPU shares nothing in memory.
  if (n > 1) group_ = std::make_unique<ReplicaGroup>(devices);
#if MEMSTRAT_HAVE_NCCL
  std::vector<NcclComm> comms;
  if (n > 1) comms = NcclComm::init_all(devices);
  if (per_process_) {
    CUDA_CHECK(cudaSetDevice(devices.front()));
    comms.push_back(NcclComm::init_rank(cfg.gpus, cfg.rank()));
  }
#endif
  MlpConfig mc = mlp_config(cfg, data.features(), data.classes);
  // A step whose gradients come apart from its update: --fused's choice, the cuBLASLt fused step
  // excepted (kDataParallelStepReason). Asked of the first GPU; every replica's Mlp must then
  // take it.
  CUDA_CHECK(cudaSetDevice(devices.front()));
  step_ = choose_gradient_step(mc, kernels::step_unsupported_here);
  mc.step = step_.kind;
  const std::size_t n_train = static_cast<std::size_t>(data.n_train());
  for (int r = 0; r < n; ++r) {
    auto p = std::make_unique<Replica>();
    p->device = devices[r];
    p->rank = per_process_ ? cfg.rank() : r;
    p->first_shard = sharded_ ? p->rank : 0;
    CUDA_CHECK(cudaSetDevice(p->device));
    p->compute = Stream::create();
    nvtx_name_stream(p->compute, ("compute gpu " + std::to_string(p->device)).c_str());
    p->mlp = std::make_unique<Mlp>(mc, p->compute);
    if (p->mlp->step() != step_.kind)
      throw std::runtime_error(
          "GPU " + std::to_string(p->device) + " runs the " + p->mlp->step_kind() + " step, GPU " +
          std::to_string(devices.front()) + " the " + std::string(to_string(step_.kind)) +
          " one (" + p->mlp->single_off_reason() +
          "); every GPU of data-parallel training runs the same step");
    // Every call below runs with this replica's device current (cudaSetDevice above, and again
    // on each replica's thread): the strategy's streams, events, device buffers and kernels, its
    // host memory's mapping and the device its prefetches and hints name are this GPU's.
    StrategyOptions so = strategy_options(cfg);
    if (sharded_) {  // its own shard as its own epoch, its batches acquired in order
      so.shard = p->rank;
      so.shards = cfg.gpus;
      so.group = group_.get();  // null with one process per GPU
    }
    p->strategy = cfg.strategy->make();
    p->strategy->attach(data, so, p->compute);
    ncclComm* comm = nullptr;
#if MEMSTRAT_HAVE_NCCL
    if (sharded_) {
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
    for (int g = 0; g < plan_.global_batches(); ++g) {
      p->done.push_back(Event::create());
      p->reduce_from.push_back(Event::create());
      p->reduced.push_back(Event::create());
    }
    if (graphs_) {
      p->shard_graphs.resize(static_cast<std::size_t>(turns));
      p->update_graphs.resize(static_cast<std::size_t>(plan_.global_batches()));
    }
    p->sample_loss = DeviceBuffer<float>(n_train);
    p->sample_correct = DeviceBuffer<std::int32_t>(n_train);
    p->host_loss = PinnedBuffer<float>(n_train);
    p->host_correct = PinnedBuffer<std::int32_t>(n_train);
    if (per_process_) {
      // Every rank's rows are summed over the processes after each epoch: the others' rows must
      // be zeros here (and are zeroed again after each sum).
      CUDA_CHECK(cudaMemsetAsync(p->sample_loss.data(), 0, p->sample_loss.bytes(), p->compute));
      CUDA_CHECK(cudaMemsetAsync(p->sample_correct.data(), 0, p->sample_correct.bytes(),
                                 p->compute));
      p->figures = DeviceBuffer<double>(kFigures);
      p->all_figures = DeviceBuffer<double>(kFigures * static_cast<std::size_t>(cfg.gpus));
      p->host_figures = PinnedBuffer<double>(kFigures * (static_cast<std::size_t>(cfg.gpus) + 1));
    }
    if (p->rank == 0) p->test.emplace(*p->mlp, data, cfg.batch, p->compute);
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
      const int b = sharded_ ? g : sh.batch;
      BatchView v = p.strategy->acquire(b);
      if (v.rows != sh.rows)
        throw std::logic_error("GPU " + std::to_string(p.device) + ": strategy " +
                               std::string(p.strategy->name()) + " gave " +
                               std::to_string(v.rows) + " rows for shard " + std::to_string(r) +
                               " of global batch " + std::to_string(g) + ", which has " +
                               std::to_string(sh.rows));
      v.first_sample = sh.first;
      CUDA_CHECK(cudaEventRecord(p.data[turn], p.compute));
      if (graphs_) {
        CapturedStep& c = p.shard_graphs[static_cast<std::size_t>(turn)];
        if (!c.exec || !same_view(c.view, v)) {
          c.exec = capture_graph(p.compute, cudaStreamCaptureModeThreadLocal, [&] {
            p.mlp->shard_gradients(v, scale, slot, p.sample_loss.data(), p.sample_correct.data());
          });
          c.view = v;
        }
        CUDA_CHECK(cudaGraphLaunch(c.exec.get(), p.compute));
      } else {
        p.mlp->shard_gradients(v, scale, slot, p.sample_loss.data(), p.sample_correct.data());
      }
      p.strategy->release(b);
    }
    auto update = [&] {
      // Captured where the step replays graphs (the lambda runs only to capture there).
      if (time_reduce_) record_in_step(p.reduce_from[g], p.compute, graphs_);
      p.reduction->combine();
      if (time_reduce_) record_in_step(p.reduced[g], p.compute, graphs_);
      p.mlp->apply_gradients(p.reduction->result());
    };
    if (graphs_) {
      GraphExec& u = p.update_graphs[static_cast<std::size_t>(g)];
      if (!u) u = capture_graph(p.compute, cudaStreamCaptureModeThreadLocal, update);
      CUDA_CHECK(cudaGraphLaunch(u.get(), p.compute));
    } else {
      update();
    }
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
  if (time_reduce_)
    for (int g = 0; g < G; ++g) t.reduce_ms += elapsed_ms(p.reduce_from[g], p.reduced[g]);
  const std::size_t n = p.sample_loss.size();
#if MEMSTRAT_HAVE_NCCL
  if (per_process_) {  // every rank's rows, from their processes (the others' rows are zeros)
    NCCL_CHECK(ncclAllReduce(p.sample_loss.data(), p.sample_loss.data(), n, ncclFloat, ncclSum,
                             p.comm.get(), p.compute));
    NCCL_CHECK(ncclAllReduce(p.sample_correct.data(), p.sample_correct.data(), n, ncclInt32,
                             ncclSum, p.comm.get(), p.compute));
  }
#endif
  CUDA_CHECK(cudaMemcpyAsync(p.host_loss.data(), p.sample_loss.data(), n * sizeof(float),
                             cudaMemcpyDeviceToHost, p.compute));
  CUDA_CHECK(cudaMemcpyAsync(p.host_correct.data(), p.sample_correct.data(),
                             n * sizeof(std::int32_t), cudaMemcpyDeviceToHost, p.compute));
  if (per_process_) {  // zeros again where the next epoch's sum expects the other ranks' rows
    CUDA_CHECK(cudaMemsetAsync(p.sample_loss.data(), 0, p.sample_loss.bytes(), p.compute));
    CUDA_CHECK(cudaMemsetAsync(p.sample_correct.data(), 0, p.sample_correct.bytes(), p.compute));
  }
  wait(p);
}

namespace {
// One rank's epoch figures, as gathered between the processes of --processes per-gpu.
enum Figure { kWall, kHost, kGpu, kStall, kCompute, kIdle, kReduce, kH2d, kPeer, kStrategyHost, kCopy,
              kHasCopy,
              // the stream scenario's producers (ProducerStats), kHasProducer 1 where there are
              kHasProducer, kPWorkers, kPSlots, kPBatches, kPSamples, kPBusy, kPBusyMax,
              kPSlotWait, kPConsumerWait, kPFirstWait, kPConsumerWaits, kPSpan, kFigureCount };
}  // namespace

std::vector<double> DataParallelTrainer::gather_figures(Replica& p, const double* mine) {
  static_assert(static_cast<std::size_t>(kFigureCount) == kFigures, "every figure is gathered");
  const std::size_t world = static_cast<std::size_t>(plan_.shards());
  std::copy(mine, mine + kFigures, p.host_figures.data());
#if MEMSTRAT_HAVE_NCCL
  CUDA_CHECK(cudaMemcpyAsync(p.figures.data(), p.host_figures.data(), kFigures * sizeof(double),
                             cudaMemcpyHostToDevice, p.compute));
  NCCL_CHECK(ncclAllGather(p.figures.data(), p.all_figures.data(), kFigures, ncclDouble,
                           p.comm.get(), p.compute));
  CUDA_CHECK(cudaMemcpyAsync(p.host_figures.data() + kFigures, p.all_figures.data(),
                             kFigures * world * sizeof(double), cudaMemcpyDeviceToHost,
                             p.compute));
  wait(p);
#endif
  return std::vector<double>(p.host_figures.data() + kFigures,
                             p.host_figures.data() + kFigures * (world + 1));
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
  const double wall_ms = ms_since(t0);

  // Everything below is outside the timed region. Every rank's figures: this process's
  // replicas', or, one process per GPU, gathered from every process.
  std::vector<double> f;
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    const Times& t = times[i];
    const StrategyStats s = replicas_[i]->strategy->stats();
    const ProducerStats ps = s.producer.value_or(ProducerStats{});
    const double row[kFigures] = {wall_ms, t.host_ms, t.gpu_ms, t.stall_ms, t.compute_ms,
                                  t.idle_ms, t.reduce_ms, static_cast<double>(s.h2d_bytes),
                                  static_cast<double>(s.peer_bytes), s.host_ms,
                                  s.copy_ms.value_or(0.0), s.copy_ms ? 1.0 : 0.0,
                                  s.producer ? 1.0 : 0.0, static_cast<double>(ps.workers),
                                  static_cast<double>(ps.slots), static_cast<double>(ps.batches),
                                  static_cast<double>(ps.samples), ps.busy_ms, ps.busy_max_ms,
                                  ps.slot_wait_ms, ps.consumer_wait_ms, ps.first_wait_ms,
                                  static_cast<double>(ps.consumer_waits), ps.span_ms};
    f.insert(f.end(), row, row + kFigures);
  }
  if (per_process_) f = gather_figures(*replicas_.front(), f.data());
  const std::size_t ranks = f.size() / kFigures;
  auto at = [&](std::size_t rank, int k) {
    return f[rank * kFigures + static_cast<std::size_t>(k)];
  };
  // The events of the slowest rank (largest gpu_ms); the host clock of the slowest process.
  std::size_t slowest = 0;
  for (std::size_t i = 1; i < ranks; ++i)
    if (at(i, kGpu) > at(slowest, kGpu)) slowest = i;
  r.wall_ms = 0;
  for (std::size_t i = 0; i < ranks; ++i) {
    r.wall_ms = std::max(r.wall_ms, at(i, kWall));
    r.host_ms = std::max(r.host_ms, at(i, kHost));
    r.strategy.h2d_bytes += static_cast<std::uint64_t>(at(i, kH2d));
    r.strategy.peer_bytes += static_cast<std::uint64_t>(at(i, kPeer));
    r.strategy.host_ms += at(i, kStrategyHost);
    if (at(i, kHasCopy) != 0.0)
      r.strategy.copy_ms = r.strategy.copy_ms.value_or(0.0) + at(i, kCopy);
  }
  // Rank i's own figures; the epoch's events are the slowest rank's.
  auto rank_times = [&](std::size_t i) {
    RankTimes rt;
    rt.rank = static_cast<int>(i);
    rt.gpu_ms = at(i, kGpu);
    rt.stall_ms = at(i, kStall);
    rt.compute_ms = at(i, kCompute);
    rt.idle_ms = at(i, kIdle);
    if (time_reduce_) rt.reduce_ms = at(i, kReduce);
    if (at(i, kHasCopy) != 0.0) rt.copy_ms = at(i, kCopy);
    rt.h2d_bytes = static_cast<std::uint64_t>(at(i, kH2d));
    rt.peer_bytes = static_cast<std::uint64_t>(at(i, kPeer));
    return rt;
  };
  if (sharded_)
    for (std::size_t i = 0; i < ranks; ++i) r.ranks.push_back(rank_times(i));
  const RankTimes slow = rank_times(slowest);
  r.gpu_ms = slow.gpu_ms;
  r.stall_ms = slow.stall_ms;
  r.compute_ms = slow.compute_ms;
  r.idle_ms = slow.idle_ms;
  r.reduce_ms = slow.reduce_ms;
  if (!sharded_) {
    r.strategy.producer = replicas_.front()->strategy->stats().producer;
  } else if (at(0, kHasProducer) != 0.0) {
    // Every GPU's producers together: workers, slots, batches, samples, busy and slot-wait time
    // summed over the ranks; the starvation (consumer wait, first wait, waits), the production
    // span and the busiest worker the worst rank's, since every global step waits for the
    // slowest GPU.
    ProducerStats ps;
    for (std::size_t i = 0; i < ranks; ++i) {
      ps.workers += static_cast<int>(at(i, kPWorkers));
      ps.slots += static_cast<int>(at(i, kPSlots));
      ps.batches += static_cast<std::int64_t>(at(i, kPBatches));
      ps.samples += static_cast<std::int64_t>(at(i, kPSamples));
      ps.busy_ms += at(i, kPBusy);
      ps.slot_wait_ms += at(i, kPSlotWait);
      ps.busy_max_ms = std::max(ps.busy_max_ms, at(i, kPBusyMax));
      if (at(i, kPConsumerWait) >= ps.consumer_wait_ms) {
        ps.consumer_wait_ms = at(i, kPConsumerWait);
        ps.first_wait_ms = at(i, kPFirstWait);
        ps.consumer_waits = static_cast<std::int64_t>(at(i, kPConsumerWaits));
      }
      ps.span_ms = std::max(ps.span_ms, at(i, kPSpan));
    }
    r.strategy.producer = ps;
  }
  // Each row's loss from the replica that computed it (one process per GPU: every row is in this
  // process's sums).
  double loss = 0, correct = 0;
  for (int g = 0; g < plan_.global_batches(); ++g)
    for (int rank = 0; rank < plan_.shards(); ++rank) {
      const ShardRange sh = plan_.shard(g, rank);
      const Replica& p = *replicas_[static_cast<std::size_t>(replicas_.size() == 1 ? 0 : rank)];
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
  if (!p.test) {  // a process of another rank than 0 (--processes per-gpu): rank 0 evaluates
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return EvalResult{nan, nan};
  }
  CUDA_CHECK(cudaSetDevice(p.device));
  return p.test->evaluate();
}

int DataParallelTrainer::local_device(const RunConfig& cfg) {
  if (!cfg.process) return cfg.device;
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  return process_device(cfg.device, cfg.process->local_rank, visible);
}

}  // namespace memstrat
