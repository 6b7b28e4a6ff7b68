// mnist.cpp: MNIST / Fashion-MNIST loading on top of the IDX reader, and the search for the
// data directory. Every check runs before any device set-up so that a bad data directory
// is reported in milliseconds on any machine.
#include "common/mnist.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace memstrat {

namespace fs = std::filesystem;

namespace {

constexpr const char* kGetDataFix =
    "Run experiments/scripts/get_mnist.py (from the repo root) or pass --data DIR / set MEMSTRAT_DATA "
    "to a directory holding the four MNIST IDX files";
constexpr const char* kMixedFix =
    "The four files must come from one data set: delete them and run experiments/scripts/get_mnist.py";

constexpr int kClasses = 10;

struct Part {
  const char* base;   // file name without ".gz"
  const char* title;  // for messages
};
constexpr Part kTrainImages{"train-images-idx3-ubyte", "training images"};
constexpr Part kTrainLabels{"train-labels-idx1-ubyte", "training labels"};
constexpr Part kTestImages{"t10k-images-idx3-ubyte", "test images"};
constexpr Part kTestLabels{"t10k-labels-idx1-ubyte", "test labels"};

// The file for `part` in `dir`: the .gz name when present, else the raw name, else "".
std::string find_part(const fs::path& dir, const Part& part) {
  for (const std::string& name : {std::string(part.base) + ".gz", std::string(part.base)}) {
    std::error_code ec;
    const fs::path p = dir / name;
    if (fs::exists(p, ec) && !fs::is_directory(p, ec)) return p.string();
  }
  return {};
}

bool contains_ci(std::string s, const std::string& needle) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s.find(needle) != std::string::npos;
}

fs::path absolute_normal(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}

// "fashion-mnist" or "mnist": a DATASET marker written by get_mnist.py decides; without
// one, the directory's name does (the Debian package installs into .../fashion-mnist).
std::string dataset_name(const fs::path& dir) {
  const fs::path marker = dir / "DATASET";
  std::error_code ec;
  if (fs::is_regular_file(marker, ec)) {
    std::ifstream in(marker);
    std::string word;
    in >> word;
    if (word == "mnist" || word == "fashion-mnist") return word;
    throw DataError(marker.string() + ": unknown data set name '" + word +
                    "' (expected 'mnist' or 'fashion-mnist'). Fix the file or delete it");
  }
  fs::path leaf = absolute_normal(dir);
  if (leaf.filename().empty()) leaf = leaf.parent_path();  // "dir/" normalises to "dir/"
  return contains_ci(leaf.filename().string(), "fashion") ? "fashion-mnist" : "mnist";
}

std::vector<std::int32_t> checked_labels(const IdxArray& a, const std::string& path) {
  std::vector<std::int32_t> out(a.data.size());
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    if (a.data[i] >= kClasses) {
      throw DataError(path + ": label " + std::to_string(a.data[i]) + " at index " +
                      std::to_string(i) + " is out of range (MNIST labels are 0.." +
                      std::to_string(kClasses - 1) + "). " + kMixedFix);
    }
    out[i] = a.data[i];
  }
  return out;
}

void require_rank(const IdxArray& a, std::size_t rank, const std::string& path, const char* what) {
  if (a.dims.size() != rank) {
    throw DataError(path + ": " + what + " must be a " + std::to_string(rank) +
                    "-D IDX array but this one has " + std::to_string(a.dims.size()) +
                    " dimensions (is it the right file?). " + kMixedFix);
  }
}

void require_same_count(const IdxArray& images, const std::string& images_path,
                        const IdxArray& labels, const std::string& labels_path) {
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(labels_path + ": count mismatch: " + std::to_string(labels.dims[0]) +
                    " labels but " + images_path + " holds " + std::to_string(images.dims[0]) +
                    " images. " + kMixedFix);
  }
}

}  // namespace

