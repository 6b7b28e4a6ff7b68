// test_mnist.cpp: load_mnist on small hand-made data directories (valid, and each way the
// four files can disagree or be missing), resolve_data_dir's precedence, truncate_dataset,
// and the real MNIST when it is present (skipped with the reason otherwise).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/mnist.h"
#include "idx_test_support.h"

namespace memstrat {
namespace {

using namespace idx_testing;  // NOLINT: shared test helpers

Bytes pixels(std::size_t n, unsigned seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i * 31 + seed) & 0xff);
  return b;
}

Bytes labels(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i * 3 + 1) % 10);
  return b;
}

// A miniature MNIST: 5 training and 3 test images of 4x3 pixels. Each field can be
// overridden to build the broken variants.
struct FakeSet {
  Bytes train_images = make_idx({5, 4, 3}, pixels(5 * 12, 1));
  Bytes train_labels = make_idx({5}, labels(5));
  Bytes test_images = make_idx({3, 4, 3}, pixels(3 * 12, 2));
  Bytes test_labels = make_idx({3}, labels(3));
  bool gz = true;

  void write(const fs::path& dir) const {
    const std::string ext = gz ? ".gz" : "";
    auto put = [&](const char* base, const Bytes& b) {
      const fs::path p = dir / (std::string(base) + ext);
      if (gz) {
        write_gz(p, b);
      } else {
        write_raw(p, b);
      }
    };
    put("train-images-idx3-ubyte", train_images);
    put("train-labels-idx1-ubyte", train_labels);
    put("t10k-images-idx3-ubyte", test_images);
    put("t10k-labels-idx1-ubyte", test_labels);
  }
};

// The DataError message load_mnist gives for `dir`; other exception types escape.
std::string load_error(const std::string& dir) {
  try {
    load_mnist(dir);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_mnist accepted " << dir;
  return {};
}

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& to) : old_(fs::current_path()) { fs::current_path(to); }
  ~ScopedCwd() {
    std::error_code ec;
    fs::current_path(old_, ec);
  }

 private:
  fs::path old_;
};

// ----- load_mnist: valid ---------------------------------------------------------------

TEST(Mnist, LoadsGzipDirectory) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.write(dir.path());
  const HostDataset d = load_mnist(dir.str());
  EXPECT_EQ(d.name, "mnist");
  EXPECT_EQ(d.source, dir.str());
  EXPECT_EQ(d.rows, 4);
  EXPECT_EQ(d.cols, 3);
  EXPECT_EQ(d.classes, 10);
  EXPECT_EQ(d.n_train(), 5);
  EXPECT_EQ(d.n_test(), 3);
  EXPECT_EQ(d.train_images, pixels(5 * 12, 1));
  EXPECT_EQ(d.test_images, pixels(3 * 12, 2));
  EXPECT_EQ(d.train_labels, std::vector<std::int32_t>({1, 4, 7, 0, 3}));
  EXPECT_EQ(d.test_labels, std::vector<std::int32_t>({1, 4, 7}));
}

TEST(Mnist, LoadsRawDirectory) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.gz = false;
  set.write(dir.path());
  const HostDataset d = load_mnist(dir.str());
  EXPECT_EQ(d.n_train(), 5);
  EXPECT_EQ(d.test_images, pixels(3 * 12, 2));
}

TEST(Mnist, PrefersGzipWhenBothNamesExist) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.write(dir.path());
  write_raw(dir.path() / "train-labels-idx1-ubyte", {'b', 'a', 'd'});
  EXPECT_EQ(load_mnist(dir.str()).n_train(), 5);
}

// ----- load_mnist: broken directories ----------------------------------------------------

TEST(Mnist, LabelOutOfRange) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.train_labels = make_idx({5}, {1, 2, 10, 3, 4});
  set.write(dir.path());
  const std::string m = load_error(dir.str());
  EXPECT_CONTAINS(m, (dir.path() / "train-labels-idx1-ubyte.gz").string());
  EXPECT_CONTAINS(m, "label 10 at index 2 is out of range");
}

TEST(Mnist, TrainCountMismatch) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.train_labels = make_idx({4}, labels(4));
  set.write(dir.path());
  const std::string m = load_error(dir.str());
  EXPECT_CONTAINS(m, "count mismatch: 4 labels but");
  EXPECT_CONTAINS(m, "train-images-idx3-ubyte.gz holds 5 images");
}

TEST(Mnist, TestCountMismatch) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.test_labels = make_idx({7}, labels(7));
  set.write(dir.path());
  EXPECT_CONTAINS(load_error(dir.str()), "count mismatch: 7 labels but");
}

