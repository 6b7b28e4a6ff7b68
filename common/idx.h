// idx.h: DataError, IdxArray and the IDX reader (raw or gzip-compressed files, as the
// MNIST family is distributed), validated so that no input can crash or exhaust memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace memstrat {

/// Thrown for every unusable input file or data directory. The message names the file,
/// says what is wrong with it and how to fix it, so the CLI can print it as is.
class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& what) : std::runtime_error(what) {}
};

/// One IDX array: element type, dimensions (outermost first) and the elements, row-major.
struct IdxArray {
  std::uint8_t type_code = 0;       // always 0x08 (unsigned byte): the only type accepted
  std::vector<std::uint32_t> dims;  // 1..4 entries, each > 0
  std::vector<std::uint8_t> data;   // product(dims) bytes, header excluded

  std::uint64_t count() const;  // product of dims
};

/// The largest array accepted, in bytes. MNIST's train images are 47 MB; the cap exists
/// so that a corrupt or hostile header cannot make us allocate gigabytes.
inline constexpr std::uint64_t kIdxMaxDataBytes = std::uint64_t{1} << 30;

/// Parses an IDX image held in memory. `bytes` may be the raw IDX content or a gzip
/// stream of it (detected by the gzip magic 1f 8b). `name` is used only in messages.
/// Pure and bounded: allocates at most min(header size, decompressed size) and never more
/// than kIdxMaxDataBytes; throws DataError for anything that is not a well-formed
/// unsigned-byte IDX array with nothing before or after it.
IdxArray parse_idx(const std::uint8_t* bytes, std::size_t n, const std::string& name);

/// Reads and parses an IDX file (raw or .gz). Throws DataError naming `path` when it
/// cannot be opened or read, or when parse_idx rejects it.
IdxArray read_idx_file(const std::string& path);

}  // namespace memstrat
