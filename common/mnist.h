// mnist.h: load_mnist (the four MNIST / Fashion-MNIST IDX files of a directory into a
// validated HostDataset), resolve_data_dir (where the data is looked for) and
// truncate_dataset (smaller sets for quick runs and tests).
#pragma once

#include <cstdint>
#include <string>

#include "common/host_dataset.h"
#include "common/idx.h"

namespace memstrat {

/// The environment variable that names the data directory when --data is not given.
inline constexpr const char* kDataEnvVar = "MEMSTRAT_DATA";

/// Loads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
/// t10k-labels-idx1-ubyte from `dir`, each either gzip-compressed (".gz", preferred when
/// both exist) or raw. Validates: images 3-D, labels 1-D, as many labels as images, the
/// same rows and cols in train and test, every label < 10, at least one sample.
///
/// HostDataset::name is "fashion-mnist" when the directory's name contains "fashion" or
/// when a file `DATASET` in it says "fashion-mnist" (experiments/scripts/get_mnist.py writes one),
/// else "mnist". HostDataset::source is the directory as given.
///
/// Throws DataError (naming the directory or file, the problem and the fix) for a missing
/// directory, a missing file or any invalid content.
HostDataset load_mnist(const std::string& dir);

/// The data directory to use, first match wins:
///   1. `cli_value` (the --data option) when non-empty,
///   2. the MEMSTRAT_DATA environment variable when set and non-empty,
///   3. "data/mnist" relative to the current directory (the repo root in normal use; where
///      experiments/scripts/get_mnist.py puts the data). Nothing outside the working directory
///      is searched: a data set elsewhere is named with --data or MEMSTRAT_DATA.
/// An explicit choice (1 or 2) that does not exist is an error, never skipped: silently
/// training on another data set than the one asked for would be worse than stopping.
/// Returns the directory as an absolute, normalised path. Throws DataError listing every
/// candidate tried and how to provide the data.
std::string resolve_data_dir(const std::string& cli_value);

/// Keeps only the first `max_train` training and `max_test` test samples; 0 keeps all,
/// a limit above the size keeps all. Throws std::invalid_argument for a negative limit.
void truncate_dataset(HostDataset& data, std::int64_t max_train, std::int64_t max_test);

}  // namespace memstrat