TEST(Mnist, RowsColsMismatchBetweenTrainAndTest) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.test_images = make_idx({3, 3, 4}, pixels(36, 2));  // same pixel count, other shape
  set.write(dir.path());
  const std::string m = load_error(dir.str());
  EXPECT_CONTAINS(m, "image size mismatch: test images are 3x4");
  EXPECT_CONTAINS(m, "are 4x3");
}

TEST(Mnist, ImagesMustBe3D) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.train_images = make_idx({5, 12}, pixels(60, 1));
  set.write(dir.path());
  EXPECT_CONTAINS(load_error(dir.str()),
                  "training images must be a 3-D IDX array but this one has 2");
}

TEST(Mnist, LabelsMustBe1D) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.test_labels = make_idx({3, 1}, labels(3));
  set.write(dir.path());
  EXPECT_CONTAINS(load_error(dir.str()), "test labels must be a 1-D IDX array but this one has 2");
}

TEST(Mnist, MissingDirectory) {
  TempDir dir("memstrat_mnist");
  const std::string missing = (dir.path() / "no-such-dir").string();
  const std::string m = load_error(missing);
  EXPECT_CONTAINS(m, missing + ": data directory does not exist");
  EXPECT_CONTAINS(m, "experiments/scripts/get_mnist.py");
  EXPECT_CONTAINS(m, "--data DIR");
  EXPECT_CONTAINS(m, "MEMSTRAT_DATA");
}

TEST(Mnist, PathIsAFile) {
  TempDir dir("memstrat_mnist");
  write_raw(dir.path() / "file", {1});
  EXPECT_CONTAINS(load_error((dir.path() / "file").string()), "is not a directory");
}

TEST(Mnist, MissingFiles) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.write(dir.path());
  fs::remove(dir.path() / "t10k-labels-idx1-ubyte.gz");
  fs::remove(dir.path() / "train-images-idx3-ubyte.gz");
  const std::string m = load_error(dir.str());
  EXPECT_CONTAINS(m, "missing file(s) train-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz)");
  EXPECT_CONTAINS(m, "experiments/scripts/get_mnist.py");
}

TEST(Mnist, CorruptFileIsReportedWithItsPath) {
  TempDir dir("memstrat_mnist");
  FakeSet set;
  set.gz = false;
  set.test_images.resize(set.test_images.size() - 1);
  set.write(dir.path());
  const std::string m = load_error(dir.str());
  EXPECT_CONTAINS(m, (dir.path() / "t10k-images-idx3-ubyte").string() + ": truncated data");
}

// ----- data set name ---------------------------------------------------------------------

TEST(Mnist, FashionDetectedFromDirectoryName) {
  TempDir parent;
  const fs::path dir = parent.path() / "Fashion-MNIST";
  fs::create_directory(dir);
  FakeSet().write(dir);
  EXPECT_EQ(load_mnist(dir.string()).name, "fashion-mnist");
  EXPECT_EQ(load_mnist(dir.string() + "/").name, "fashion-mnist");
}

TEST(Mnist, DatasetMarkerFile) {
  TempDir dir("memstrat_mnist");
  FakeSet().write(dir.path());
  std::ofstream(dir.path() / "DATASET") << "fashion-mnist\n";
  EXPECT_EQ(load_mnist(dir.str()).name, "fashion-mnist");
  std::ofstream(dir.path() / "DATASET") << "cifar\n";
  EXPECT_CONTAINS(load_error(dir.str()), "unknown data set name 'cifar'");
}

// ----- truncate_dataset --------------------------------------------------------------------

TEST(Mnist, TruncateDataset) {
  TempDir dir("memstrat_mnist");
  FakeSet().write(dir.path());
  HostDataset d = load_mnist(dir.str());
  truncate_dataset(d, 2, 0);
  EXPECT_EQ(d.n_train(), 2);
  EXPECT_EQ(d.train_images.size(), 2u * 12);
  const Bytes all = pixels(60, 1);
  EXPECT_EQ(d.train_images, Bytes(all.begin(), all.begin() + 24));
  EXPECT_EQ(d.n_test(), 3);     // 0 keeps all
  truncate_dataset(d, 100, 1);  // above the size keeps all
  EXPECT_EQ(d.n_train(), 2);
  EXPECT_EQ(d.n_test(), 1);
  EXPECT_EQ(d.test_images.size(), 12u);
  EXPECT_THROW(truncate_dataset(d, -1, 0), std::invalid_argument);
}

// ----- resolve_data_dir ------------------------------------------------------------------

TEST(Mnist, ResolvePrefersCliValue) {
  TempDir cli;
  TempDir env;
  ScopedEnv e(kDataEnvVar, env.str());
  EXPECT_EQ(resolve_data_dir(cli.str()), cli.str());
}

TEST(Mnist, ResolveMissingCliValueIsAnError) {
  TempDir env;
  ScopedEnv e(kDataEnvVar, env.str());
  const std::string missing = (env.path() / "typo").string();
  try {
    resolve_data_dir(missing);
    FAIL() << "no exception";
  } catch (const DataError& ex) {
    EXPECT_CONTAINS(ex.what(), "--data " + missing + ": no such directory");
  }
}

