// strategy_common.h: pieces several strategies share: batch geometry, per-batch copy timing
// (CopyTimeline), the managed-memory guard, and host storage written through EpochWriter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/cuda_raii.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// Where batch b sits in an epoch's contiguous sample order.
struct BatchGeometry {
  std::int64_t samples = 0;
  int batch = 0;
  std::size_t image_bytes_per_sample = 0;
  int batches() const { return batch_count(samples, batch); }
  std::int64_t first(int b) const { return static_cast<std::int64_t>(b) * batch; }
  int rows(int b) const {
    return static_cast<int>(std::min<std::int64_t>(batch, samples - first(b)));
  }
  std::size_t image_offset(int b) const { return first(b) * image_bytes_per_sample; }
  std::size_t image_bytes(int b) const { return rows(b) * image_bytes_per_sample; }
  std::size_t label_bytes(int b) const { return rows(b) * sizeof(std::int32_t); }
};

/// A batch view over contiguous storage (images in the transfer format + int32 labels).
BatchView make_view(const void* images, const std::int32_t* labels, Transfer t, int rows,
                    std::int64_t first_sample);

/// One start/stop timing-event pair per batch; summed after the epoch finished.
class CopyTimeline {
 public:
  void allocate(int batches);
  void start(int b, cudaStream_t s);
  void stop(int b, cudaStream_t s);
  void begin_epoch();
  /// Sum of recorded copy durations this epoch; nullopt if nothing was recorded.
  std::optional<double> total_ms() const;

 private:
  std::vector<Event> start_, stop_;
  std::vector<char> used_;
};

/// Refuse a managed allocation the device could not hold: over-requesting managed memory can
/// hang the GPU. Throws std::runtime_error with the numbers and what to do.
void check_managed_fits(std::size_t bytes, const char* strategy);

/// Sum of bytes of one epoch's images + labels (what an explicit strategy moves per epoch).
inline std::uint64_t epoch_bytes(const EpochWriter& w) {
  return static_cast<std::uint64_t>(w.image_bytes() + w.label_bytes());
}

}  // namespace memstrat
