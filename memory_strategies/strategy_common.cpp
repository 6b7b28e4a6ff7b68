#include "memory_strategies/strategy_common.h"

#include <sstream>
#include <stdexcept>

namespace memstrat {

std::string_view to_string(Transfer t) { return t == Transfer::U8 ? "u8" : "f32"; }
std::string_view to_string(Scenario s) { return s == Scenario::Static ? "static" : "refresh"; }

std::string AdviseSet::to_string() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ",";
    s += name;
  };
  add(read_mostly, "read-mostly");
  add(preferred_device, "preferred-device");
  add(accessed_by, "accessed-by");
  return s.empty() ? "none" : s;
}

DeviceCaps DeviceCaps::query(int device) {
  DeviceCaps c;
  c.device = device;
  int v = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, device));
  c.concurrent_managed_access = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrManagedMemory, device));
  c.managed_memory = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, device));
  c.can_map_host_memory = v != 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrAsyncEngineCount, device));
  c.async_engine_count = v;
  CUDA_CHECK(cudaMemGetInfo(&c.free_bytes, &c.total_bytes));
  return c;
}

BatchView make_view(const void* images, const std::int32_t* labels, Transfer t, int rows,
                    std::int64_t first_sample) {
  BatchView v;
  if (t == Transfer::U8)
    v.x_u8 = static_cast<const std::uint8_t*>(images);
  else
    v.x_f32 = static_cast<const float*>(images);
  v.y = labels;
  v.rows = rows;
  v.first_sample = first_sample;
  return v;
}

void CopyTimeline::allocate(int batches) {
  start_.clear();
  stop_.clear();
  for (int i = 0; i < batches; ++i) {
    start_.push_back(Event::create());
    stop_.push_back(Event::create());
  }
  used_.assign(static_cast<std::size_t>(batches), 0);
}

void CopyTimeline::start(int b, cudaStream_t s) { CUDA_CHECK(cudaEventRecord(start_[b], s)); }

void CopyTimeline::stop(int b, cudaStream_t s) {
  CUDA_CHECK(cudaEventRecord(stop_[b], s));
  used_[b] = 1;
}

void CopyTimeline::begin_epoch() { std::fill(used_.begin(), used_.end(), 0); }

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

void check_managed_fits(std::size_t bytes, const char* strategy) {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // Keep a margin for the MLP's own buffers, cuBLAS workspaces and the driver.
  const std::size_t margin = std::max<std::size_t>(512ull << 20, total_b / 20);
  if (bytes + margin > free_b) {
    std::ostringstream m;
    m << strategy << ": refusing to allocate " << (bytes >> 20) << " MiB of managed memory: the GPU "
      << "reports only " << (free_b >> 20) << " MiB free (a margin of " << (margin >> 20)
      << " MiB is kept). Over-requesting managed memory can hang the GPU. Use a smaller data "
      << "set (--train-samples) or free GPU memory.";
    throw std::runtime_error(m.str());
  }
}

}  // namespace memstrat
