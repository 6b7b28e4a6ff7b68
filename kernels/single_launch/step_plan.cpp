// step_plan.cpp: the single-launch step's host-side plan (see step_plan.h): the shape rule, how a
// step is split into work items, and the phase-A workspace. Pure C++: no GPU is needed.
#include "kernels/single_launch/step_plan.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "kernels/single_launch/layout.h"

namespace memstrat::kernels {
namespace {

constexpr int kTargetAItems = 2048;  // phase-A work items wanted per step
constexpr int kMaxChunks = 32;

}  // namespace

std::string step_unsupported(int in, int hidden, int classes) {
  if (in <= 0 || hidden <= 0 || classes <= 0) return "input, hidden and classes must be > 0";
  if (in % 4 != 0) return "input size " + std::to_string(in) + " is not a multiple of 4";
  if (hidden % 4 != 0) return "hidden size " + std::to_string(hidden) + " is not a multiple of 4";
  if (classes > kStepMaxClasses)
    return std::to_string(classes) + " classes (the single-launch step takes at most " +
           std::to_string(kStepMaxClasses) + ")";
  if (single_launch::smem_floats(hidden, classes) > single_launch::kMaxSmemFloats)
    return "W2 (" + std::to_string(hidden) + "×" + std::to_string(classes) + ") does not fit in " +
           std::to_string(single_launch::kMaxSmemFloats * sizeof(float) / 1024) +
           " KiB of shared memory";
  return "";
}

StepPlan plan_step(int rows, int in, int hidden) { return plan_step(rows, in, hidden, false); }

StepPlan plan_step(int rows, int in, int hidden, bool tall_c) {
  StepPlan p;
  p.rows = rows;
  p.a_tr = rows <= 4 ? 1 : rows <= 8 ? 2 : rows <= 16 ? 4 : 8;
  const int WM = 4 * p.a_tr, WN = 128 / p.a_tr;
  const long long tiles = static_cast<long long>((rows + WM - 1) / WM) * ((hidden + WN - 1) / WN);
  long long chunks = tiles > 0 ? kTargetAItems / tiles : 1;
  chunks = std::min<long long>(chunks, std::min(kMaxChunks, std::max(in / 4, 1)));
  p.a_chunks = static_cast<int>(std::max<long long>(chunks, 1));
  p.b_wpr = rows <= 256 ? 8 : rows <= 512 ? 4 : rows <= 1024 ? 2 : 1;
  // <= 64-128 rows a warp; the tall tile has half as many tiles, so it splits K one step further
  p.c_split = tall_c ? (rows >= 256 ? 8 : rows >= 128 ? 4 : 2)
                     : (rows >= 512 ? 8 : rows >= 256 ? 4 : rows >= 128 ? 2 : 1);
  return p;
}

std::size_t step_partial_floats(int max_batch, int in, int hidden) {
  std::size_t most = 0;
  for (int rows = 1; rows <= max_batch; ++rows)
    most = std::max(most, static_cast<std::size_t>(plan_step(rows, in, hidden).a_chunks) * rows *
                              static_cast<std::size_t>(hidden));
  return most;
}

}  // namespace memstrat::kernels
