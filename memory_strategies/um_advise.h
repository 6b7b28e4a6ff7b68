// um_advise.h: UmAdviseStrategy (`um-advise`): um-prefetch plus cudaMemAdvise ReadMostly / PreferredLocation / AccessedBy (--advise).
#pragma once

#include "memory_strategies/managed_base.h"

namespace memstrat {

class UmAdviseStrategy final : public ManagedStrategyBase {
 public:
  UmAdviseStrategy() : ManagedStrategyBase(/*prefetch=*/true, /*use_advise=*/true) {}
  std::string_view name() const override { return "um-advise"; }
};

}  // namespace memstrat
