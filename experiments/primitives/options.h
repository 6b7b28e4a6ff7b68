// options.h: `memstrat primitives` options: declared on a CLI11 subcommand, then validated into
// a PrimitivesConfig before any device work (std::invalid_argument naming the option and a fix).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

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
};

struct PrimitivesConfig {
  std::vector<const PrimitiveEntry*> primitives;  // in the order asked for, each once
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;
  int sizes_per_octave = 1;
  std::vector<std::size_t> sizes;
  int samples = 9;
  int warmup = 2;
};

inline constexpr int kMaxSamples = 10000;
inline constexpr int kMaxWarmup = 1000;

/// Declares the options of the `primitives` subcommand, bound to `a`.
void add_primitives_options(CLI::App& sub, PrimitivesArgs& a);

/// Throws std::invalid_argument on a bad option.
PrimitivesConfig make_primitives_config(const PrimitivesArgs& a);

/// `memstrat primitives --list`: one line per primitive (name, what is timed).
void print_primitive_list(std::ostream& out);

}  // namespace memstrat
