// sgd_step.cuh: the momentum-SGD step for one parameter, as the fused kernels apply it
// (lt_fused/fused_head_update.cu, single_launch/). The same fmaf expressions as sgd_update
// (layerwise/sgd_update.cu) and cpu_ref::sgd_update, so every path updates a parameter bitwise
// the same way:
// v != nullptr: v = fma(momentum, v, g), p = fma(-lr, v, p); else p = fma(-lr, g, p).
#pragma once

namespace memstrat::kernels {

__device__ __forceinline__ void sgd_step(float* p, float g, float* v, float lr, float momentum) {
  if (v != nullptr) {
    const float nv = fmaf(momentum, *v, g);
    *v = nv;
    *p = fmaf(-lr, nv, *p);
  } else {
    *p = fmaf(-lr, g, *p);
  }
}

}  // namespace memstrat::kernels
