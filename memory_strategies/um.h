// um.h: UmStrategy (`um`): dataset in cudaMallocManaged memory written by the CPU; no hints, pages fault in on first GPU touch.
#pragma once

#include "memory_strategies/managed_base.h"

namespace memstrat {

class UmStrategy final : public ManagedStrategyBase {
 public:
  UmStrategy() : ManagedStrategyBase(/*prefetch=*/false, /*use_advise=*/false) {}
  std::string_view name() const override { return "um"; }
};

}  // namespace memstrat
