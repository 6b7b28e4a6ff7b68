// measure.h: what is measured for every primitive, whatever it is. Per size: warm-up samples,
// then timed samples; each sample is reset before and verified after the timed region, and
// timed with the clock the primitive names. Per size: median, quartiles, min, max, GB/s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "common/run_record.h"
#include "experiments/primitives/transfer_primitive.h"

namespace memstrat {

struct SweepSettings {
  int warmup = 2;
  int samples = 9;
};

struct SizePoint {
  std::size_t bytes = 0;
  std::vector<double> samples_us;  // the timed samples, in the order taken
  Spread us;                       // of samples_us
  double gbps = 0;                 // bytes / median time, 1e9 bytes per second
  int verified_samples = 0;        // warm-up + timed samples whose data was checked
};

/// A sample whose data was wrong after the transfer.
class VerificationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Times one prepared primitive at any size up to what it was prepared for.
class PrimitiveSweep {
 public:
  PrimitiveSweep(TransferPrimitive& primitive, const PrimitiveContext& ctx, std::string name);
  /// Throws VerificationError (naming size and sample) when a sample's data is wrong.
  SizePoint measure(std::size_t bytes, const SweepSettings& settings);

 private:
  double time_us(std::size_t bytes, std::uint32_t seed);

  TransferPrimitive& p_;
  PrimitiveContext ctx_;
  std::string name_;
  Event start_, stop_;
  std::uint32_t next_seed_ = 1;  // every sample of the sweep gets its own pattern seed
};

}  // namespace memstrat
