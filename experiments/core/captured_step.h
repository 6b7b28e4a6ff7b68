// captured_step.h: CapturedStep, one batch's training step captured as a CUDA graph and the batch
// view it was captured for, so that the graph is replayed while a strategy hands out the same
// addresses for that batch every epoch and captured again where it does not (same_view).
// Trainer keeps one per batch index (per-batch form, --graphs on); DataParallelTrainer one per
// shard turn.
#pragma once

#include "common/cuda_raii.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// The same addresses, rows and first sample: a graph captured for `a` computes `b`.
inline bool same_view(const BatchView& a, const BatchView& b) {
  return a.x_u8 == b.x_u8 && a.x_f32 == b.x_f32 && a.y == b.y && a.rows == b.rows &&
         a.first_sample == b.first_sample;
}

struct CapturedStep {
  GraphExec exec;
  BatchView view;
};

}  // namespace memstrat
