// pageable.h: PageableStrategy (`pageable`): data in malloc'ed host memory, one cudaMemcpy-like
// staged copy per batch on the compute stream. Per batch only: the driver stages each copy
// through its own buffer as the call runs, which a graph cannot replay (and which is what
// pageable measures).
#pragma once

#include <memory>
#include <vector>

#include "memory_strategies/copy_on_compute.h"

namespace memstrat {

class PageableStrategy final : public CopyOnComputeStream {
 public:
  std::string_view name() const override { return "pageable"; }

 protected:
  void allocate_host(std::size_t image_bytes, std::size_t samples, void** images,
                     std::int32_t** labels) override;
  SlotKind slot_kind() const override { return SlotKind::Pageable; }
  bool copies_capturable() const override { return false; }

 private:
  std::vector<std::uint8_t> images_;  // ordinary pageable memory
  std::vector<std::int32_t> labels_;
};

}  // namespace memstrat
