// test_idx.cpp: the IDX reader on hand-built buffers and temp files: valid raw and gzip
// input, and every malformed case parse_idx promises to reject with a DataError that
// names the problem (magic, type, rank, dimensions, size claims, truncation, trailing
// bytes, corrupt or truncated gzip, decompression bombs).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/idx.h"
#include "idx_test_support.h"

namespace memstrat {
namespace {

using namespace idx_testing;  // NOLINT: shared test helpers

Bytes pattern(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i * 37 + 11) & 0xff);
  return b;
}

// One gzip member of `in`, as gzip(1) would write it.
Bytes gzip_bytes(const Bytes& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, in.size()) + 64);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The DataError message parse_idx gives for `b`; any other exception type fails the test
// by escaping, and no exception at all is reported as a failure.
std::string error_of(const Bytes& b, const std::string& name = "test.idx") {
  try {
    parse_idx(b.data(), b.size(), name);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse_idx accepted input that should be rejected";
  return {};
}

// ----- valid input ---------------------------------------------------------------------

TEST(Idx, ValidRawLabels) {
  const Bytes labels = {5, 0, 4, 1, 9, 2};
  const IdxArray a = parse_idx(make_idx(0x08, {6}, labels).data(), 6 + 8, "labels");
  EXPECT_EQ(a.type_code, 0x08);
  EXPECT_EQ(a.dims, std::vector<std::uint32_t>({6}));
  EXPECT_EQ(a.data, labels);
  EXPECT_EQ(a.count(), 6u);
}

TEST(Idx, ValidRaw3DAnd4D) {
  const Bytes px = pattern(3 * 4 * 5);
  const Bytes b = make_idx(0x08, {3, 4, 5}, px);
  const IdxArray a = parse_idx(b.data(), b.size(), "images");
  EXPECT_EQ(a.dims, std::vector<std::uint32_t>({3, 4, 5}));
  EXPECT_EQ(a.data, px);

  const Bytes b4 = make_idx(0x08, {2, 3, 1, 2}, pattern(12));
  EXPECT_EQ(parse_idx(b4.data(), b4.size(), "4d").count(), 12u);
}

TEST(Idx, ValidGzip) {
  const Bytes px = pattern(7 * 28 * 28);
  const Bytes gz = gzip_bytes(make_idx(0x08, {7, 28, 28}, px));
  ASSERT_EQ(gz[0], 0x1f);
  const IdxArray a = parse_idx(gz.data(), gz.size(), "images.gz");
  EXPECT_EQ(a.dims, std::vector<std::uint32_t>({7, 28, 28}));
  EXPECT_EQ(a.data, px);
}

TEST(Idx, ValidGzipLargerThanFirstBufferChunk) {
  // 300 KB of data: the decompression buffer has to grow several times.
  const Bytes px = pattern(300 * 1000);
  const Bytes gz = gzip_bytes(make_idx(0x08, {300, 1000}, px));
  EXPECT_EQ(parse_idx(gz.data(), gz.size(), "big.gz").data, px);
}

TEST(Idx, ValidMultiMemberGzip) {
  // `cat a.gz b.gz` is a valid gzip file; gunzip concatenates the members.
  const Bytes raw = make_idx(0x08, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Bytes gz = concat(gzip_bytes(Bytes(raw.begin(), raw.begin() + 14)),
                          gzip_bytes(Bytes(raw.begin() + 14, raw.end())));
  EXPECT_EQ(parse_idx(gz.data(), gz.size(), "multi.gz").data, Bytes({1, 2, 3, 4, 5, 6}));
}

TEST(Idx, ValidRawAndGzipFiles) {
  TempDir dir("memstrat_idx");
  const Bytes px = pattern(4 * 6 * 6);
  const Bytes raw = make_idx(0x08, {4, 6, 6}, px);
  write_raw(dir.path() / "raw-idx3-ubyte", raw);
  write_gz(dir.path() / "gz-idx3-ubyte.gz", raw);
  EXPECT_EQ(read_idx_file((dir.path() / "raw-idx3-ubyte").string()).data, px);
  const IdxArray a = read_idx_file((dir.path() / "gz-idx3-ubyte.gz").string());
  EXPECT_EQ(a.dims, std::vector<std::uint32_t>({4, 6, 6}));
  EXPECT_EQ(a.data, px);
}

// ----- header problems -------------------------------------------------------------------

TEST(Idx, EmptyInput) { EXPECT_CONTAINS(error_of({}), "empty"); }

TEST(Idx, HeaderTooShort) {
  const std::string m = error_of({0, 0, 8});
  EXPECT_CONTAINS(m, "too short for an IDX header");
  EXPECT_CONTAINS(m, "test.idx");      // names the file
  EXPECT_CONTAINS(m, "get_mnist.py");  // and the fix
}

TEST(Idx, WrongMagic) {
  Bytes b = make_idx(0x08, {3}, {1, 2, 3});
  b[0] = 0x01;
  b[1] = 0x02;
  const std::string m = error_of(b);
  EXPECT_CONTAINS(m, "bad magic number 01 02 08 01");
  EXPECT_CONTAINS(m, "not an IDX file");
}

TEST(Idx, WrongMagicWebPageHint) {
  const std::string page = "<html><body>404 Not Found</body></html>";
  EXPECT_CONTAINS(error_of(Bytes(page.begin(), page.end())), "web page");
}

TEST(Idx, WrongMagicDoubleGzipHint) {
  const Bytes twice = gzip_bytes(gzip_bytes(make_idx(0x08, {3}, {1, 2, 3})));
  EXPECT_CONTAINS(error_of(twice), "gzip-compressed twice");
}

TEST(Idx, UnsupportedTypeCode) {
  const std::string m = error_of(make_idx(0x0D, {2}, Bytes(8, 0)));
  EXPECT_CONTAINS(m, "element type 0x0d (float32) is not supported");
  EXPECT_CONTAINS(error_of(make_idx(0x0C, {2}, Bytes(8, 0))), "int32");
}

TEST(Idx, InvalidTypeCode) {
  EXPECT_CONTAINS(error_of(make_idx(0x07, {2}, {0, 0})), "invalid IDX type code 0x07");
}

TEST(Idx, ZeroDimensions) {
  EXPECT_CONTAINS(error_of({0, 0, 8, 0}), "invalid number of dimensions 0 (expected 1 to 4)");
}

TEST(Idx, FiveDimensions) {
  EXPECT_CONTAINS(error_of(make_idx(0x08, {1, 1, 1, 1, 1}, {7})),
                  "invalid number of dimensions 5 (expected 1 to 4)");
}

TEST(Idx, ZeroSizedDimension) {
  EXPECT_CONTAINS(error_of(make_idx(0x08, {3, 0, 4}, {})), "dimension 2 of 3 is 0");
}

TEST(Idx, TruncatedDimensions) {
  Bytes b = make_idx(0x08, {10, 28, 28}, {});
  b.resize(4 + 6);
  EXPECT_CONTAINS(error_of(b),
                  "truncated header: it declares 3 dimensions but ends after 6 of their 12 bytes");
}

// ----- size claims -----------------------------------------------------------------------

TEST(Idx, HugeImageCountRejectedBeforeAllocating) {
  // 2^31 MNIST-sized images = 1.6 TB: must be refused from the header alone.
  const Bytes b = make_idx(0x08, {0x80000000u, 28, 28}, pattern(64));
  const std::string m = error_of(b);
  EXPECT_CONTAINS(m, "header claims 2147483648 x 28 x 28 elements (1683627180032 bytes)");
  EXPECT_CONTAINS(m, "limit");
  EXPECT_CONTAINS(error_of(gzip_bytes(b)), "header claims 2147483648 x 28 x 28");
}

TEST(Idx, ProductOverflowingSixtyFourBits) {
  const std::uint32_t m32 = 0xffffffffu;
  EXPECT_CONTAINS(error_of(make_idx(0x08, {m32, m32, m32, m32}, {1})), "more than 2^64");
}

TEST(Idx, ClaimAtTheCapWithLittleGzipDataIsTruncatedNotAllocated) {
  // A header at exactly the cap (1 GiB) whose stream holds 100 bytes: rejected as
  // truncated while the buffer is still small (the buffer only grows with real data).
  const Bytes b = make_idx(0x08, {static_cast<std::uint32_t>(kIdxMaxDataBytes)}, pattern(100));
  const std::string m = error_of(gzip_bytes(b));
  EXPECT_CONTAINS(m, "truncated data");
  EXPECT_CONTAINS(m, "holds only 100");
}

TEST(Idx, TruncatedData) {
  const std::string m = error_of(make_idx(0x08, {4, 4}, pattern(10)));
  EXPECT_CONTAINS(m, "truncated data: the header (4 x 4) promises 16 data bytes");
  EXPECT_CONTAINS(m, "holds only 10");
}

TEST(Idx, TruncatedDataGzip) {
  const std::string m = error_of(gzip_bytes(make_idx(0x08, {4, 4}, pattern(10))));
  EXPECT_CONTAINS(m, "truncated data");
  EXPECT_CONTAINS(m, "decompressed data holds only 10");
}

TEST(Idx, TrailingBytes) {
  const std::string m = error_of(make_idx(0x08, {4}, pattern(6)));
  EXPECT_CONTAINS(m, "2 unexpected bytes after the 4 data bytes");
  EXPECT_CONTAINS(m, "trailing garbage");
}

TEST(Idx, TrailingDataInsideGzip) {
  EXPECT_CONTAINS(error_of(gzip_bytes(make_idx(0x08, {4}, pattern(6)))),
                  "decompressed data is longer than the 4 data bytes");
}

TEST(Idx, TrailingGarbageAfterGzipStream) {
  const Bytes gz = concat(gzip_bytes(make_idx(0x08, {4}, pattern(4))), {'j', 'u', 'n', 'k'});
  EXPECT_CONTAINS(error_of(gz), "4 unexpected bytes after the end of the gzip stream");
}

TEST(Idx, DecompressionBombIsBounded) {
  // 64 MiB of zeros compress to ~64 KB; the header claims 16 bytes. Only 17 bytes may be
  // decompressed before the extra content is noticed.
  const Bytes gz = gzip_bytes(concat(make_idx(0x08, {16}, Bytes(16, 0)), Bytes(64u << 20, 0)));
  ASSERT_LT(gz.size(), 1u << 20);
  EXPECT_CONTAINS(error_of(gz), "longer than the 16 data bytes");
}

// ----- corrupt gzip ----------------------------------------------------------------------

TEST(Idx, CorruptGzipBlock) {
  Bytes gz = gzip_bytes(make_idx(0x08, {8, 8}, pattern(64)));
  gz[10] = 0xff;  // first deflate byte (after the 10-byte header): block type 3 is invalid
  const std::string m = error_of(gz, "bad.gz");
  EXPECT_CONTAINS(m, "bad.gz: corrupt gzip stream (zlib: invalid block type)");
}

TEST(Idx, CorruptGzipChecksum) {
  Bytes gz = gzip_bytes(make_idx(0x08, {8, 8}, pattern(64)));
  gz[gz.size() - 8] ^= 0x5a;  // CRC-32 of the trailer
  EXPECT_CONTAINS(error_of(gz), "corrupt gzip stream (zlib: incorrect data check)");
}

TEST(Idx, TruncatedGzipStream) {
  Bytes gz = gzip_bytes(make_idx(0x08, {8, 8}, pattern(64)));
  gz.resize(gz.size() - 5);
  EXPECT_CONTAINS(error_of(gz), "truncated gzip stream");
}

TEST(Idx, EveryTruncationIsRejected) {
  // Any prefix of a valid file, raw or gzip, must be refused cleanly.
  const Bytes raw = make_idx(0x08, {3, 5, 5}, pattern(75));
  const Bytes gz = gzip_bytes(raw);
  for (const Bytes* full : {&raw, &gz}) {
    for (std::size_t len = 0; len < full->size(); ++len) {
      const Bytes cut(full->begin(), full->begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_THROW(parse_idx(cut.data(), cut.size(), "cut"), DataError) << "length " << len;
    }
  }
}

TEST(Idx, EverySingleByteCorruptionIsHandled) {
  // A small deterministic fuzz: flipping any byte either still parses to a consistent
  // array or throws DataError; nothing else escapes.
  const Bytes gz = gzip_bytes(make_idx(0x08, {2, 6, 6}, pattern(72)));
  for (std::size_t i = 0; i < gz.size(); ++i) {
    for (std::uint8_t x : {0x01, 0x80, 0xff}) {
      Bytes b = gz;
      b[i] ^= x;
      try {
        const IdxArray a = parse_idx(b.data(), b.size(), "flip");
        EXPECT_EQ(a.count(), a.data.size());
      } catch (const DataError&) {
      }
    }
  }
}

// ----- files -------------------------------------------------------------------------------

TEST(Idx, MissingFile) {
  TempDir dir("memstrat_idx");
  const std::string p = (dir.path() / "nope-idx1-ubyte.gz").string();
  try {
    read_idx_file(p);
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_CONTAINS(e.what(), p + ": no such file");
    EXPECT_CONTAINS(e.what(), "get_mnist.py");
  }
}

TEST(Idx, DirectoryInsteadOfFile) {
  TempDir dir("memstrat_idx");
  try {
    read_idx_file(dir.path().string());
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_CONTAINS(e.what(), "is a directory");
  }
}

TEST(Idx, FileErrorsNameThePath) {
  TempDir dir("memstrat_idx");
  const fs::path p = dir.path() / "train-labels-idx1-ubyte.gz";
  Bytes gz = gzip_bytes(make_idx(0x08, {10}, pattern(10)));
  gz.resize(gz.size() / 2);
  write_raw(p, gz);
  try {
    read_idx_file(p.string());
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_CONTAINS(e.what(), p.string() + ": truncated gzip stream");
  }
}

}  // namespace
}  // namespace memstrat
