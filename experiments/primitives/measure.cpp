#include "experiments/primitives/measure.h"

#include <chrono>

#include "common/nvtx.h"
#include "experiments/primitives/knees.h"
#include "experiments/primitives/sizes.h"

namespace memstrat {

PrimitiveSweep::PrimitiveSweep(TransferPrimitive& primitive, const PrimitiveContext& ctx,
                               std::string name)
    : p_(primitive),
      ctx_(ctx),
      name_(std::move(name)),
      start_(Event::create()),
      stop_(Event::create()) {}

double PrimitiveSweep::time_us(std::size_t bytes, std::uint32_t seed) {
  if (p_.timed_by() == TimedBy::CudaEvents) {
    // On an idle stream the start event completes at once, so the interval also holds the time
    // the host takes to issue the work (as in a strategy's copy_ms).
    CUDA_CHECK(cudaEventRecord(start_, ctx_.stream));
    p_.transfer(bytes, seed);
    CUDA_CHECK(cudaEventRecord(stop_, ctx_.stream));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    return 1e3 * static_cast<double>(elapsed_ms(start_, stop_));
  }
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // what reset enqueued is not timed
  const auto t0 = std::chrono::steady_clock::now();
  p_.transfer(bytes, seed);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

SizePoint PrimitiveSweep::measure(std::size_t bytes, const SweepSettings& settings) {
  SizePoint pt;
  pt.bytes = bytes;
  const std::string size = format_size(static_cast<double>(bytes));
  NvtxRange range(Phase::Batch, name_ + " " + size);
  for (int i = 0; i < settings.warmup + settings.samples; ++i) {
    const std::uint32_t seed = next_seed_++;
    p_.reset(bytes, seed);
    double us = 0;
    {
      NvtxRange timed(p_.phase(), name_);
      us = time_us(bytes, seed);
    }
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    if (const std::string why = p_.verify(bytes, seed); !why.empty())
      throw VerificationError(
          name_ + " at " + size + ", " + (i < settings.warmup ? "warm-up " : "sample ") +
          std::to_string(i < settings.warmup ? i + 1 : i - settings.warmup + 1) +
          ": data check failed: " + why);
    ++pt.verified_samples;
    if (i >= settings.warmup) pt.samples_us.push_back(us);
  }
  pt.us = spread_of(pt.samples_us);
  pt.gbps = gbps(bytes, pt.us.median);
  return pt;
}

}  // namespace memstrat
