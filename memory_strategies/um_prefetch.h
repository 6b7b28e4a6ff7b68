// um_prefetch.h: UmPrefetchStrategy (`um-prefetch`): managed data; cudaMemPrefetchAsync of batch i+1 on a side stream while batch i computes.
#pragma once

#include "memory_strategies/managed_base.h"

namespace memstrat {

class UmPrefetchStrategy final : public ManagedStrategyBase {
 public:
  UmPrefetchStrategy() : ManagedStrategyBase(/*prefetch=*/true, /*use_advise=*/false) {}
  std::string_view name() const override { return "um-prefetch"; }
};

}  // namespace memstrat
