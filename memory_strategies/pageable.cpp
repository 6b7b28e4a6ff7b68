#include "memory_strategies/pageable.h"

namespace memstrat {

void PageableStrategy::allocate_host(std::size_t image_bytes, std::size_t samples, void** images,
                                     std::int32_t** labels) {
  images_.assign(image_bytes, 0);  // touch every page now, not during the first epoch
  labels_.assign(samples, 0);
  *images = images_.data();
  *labels = labels_.data();
}

}  // namespace memstrat
