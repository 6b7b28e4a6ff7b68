// The checks of a run's output files (--json, --trace, --loss-curve, --export-init): refused
// before any device work, and nothing left behind by the check itself.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "experiments/core/output_files.h"

using namespace memstrat;
namespace fs = std::filesystem;

namespace {

/// A fresh empty directory under the system's temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "memstrat_out_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// The message of the std::invalid_argument `f` throws; "" when it throws none.
template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string refusal_of(const RunConfig& c) {
  return refusal([&] { check_outputs(c); });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// The run must not leave an empty record file when it stops before writing one (no GPU, bad data).
TEST(OutputFiles, ANewFileIsCheckedWithoutLeavingItBehind) {
  TempDir d;
  RunConfig c;
  c.json = d / "run.jsonl";
  c.trace = d / "trace.json";
  c.loss_curve = d / "loss.csv";
  EXPECT_EQ(refusal_of(c), "");
  EXPECT_FALSE(fs::exists(c.json));
  EXPECT_FALSE(fs::exists(c.trace));
  EXPECT_FALSE(fs::exists(c.loss_curve));
}

TEST(OutputFiles, AnExistingFileIsKeptAsItIs) {
  TempDir d;
  RunConfig c;
  c.json = d / "runs.jsonl";
  std::ofstream(c.json) << "{\"a\":1}\n";
  EXPECT_EQ(refusal_of(c), "");
  std::ifstream in(c.json);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "{\"a\":1}");
}

// A write to /dev/full is accepted by open() and fails only at the end of the run.
TEST(OutputFiles, DevicesDirectoriesAndMissingDirectoriesAreRefused) {
  TempDir d;
  if (access("/dev/full", F_OK) == 0) {
    RunConfig c;
    c.json = "/dev/full";
    const std::string why = refusal_of(c);
    EXPECT_TRUE(contains(why, "--json") && contains(why, "/dev/full") &&
                contains(why, "not a regular file"))
        << why;
  }
  RunConfig c;
  c.trace = d.path();
  EXPECT_TRUE(contains(refusal_of(c), "--trace")) << refusal_of(c);
  c = RunConfig{};
  c.loss_curve = d / "no-such-dir/loss.csv";
  EXPECT_TRUE(contains(refusal_of(c), "--loss-curve")) << refusal_of(c);
  c = RunConfig{};
  c.json = "/nonexistent-memstrat-dir/run.jsonl";
  EXPECT_TRUE(contains(refusal_of(c), "cannot be created")) << refusal_of(c);
}

// --trace and --loss-curve truncate their file: never the record file, nor each other's.
TEST(OutputFiles, TwoOutputsNamingOneFileAreRefused) {
  TempDir d;
  const std::string rec = d / "run.jsonl";
  RunConfig c;
  c.json = rec;
  c.trace = rec;
  std::string why = refusal_of(c);
  EXPECT_TRUE(contains(why, "--trace and --json name the same file")) << why;
  // Spelled differently, and not there yet.
  c.trace = d.path() + "/./sub/../run.jsonl";
  fs::create_directory(d / "sub");
  EXPECT_TRUE(contains(refusal_of(c), "same file")) << c.trace;
  // Through a symbolic link to the directory, and as a hard link to an existing file.
  fs::create_directory_symlink(d.path(), d / "link");
  c.trace = d / "link/run.jsonl";
  EXPECT_TRUE(contains(refusal_of(c), "same file")) << c.trace;
  std::ofstream(rec) << "";
  fs::create_hard_link(rec, d / "hard.jsonl");
  c.trace = d / "hard.jsonl";
  EXPECT_TRUE(contains(refusal_of(c), "same file")) << c.trace;
  c = RunConfig{};
  c.trace = d / "out.txt";
  c.loss_curve = d / "out.txt";
  why = refusal_of(c);
  EXPECT_TRUE(contains(why, "--loss-curve and --trace name the same file")) << why;
  c.loss_curve = d / "loss.csv";
  EXPECT_EQ(refusal_of(c), "");
}

TEST(OutputFiles, ExportInitNeedsADirectoryItCanCreateOrWrite) {
  TempDir d;
  RunConfig c;
  c.export_init = d.path();
  EXPECT_EQ(refusal_of(c), "");
  c.export_init = d / "new/nested";
  EXPECT_EQ(refusal_of(c), "");
  EXPECT_FALSE(fs::exists(d / "new")) << "the check creates nothing";
  const std::string file = d / "a-file";
  std::ofstream(file) << "x";
  c.export_init = file;
  std::string why = refusal_of(c);
  EXPECT_TRUE(contains(why, "--export-init") && contains(why, "not a directory")) << why;
  c.export_init = file + "/sub";
  why = refusal_of(c);
  EXPECT_TRUE(contains(why, "cannot be created") && contains(why, "a-file")) << why;
}
