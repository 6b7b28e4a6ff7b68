// step_plan.h: the single-launch step's host-side plan (pure C++, step_plan.cpp): which shapes
// the step takes, how one step of `rows` rows is split into work items, and the phase-A
// workspace that needs. The plan fixes every fp32 summation order of the step, so it is a pure
// function of (rows, in, hidden) and of the launcher's phase-C kind, never of the GPU or the
// grid size.
#pragma once

#include <cstddef>
#include <string>

namespace memstrat::kernels {

/// "" when the single-launch step takes this shape, else the reason it does not.
std::string step_unsupported(int in, int hidden, int classes);

/// How one step with `rows` rows is split into work items (a pure function of its arguments).
struct StepPlan {
  int rows = 0;
  int a_tr = 8;     // phase A warp tile: (4·a_tr) rows × (128 / a_tr) hidden units
  int a_chunks = 1; // phase A: K (= in) split into this many chunks, summed in phase B in order
  int b_wpr = 1;    // phase B: warps per row (each takes every b_wpr-th group of 32 units)
  int c_split = 1;  // phase C: warps splitting K (= rows) of one 32×16 (tall: 32×32) gW1 tile
};
StepPlan plan_step(int rows, int in, int hidden);  // tall_c = false
/// tall_c: the plan of a launcher with phase C's tall lane tile (StepLauncher::tall_c()).
StepPlan plan_step(int rows, int in, int hidden, bool tall_c);
/// Floats of the phase-A partial buffer a step of up to max_batch rows needs.
std::size_t step_partial_floats(int max_batch, int in, int hidden);

}  // namespace memstrat::kernels