HostDataset load_mnist(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::exists(d, ec)) {
    throw DataError(dir + ": data directory does not exist. " + kGetDataFix);
  }
  if (!fs::is_directory(d, ec)) {
    throw DataError(dir +
                    ": is not a directory (expected the directory holding the MNIST "
                    "IDX files). " +
                    kGetDataFix);
  }

  // Report every missing file at once: a half-copied directory is a common state.
  const Part parts[4] = {kTrainImages, kTrainLabels, kTestImages, kTestLabels};
  std::string paths[4];
  std::string missing;
  for (int i = 0; i < 4; ++i) {
    paths[i] = find_part(d, parts[i]);
    if (paths[i].empty()) {
      missing += std::string(missing.empty() ? "" : ", ") + parts[i].base + "(.gz)";
    }
  }
  if (!missing.empty()) {
    throw DataError(dir + ": missing file(s) " + missing + ". " + kGetDataFix);
  }
  const std::string& train_images_path = paths[0];
  const std::string& train_labels_path = paths[1];
  const std::string& test_images_path = paths[2];
  const std::string& test_labels_path = paths[3];

  // Labels first: small, and a wrong file shows up before 47 MB are decompressed.
  IdxArray train_labels = read_idx_file(train_labels_path);
  require_rank(train_labels, 1, train_labels_path, kTrainLabels.title);
  IdxArray test_labels = read_idx_file(test_labels_path);
  require_rank(test_labels, 1, test_labels_path, kTestLabels.title);
  IdxArray train_images = read_idx_file(train_images_path);
  require_rank(train_images, 3, train_images_path, kTrainImages.title);
  IdxArray test_images = read_idx_file(test_images_path);
  require_rank(test_images, 3, test_images_path, kTestImages.title);

  // parse_idx guarantees every dimension >= 1, so each set has at least one sample; the
  // check stays here because HostDataset users divide by these counts.
  if (train_images.dims[0] < 1 || test_images.dims[0] < 1) {
    throw DataError(dir + ": a data set needs at least one training and one test sample. " +
                    kMixedFix);
  }
  require_same_count(train_images, train_images_path, train_labels, train_labels_path);
  require_same_count(test_images, test_images_path, test_labels, test_labels_path);
  if (train_images.dims[1] != test_images.dims[1] || train_images.dims[2] != test_images.dims[2]) {
    throw DataError(test_images_path + ": image size mismatch: test images are " +
                    std::to_string(test_images.dims[1]) + "x" +
                    std::to_string(test_images.dims[2]) + " but the training images (" +
                    train_images_path + ") are " + std::to_string(train_images.dims[1]) + "x" +
                    std::to_string(train_images.dims[2]) + ". " + kMixedFix);
  }

  HostDataset out;
  out.name = dataset_name(d);
  out.source = dir;
  // Both fit in int: parse_idx caps an array at 2^30 bytes.
  out.rows = static_cast<int>(train_images.dims[1]);
  out.cols = static_cast<int>(train_images.dims[2]);
  out.classes = kClasses;
  out.train_labels = checked_labels(train_labels, train_labels_path);
  out.test_labels = checked_labels(test_labels, test_labels_path);
  out.train_images = std::move(train_images.data);
  out.test_images = std::move(test_images.data);
  return out;
}

std::string resolve_data_dir(const std::string& cli_value) {
  if (!cli_value.empty()) {
    std::error_code ec;
    if (fs::is_directory(cli_value, ec)) return absolute_normal(cli_value).string();
    throw DataError("--data " + cli_value + ": no such directory. " + kGetDataFix);
  }
  const char* env = std::getenv(kDataEnvVar);
  if (env != nullptr && *env != '\0') {
    std::error_code ec;
    if (fs::is_directory(env, ec)) return absolute_normal(env).string();
    throw DataError(std::string(kDataEnvVar) + "=" + env + ": no such directory. " +
                    "Unset it or point it at the MNIST directory. " + kGetDataFix);
  }
  // The default: data/mnist, where experiments/scripts/get_mnist.py puts the data. It counts
  // only if it holds the training images, so that an empty directory is reported as such.
  const fs::path dflt = absolute_normal("data/mnist");
  std::error_code ec;
  std::string why;
  if (!fs::is_directory(dflt, ec))
    why = "no such directory";
  else if (find_part(dflt, kTrainImages).empty())
    why = "no " + std::string(kTrainImages.base) + "(.gz) in it";
  else
    return dflt.string();
  throw DataError(std::string("no MNIST data directory found. Tried: --data (not given), ") +
                  kDataEnvVar + " (not set), " + dflt.string() + " (" + why + ")\n" + kGetDataFix);
}

void truncate_dataset(HostDataset& data, std::int64_t max_train, std::int64_t max_test) {
  if (max_train < 0 || max_test < 0) {
    throw std::invalid_argument("truncate_dataset: sample limits must be >= 0 (0 keeps all), got " +
                                std::to_string(max_train) + " and " + std::to_string(max_test));
  }
  const auto features = static_cast<std::size_t>(data.features());
  if (max_train > 0 && max_train < data.n_train()) {
    data.train_labels.resize(static_cast<std::size_t>(max_train));
    data.train_images.resize(static_cast<std::size_t>(max_train) * features);
    data.train_labels.shrink_to_fit();  // quick runs should not keep the full set's memory
    data.train_images.shrink_to_fit();
  }
  if (max_test > 0 && max_test < data.n_test()) {
    data.test_labels.resize(static_cast<std::size_t>(max_test));
    data.test_images.resize(static_cast<std::size_t>(max_test) * features);
    data.test_labels.shrink_to_fit();
    data.test_images.shrink_to_fit();
  }
}

}  // namespace memstrat
