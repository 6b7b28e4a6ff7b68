#include "memory_strategies/pinned.h"

namespace memstrat {

void PinnedStrategy::allocate_host(std::size_t image_bytes, std::size_t samples, void** images,
                                   std::int32_t** labels) {
  images_ = PinnedBuffer<std::uint8_t>(image_bytes);
  labels_ = PinnedBuffer<std::int32_t>(samples);
  *images = images_.data();
  *labels = labels_.data();
}

}  // namespace memstrat
