// options.h: `memstrat primitives` options: declared on a CLI11 subcommand, then validated into
// a PrimitivesConfig before any device work (std::invalid_argument naming the option and a fix).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "experiments/primitives/multi_gpu_cases.h"
#include "experiments/primitives/transfer_primitive.h"

namespace CLI {
class App;
}

namespace memstrat {

struct PrimitivesArgs {
  std::vector<std::string> primitives;  // names, repeated or comma-separated; empty = all
  std::string min_size = "4KiB";
  std::string max_size = "256MiB";
  int sizes_per_octave = 1;
  int samples = 9;
  int warmup = 2;
  std::string json;
  bool quiet = false;
  bool list = false;
  int device = 0;
  int gpus = 1;  // > 1: the multi-GPU patterns on GPUs 0..gpus-1 (-p names patterns then)
};

struct PrimitivesConfig {
  std::vector<const PrimitiveEntry*> primitives;  // one GPU: in the order asked for, each once
  std::vector<const MultiGpuPatternEntry*> patterns;  // --gpus N > 1: in registry order, each once
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;
  int sizes_per_octave = 1;
  std::vector<std::size_t> sizes;
  int samples = 9;
  int warmup = 2;
};

inline constexpr int kMaxSamples = 10000;
inline constexpr int kMaxWarmup = 1000;
/// The most GPUs --gpus accepts (twice an 8-GPU HGX node).
inline constexpr int kMaxPrimitiveGpus = 16;

/// Declares the options of the `primitives` subcommand, bound to `a`.
void add_primitives_options(CLI::App& sub, PrimitivesArgs& a);

/// Throws std::invalid_argument on a bad option.
PrimitivesConfig make_primitives_config(const PrimitivesArgs& a);

/// `memstrat primitives --list`: one line per primitive (name, what is timed); with gpus > 1,
/// one per multi-GPU pattern.
void print_primitive_list(std::ostream& out, int gpus = 1);

}  // namespace memstrat
