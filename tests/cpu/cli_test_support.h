// cli_test_support.h: what the CLI tests share: parse argv in-process (parse_cli), and run the
// built `memstrat` binary (or any command), capturing its exit code and output (stdout and
// stderr together).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/options.h"

namespace memstrat::testing {

struct Parsed {
  std::optional<int> code;
  CliRequest req;
  std::string out, err;
};

inline Parsed parse(std::vector<const char*> args) {
  args.insert(args.begin(), "memstrat");
  Parsed p;
  std::ostringstream o, e;
  p.code = parse_cli(static_cast<int>(args.size()), args.data(), p.req, o, e);
  p.out = o.str();
  p.err = e.str();
  return p;
}

/// The arguments as typed, for a failure message.
inline std::string joined(const std::vector<const char*>& args) {
  std::string s;
  for (const char* a : args) s += std::string(a) + " ";
  return s;
}

/// parse(args) ended in exit 2 with a message that contains `says`.
inline void expect_refused(const std::vector<const char*>& args, const std::string& says) {
  const auto p = parse(args);
  ASSERT_TRUE(p.code) << joined(args);
  EXPECT_EQ(*p.code, 2) << joined(args);
  EXPECT_NE(p.err.find(says), std::string::npos) << joined(args) << ": " << p.err;
}

struct Ran {
  int code;
  std::string output;
};

/// Runs `command` through the shell; output is stdout and stderr together.
inline Ran run_command(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  Ran r{-1, ""};
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), f)) r.output += buf.data();
  const int st = pclose(f);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

inline Ran run_binary(const std::string& args) {
  return run_command(std::string(MEMSTRAT_BINARY) + " " + args);
}

}  // namespace memstrat::testing
