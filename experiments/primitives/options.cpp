#include "experiments/primitives/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <stdexcept>

#include "common/nccl_settings.h"
#include "experiments/primitives/sizes.h"

namespace memstrat {

void add_primitives_options(CLI::App& sub, PrimitivesArgs& a) {
  sub.add_option("-p,--primitive", a.primitives,
                 "Primitive to measure (see --list); repeat it or give a comma-separated list. "
                 "Default: all")
      ->delimiter(',');
  sub.add_option("--min-size", a.min_size,
                 "Smallest transfer: a power of two, e.g. 4KiB, 64K, 4096")
      ->capture_default_str();
  sub.add_option("--max-size", a.max_size, "Largest transfer: a power of two, e.g. 256MiB, 1GiB")
      ->capture_default_str();
  sub.add_option("--sizes-per-octave", a.sizes_per_octave,
                 "Log-spaced sizes per doubling (1 = powers of two only; up to 16)")
      ->capture_default_str();
  sub.add_option("-n,--samples", a.samples, "Timed samples per size (median and spread over them)")
      ->capture_default_str();
  sub.add_option("-w,--warmup", a.warmup, "Untimed (but verified) samples per size before them")
      ->capture_default_str();
  sub.add_option("--json", a.json,
                 "Append one JSON Lines record per primitive to FILE (docs/methodology.md, "
                 "\"Transfer primitives\")");
  sub.add_flag("-q,--quiet", a.quiet,
               "Only the self-check and the final table: no per-primitive or per-size lines");
  sub.add_flag("--list", a.list,
               "List the primitives with what each times, then exit (no GPU needed)");
  sub.add_option("--device", a.device, "CUDA device index")->capture_default_str();
  sub.add_option("--gpus", a.gpus,
                 "Measure the patterns of several GPUs on GPUs 0..N-1 (N >= 2; pick them with "
                 "CUDA_VISIBLE_DEVICES) instead of one GPU's primitives: host->device alone and "
                 "all at once, device->device by copy engine and SM one way and both ways, "
                 "one-to-all, all-to-one, NCCL all-reduce/all-gather/broadcast (-p names "
                 "patterns then; --gpus N --list lists them). The collectives need "
                 "NCCL_NVLS_ENABLE=0")
      ->capture_default_str();
}

PrimitivesConfig make_primitives_config(const PrimitivesArgs& a) {
  PrimitivesConfig c;
  if (a.gpus < 1 || a.gpus > kMaxPrimitiveGpus)
    throw std::invalid_argument("--gpus " + std::to_string(a.gpus) + " is out of range; use 1 to " +
                                std::to_string(kMaxPrimitiveGpus));
  if (a.gpus > 1 && a.device != 0)
    throw std::invalid_argument("--device " + std::to_string(a.device) + " with --gpus " +
                                std::to_string(a.gpus) +
                                ": several GPUs are always 0..N-1; choose them with "
                                "CUDA_VISIBLE_DEVICES and drop --device");
  if (a.gpus > 1) {
    for (const std::string& name : a.primitives)
      if (!find_multi_gpu_pattern(name))
        throw std::invalid_argument("unknown pattern '" + name + "' for --gpus " +
                                    std::to_string(a.gpus) + "; choose from: " +
                                    multi_gpu_pattern_names() + " (memstrat primitives --gpus " +
                                    std::to_string(a.gpus) + " --list)");
    for (const auto& e : multi_gpu_patterns())
      if (a.primitives.empty() ||
          std::find(a.primitives.begin(), a.primitives.end(), e.name) != a.primitives.end())
        c.patterns.push_back(&e);
    const bool collectives = std::any_of(c.patterns.begin(), c.patterns.end(),
                                         [](const auto* e) { return is_collective(e->pattern); });
    if (collectives && kHaveNccl && !a.list)  // listing starts no NCCL
      if (const std::string why = nvls_refusal(nccl_settings()); !why.empty())
        throw std::invalid_argument("--gpus " + std::to_string(a.gpus) + " with the NCCL " +
                                    "collectives: " + why);
  }
  for (const std::string& name : a.gpus > 1 ? std::vector<std::string>{} : a.primitives) {
    const PrimitiveEntry* e = find_primitive(name);
    if (!e)
      throw std::invalid_argument("unknown primitive '" + name + "'; choose from: " +
                                  primitive_names() + " (memstrat primitives --list)");
    if (std::find(c.primitives.begin(), c.primitives.end(), e) == c.primitives.end())
      c.primitives.push_back(e);
  }
  if (c.primitives.empty() && a.gpus == 1)
    for (const auto& e : primitive_registry()) c.primitives.push_back(&e);
  auto size_option = [](const std::string& text, const char* option) {
    try {
      return parse_size(text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(option) + ": " + e.what());
    }
  };
  c.min_bytes = size_option(a.min_size, "--min-size");
  c.max_bytes = size_option(a.max_size, "--max-size");
  c.sizes_per_octave = a.sizes_per_octave;
  c.sizes = size_sweep(c.min_bytes, c.max_bytes, a.sizes_per_octave);
  if (a.samples < 1 || a.samples > kMaxSamples)
    throw std::invalid_argument("--samples " + std::to_string(a.samples) +
                                " is out of range; use 1 to " + std::to_string(kMaxSamples) +
                                " (the default 9 gives a stable median)");
  if (a.warmup < 0 || a.warmup > kMaxWarmup)
    throw std::invalid_argument("--warmup " + std::to_string(a.warmup) +
                                " is out of range; use 0 to " + std::to_string(kMaxWarmup));
  if (a.device < 0)
    throw std::invalid_argument("--device " + std::to_string(a.device) +
                                " is negative; use 0 for the first GPU");
  c.samples = a.samples;
  c.warmup = a.warmup;
  return c;
}

void print_primitive_list(std::ostream& out, int gpus) {
  if (gpus > 1) {
    for (const auto& e : multi_gpu_patterns())
      out << std::left << std::setw(22) << e.name << e.description << "\n";
    return;
  }
  for (const auto& e : primitive_registry())
    out << std::left << std::setw(22) << e.name << e.description << "\n";
}

}  // namespace memstrat
