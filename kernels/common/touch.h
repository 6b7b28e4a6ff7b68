// touch.h: touch_batch, what --consumer none runs in place of the training step: one thread reads
// the last element of a batch (its image bytes, u8 or f32, and its label) and adds them to a
// device counter, so the batch's data must be readable on the device when the kernel runs (a
// copy into it must be done, a page it lies on must be reachable) while the step's work is
// absent. CPU reference: the sum of the same three values (tests/gpu/test_consumer.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memstrat::kernels {

/// sink[0] += x[last] + y[rows - 1], x the batch's images as u8 (x_u8) or f32 (x_f32, where
/// x_u8 is null), `last` = rows * features - 1. One thread; enqueued on `s`; checks the launch.
void touch_batch(const std::uint8_t* x_u8, const float* x_f32, const std::int32_t* y, int rows,
                 int features, double* sink, cudaStream_t s);

}  // namespace memstrat::kernels
