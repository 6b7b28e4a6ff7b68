// idx_test_support.h: what the IDX and MNIST reader tests share: IDX byte-buffer builders,
// a self-deleting temporary directory, raw/gzip file writers and EXPECT_CONTAINS for messages.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "message: " << (haystack) << "\nexpected it to contain: " << (needle)

namespace memstrat::idx_testing {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

/// An IDX file's bytes: magic (0, 0, type, ndims), big-endian dims, then `data`.
inline Bytes make_idx(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
/// Unsigned-byte (0x08) IDX, the type MNIST uses.
inline Bytes make_idx(const std::vector<std::uint32_t>& dims, const Bytes& data) {
  return make_idx(0x08, dims, data);
}

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "memstrat_test") {
    std::string tmpl = (fs::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

inline void write_raw(const fs::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(out.good()) << p;
}

inline void write_gz(const fs::path& p, const Bytes& b) {
  gzFile f = gzopen(p.string().c_str(), "wb9");
  ASSERT_NE(f, nullptr) << p;
  ASSERT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

}  // namespace memstrat::idx_testing