TEST(Mnist, ResolveUsesEnvironment) {
  TempDir env;
  ScopedEnv e(kDataEnvVar, env.str());
  EXPECT_EQ(resolve_data_dir(""), env.str());
  ScopedEnv bad(kDataEnvVar, (env.path() / "gone").string());
  try {
    resolve_data_dir("");
    FAIL() << "no exception";
  } catch (const DataError& ex) {
    EXPECT_CONTAINS(ex.what(), "MEMSTRAT_DATA=");
    EXPECT_CONTAINS(ex.what(), "no such directory");
  }
}

TEST(Mnist, ResolveDefaultsToDataMnistUnderTheWorkingDirectoryOnly) {
  // <tmp>/repo/data/mnist exists but is empty; a complete data set sits outside the working
  // directory, at <tmp>/elsewhere/mnist: it is not searched (only --data or MEMSTRAT_DATA
  // name a directory elsewhere).
  TempDir root;
  fs::create_directories(root.path() / "repo/data/mnist");
  fs::create_directories(root.path() / "elsewhere/mnist");
  FakeSet().write(root.path() / "elsewhere/mnist");
  ScopedEnv e(kDataEnvVar, std::nullopt);
  ScopedCwd cwd(root.path() / "repo");
  try {
    resolve_data_dir("");
    FAIL() << "no exception";
  } catch (const DataError& ex) {
    const std::string m = ex.what();
    EXPECT_CONTAINS(m, "no MNIST data directory found");
    EXPECT_CONTAINS(m, "MEMSTRAT_DATA (not set)");
    EXPECT_CONTAINS(
        m, (root.path() / "repo/data/mnist").string() + " (no train-images-idx3-ubyte(.gz) in it)");
    EXPECT_EQ(m.find((root.path() / "elsewhere").string()), std::string::npos) << m;
    EXPECT_CONTAINS(m, "get_mnist.py");
  }
  FakeSet().write(root.path() / "repo/data/mnist");
  EXPECT_EQ(resolve_data_dir(""), (root.path() / "repo/data/mnist").string());
  fs::remove_all(root.path() / "repo/data");
  try {
    resolve_data_dir("");
    FAIL() << "no exception";
  } catch (const DataError& ex) {
    EXPECT_CONTAINS(ex.what(), (root.path() / "repo/data/mnist").string() + " (no such directory)");
  }
  // Named explicitly, the data set outside is used.
  ScopedEnv named(kDataEnvVar, (root.path() / "elsewhere/mnist").string());
  EXPECT_EQ(resolve_data_dir(""), (root.path() / "elsewhere/mnist").string());
}

// ----- the real data -----------------------------------------------------------------------

TEST(Mnist, RealMnist) {
  const char* env = std::getenv(kDataEnvVar);
  const std::string dir = env && *env ? env : MEMSTRAT_SOURCE_DIR "/data/mnist";
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz") &&
      !fs::exists(fs::path(dir) / "train-images-idx3-ubyte")) {
    GTEST_SKIP() << "MNIST not found in " << dir
                 << "; set MEMSTRAT_DATA or run experiments/scripts/get_mnist.py";
  }
  if (std::ifstream in(fs::path(dir) / "DATASET"); in) {
    std::string name;
    in >> name;
    if (name == "fashion-mnist") GTEST_SKIP() << dir << " holds Fashion-MNIST, not MNIST";
  }
  const HostDataset d = load_mnist(dir);
  EXPECT_EQ(d.name, "mnist");
  ASSERT_EQ(d.n_train(), 60000);
  ASSERT_EQ(d.n_test(), 10000);
  EXPECT_EQ(d.rows, 28);
  EXPECT_EQ(d.cols, 28);
  EXPECT_EQ(d.train_images.size(), 60000u * 784);
  EXPECT_EQ(d.test_images.size(), 10000u * 784);
  EXPECT_EQ(d.train_labels[0], 5);
  EXPECT_EQ(d.test_labels[0], 7);
  // The published class counts of MNIST.
  std::array<std::int64_t, 10> train{}, test{};
  for (std::int32_t y : d.train_labels) ++train[static_cast<std::size_t>(y)];
  for (std::int32_t y : d.test_labels) ++test[static_cast<std::size_t>(y)];
  EXPECT_EQ(train, (std::array<std::int64_t, 10>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265,
                                                 5851, 5949}));
  EXPECT_EQ(test,
            (std::array<std::int64_t, 10>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}));
  std::int64_t sum = 0;
  for (auto c : train) sum += c;
  EXPECT_EQ(sum, 60000);
}

}  // namespace
}  // namespace memstrat
