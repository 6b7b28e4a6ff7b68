// options.h: the `memstrat` command line. parse_cli() declares every subcommand and option
// (CLI11) and fills a CliRequest; each `train` option is declared once, against the RunConfig
// field it sets, whose default is the option's default. The same declaration yields --help and
// the option table `memstrat describe` prints. Bad flags are reported before any device work.
//
// Adding a subcommand: a Command value, its options in CliRequest, a declare_* function in
// options.cpp called from parse_cli, a run_* function in commands.h, one case in main.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "experiments/core/run_config.h"
#include "experiments/primitives/options.h"

namespace memstrat {

enum class Command { List, Info, Describe, Train, Primitives };

struct CliRequest {
  Command command = Command::List;
  RunConfig run;       // train; info reads run.device
  bool json = false;   // describe --json
  PrimitivesArgs primitives;  // primitives
};

/// Parses argv. Returns an exit code when parsing already decided the outcome (--help: 0,
/// usage error: 2, messages written to `out`/`err`); std::nullopt when `req` should be run.
std::optional<int> parse_cli(int argc, const char* const* argv, CliRequest& req, std::ostream& out,
                             std::ostream& err);

/// One `train` option as `memstrat describe` reports it: captured by the same call that declares
/// the option to CLI11, with RunConfig{}'s value as its default.
struct OptionInfo {
  std::string name;                  // "--copy-streams"
  std::vector<std::string> aliases;  // "-s"
  std::vector<std::string> negations;  // flag: the spelling that sets it false, "--no-profile"
  std::string kind;  // "choice" | "integer" | "number" | "flag" | "list" | "hints" | "text"
  nlohmann::json default_value;  // typed: "u8", 256, 0.05, true, [256]; null when not set
  std::vector<std::string> choices;  // choice: the values; hints: the hint names
  std::optional<double> min, max;    // integer, number: the accepted range
  bool min_exclusive = false;        // number: min itself is not accepted
  std::string record_key;            // the key under config.* in the record; "" when not recorded
  std::string help;
  nlohmann::json to_json() const;
};

/// The `train` options in declaration order.
std::vector<OptionInfo> train_option_table();

/// --advise: "read-mostly,accessed-by" -> those hints; "none" or "" -> none. Throws
/// std::invalid_argument naming --advise and the valid hints.
AdviseSet parse_advise(const std::string& s);

}  // namespace memstrat
