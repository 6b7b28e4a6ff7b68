// idx.cpp: the IDX reader. Format: http://yann.lecun.com/exdb/mnist/ ("THE IDX FILE FORMAT"):
// two zero bytes, a type code, the number of dimensions, one big-endian uint32 per
// dimension, then the elements. Every length is checked against the bytes that actually
// exist before anything is allocated, so a hostile header cannot cost memory.
#include "common/idx.h"

// const-correct zlib API (next_in is `const Bytef*`); must precede the include.
#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <sstream>

namespace memstrat {

std::uint64_t IdxArray::count() const {
  if (dims.empty()) return 0;
  std::uint64_t n = 1;
  for (std::uint32_t d : dims) n *= d;  // parse_idx guarantees the product is <= 2^30
  return n;
}

namespace {

constexpr const char* kCorruptFix =
    "The file is damaged or is not an MNIST-format IDX file: delete it and run "
    "experiments/scripts/get_mnist.py, which fetches the data again and checks its SHA-256 sums";

[[noreturn]] void fail(const std::string& name, const std::string& problem,
                       const char* fix = kCorruptFix) {
  throw DataError(name + ": " + problem + ". " + fix);
}

std::string hex_byte(std::uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return std::string{digits[b >> 4], digits[b & 0xf]};
}

std::string dims_text(const std::vector<std::uint32_t>& dims) {
  std::ostringstream os;
  for (std::size_t i = 0; i < dims.size(); ++i) os << (i ? " x " : "") << dims[i];
  return os.str();
}

const char* type_name(std::uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

// Where the IDX bytes come from: the input itself, or a gzip stream decoded on demand.
class Source {
 public:
  virtual ~Source() = default;
  // Fills up to `want` bytes and returns how many; fewer only at the end of the content.
  virtual std::size_t read(std::uint8_t* dst, std::size_t want) = 0;
  // Bytes left, when known without decoding (raw input); lets us compare the header
  // with the real length before allocating.
  virtual bool remaining_known(std::uint64_t* left) const = 0;
  // How messages refer to the content ("file" / "decompressed data").
  virtual const char* what() const = 0;
};

class RawSource final : public Source {
 public:
  RawSource(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::size_t read(std::uint8_t* dst, std::size_t want) override {
    const std::size_t k = std::min(want, n_ - pos_);
    if (k) std::memcpy(dst, p_ + pos_, k);
    pos_ += k;
    return k;
  }
  bool remaining_known(std::uint64_t* left) const override {
    *left = n_ - pos_;
    return true;
  }
  const char* what() const override { return "file"; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

// Streams the decompressed content of one or more concatenated gzip members (as gunzip
// does). Output is produced only as far as the caller asks, so a decompression bomb
// costs at most the buffer the header justified; CRC and length trailers are checked
// by zlib at the end of each member.
class GzipSource final : public Source {
 public:
  GzipSource(const std::uint8_t* p, std::size_t n, const std::string& name)
      : p_(p), n_(n), name_(name) {
    // 16 + MAX_WBITS: expect a gzip wrapper (not zlib or raw deflate).
    const int rc = inflateInit2(&zs_, 16 + MAX_WBITS);
    if (rc != Z_OK) {
      throw DataError(name_ + ": zlib could not start a decompressor (code " + std::to_string(rc) +
                      "); the machine is probably out of memory");
    }
  }
  ~GzipSource() override { inflateEnd(&zs_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  std::size_t read(std::uint8_t* dst, std::size_t want) override {
    // zlib counts in uInt; feed it in pieces that fit.
    constexpr std::size_t kPiece = std::size_t{1} << 30;
    std::size_t produced = 0;
    while (produced < want) {
      if (member_done_) {
        if (pos_ == n_) break;
        if (n_ - pos_ >= 2 && p_[pos_] == 0x1f && p_[pos_ + 1] == 0x8b) {
          inflateReset(&zs_);
          member_done_ = false;
        } else {
          fail(name_, std::to_string(n_ - pos_) +
                          " unexpected bytes after the end of the gzip stream (trailing garbage)");
        }
      }
      const std::size_t in_piece = std::min(n_ - pos_, kPiece);
      const std::size_t out_piece = std::min(want - produced, kPiece);
      zs_.next_in = p_ + pos_;
      zs_.avail_in = static_cast<uInt>(in_piece);
      zs_.next_out = dst + produced;
      zs_.avail_out = static_cast<uInt>(out_piece);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      pos_ += in_piece - zs_.avail_in;
      produced += out_piece - zs_.avail_out;
      switch (rc) {
        case Z_OK:
          break;  // progress was made; go on
        case Z_STREAM_END:
          member_done_ = true;
          break;
        case Z_BUF_ERROR:
          // No progress possible with output space available: the input ran out.
          fail(name_, "truncated gzip stream: it ends before its end-of-stream marker");
        case Z_MEM_ERROR:
          throw DataError(name_ + ": out of memory while decompressing");
        default:  // Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR
          fail(name_, std::string("corrupt gzip stream (zlib: ") +
                          (zs_.msg ? zs_.msg : "error " + std::to_string(rc)) + ")");
      }
    }
    return produced;
  }
  bool remaining_known(std::uint64_t*) const override { return false; }
  const char* what() const override { return "decompressed data"; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
  std::string name_;
  z_stream zs_{};
  bool member_done_ = false;
};

}  // namespace

IdxArray parse_idx(const std::uint8_t* bytes, std::size_t n, const std::string& name) {
  if (n == 0) fail(name, "the file is empty");
  if (bytes == nullptr) throw std::invalid_argument("parse_idx: null buffer of non-zero size");

  const bool gzip = n >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
  std::unique_ptr<Source> src;
  if (gzip) {
    src = std::make_unique<GzipSource>(bytes, n, name);
  } else {
    src = std::make_unique<RawSource>(bytes, n);
  }
  const std::string what = src->what();

  std::uint8_t magic[4] = {0, 0, 0, 0};
  const std::size_t got = src->read(magic, 4);
  if (got < 4) {
    fail(name, what + " is only " + std::to_string(got) +
                   " bytes long, too short for an IDX header (4 magic bytes + dimensions)");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    std::string seen;
    for (std::size_t i = 0; i < got; ++i) seen += (i ? " " : "") + hex_byte(magic[i]);
    std::string hint;
    if (magic[0] == '<') {
      hint = " (it looks like a web page: a download mirror probably returned an error page)";
    } else if (magic[0] == 0x1f && magic[1] == 0x8b) {
      hint = " (it is gzip-compressed twice)";
    }
    fail(name, "not an IDX file: bad magic number " + seen +
                   ", an IDX file starts with 00 00 <type> <ndims>" + hint);
  }
  const std::uint8_t type = magic[2];
  if (type != 0x08) {
    const char* tn = type_name(type);
    if (tn) {
      fail(name, "element type 0x" + hex_byte(type) + " (" + tn +
                     ") is not supported: only unsigned byte (0x08) IDX arrays are read");
    }
    fail(name, "invalid IDX type code 0x" + hex_byte(type) +
                   " (valid codes are 08, 09, 0b, 0c, 0d, 0e; only 08 is supported)");
  }
  const unsigned ndims = magic[3];
  if (ndims < 1 || ndims > 4) {
    fail(name, "invalid number of dimensions " + std::to_string(ndims) + " (expected 1 to 4)");
  }

  std::uint8_t dim_bytes[16];
  const std::size_t dim_got = src->read(dim_bytes, 4 * ndims);
  if (dim_got < 4 * ndims) {
    fail(name, "truncated header: it declares " + std::to_string(ndims) +
                   " dimensions but ends after " + std::to_string(dim_got) + " of their " +
                   std::to_string(4 * ndims) + " bytes");
  }
  IdxArray out;
  out.type_code = type;
  out.dims.resize(ndims);
  // The product of up to four uint32 values can overflow 64 bits: saturate instead.
  std::uint64_t total = 1;
  bool saturated = false;
  for (unsigned i = 0; i < ndims; ++i) {
    const std::uint8_t* b = dim_bytes + 4 * i;
    const std::uint32_t d = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                            (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
    if (d == 0) {
      fail(name, "dimension " + std::to_string(i + 1) + " of " + std::to_string(ndims) +
                     " is 0 (every dimension must be at least 1)");
    }
    out.dims[i] = d;
    if (total > std::numeric_limits<std::uint64_t>::max() / d) {
      saturated = true;
    } else {
      total *= d;
    }
  }
  const std::string shape = dims_text(out.dims);
  if (saturated || total > kIdxMaxDataBytes) {
    fail(name, "header claims " + shape + " elements (" +
                   (saturated ? std::string("more than 2^64") : std::to_string(total)) +
                   " bytes), more than the " + std::to_string(kIdxMaxDataBytes) +
                   "-byte limit for one array: the header is corrupt");
  }

  std::uint64_t left = 0;
  if (src->remaining_known(&left)) {
    // Raw input: compare the claim with the real length before allocating anything.
    if (left < total) {
      fail(name, "truncated data: the header (" + shape + ") promises " + std::to_string(total) +
                     " data bytes but the file holds only " + std::to_string(left));
    }
    if (left > total) {
      fail(name, std::to_string(left - total) + " unexpected bytes after the " +
                     std::to_string(total) + " data bytes the header (" + shape +
                     ") describes (trailing garbage)");
    }
    out.data.resize(static_cast<std::size_t>(total));
    src->read(out.data.data(), out.data.size());
    return out;
  }

  // Compressed input: the real length is unknown until decoded, so grow the buffer as data
  // arrives. Memory stays within 2x what really decompresses (and within the header's
  // claim), whatever the header says.
  constexpr std::uint64_t kFirstChunk = std::uint64_t{1} << 16;
  std::uint64_t filled = 0;
  while (filled < total) {
    const std::uint64_t next = std::min(total, std::max(2 * filled, kFirstChunk));
    out.data.resize(static_cast<std::size_t>(next));
    filled += src->read(out.data.data() + filled, static_cast<std::size_t>(next - filled));
    if (filled < next) {
      fail(name, "truncated data: the header (" + shape + ") promises " + std::to_string(total) +
                     " data bytes but the decompressed data holds only " + std::to_string(filled));
    }
  }
  std::uint8_t extra = 0;
  if (src->read(&extra, 1) != 0) {
    fail(name, "the decompressed data is longer than the " + std::to_string(total) +
                   " data bytes the header (" + shape + ") describes (trailing garbage)");
  }
  return out;
}

IdxArray read_idx_file(const std::string& path) {
  namespace fs = std::filesystem;
  constexpr const char* kOpenFix =
      "Check the path; to fetch MNIST run experiments/scripts/get_mnist.py or pass --data DIR / set "
      "MEMSTRAT_DATA";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path, "no such file", kOpenFix);
  if (fs::is_directory(st)) fail(path, "is a directory, not an IDX file", kOpenFix);

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(path, std::string("cannot open: ") + std::strerror(errno), kOpenFix);

  // Read in pieces rather than trusting a size from stat(): works for pipes and special
  // files too, and a file larger than any acceptable array is rejected as soon as the
  // limit is passed. Deflate can expand incompressible data slightly, hence the margin.
  constexpr std::uint64_t kMaxFileBytes = kIdxMaxDataBytes + (kIdxMaxDataBytes >> 10) + 4096;
  std::vector<std::uint8_t> buf;
  std::uint64_t size_hint = 0;
  if (fs::is_regular_file(st)) {
    const std::uintmax_t sz = fs::file_size(path, ec);
    if (!ec) size_hint = sz;
  }
  if (size_hint > kMaxFileBytes) {
    fail(path, "file is " + std::to_string(size_hint) + " bytes, larger than any IDX array (" +
                   std::to_string(kIdxMaxDataBytes) + " bytes) memstrat accepts");
  }
  buf.reserve(static_cast<std::size_t>(size_hint));
  std::uint8_t piece[1 << 16];
  for (;;) {
    const std::size_t k = std::fread(piece, 1, sizeof piece, f.get());
    buf.insert(buf.end(), piece, piece + k);
    if (buf.size() > kMaxFileBytes) {
      fail(path, "file is larger than any IDX array (" + std::to_string(kIdxMaxDataBytes) +
                     " bytes) memstrat accepts");
    }
    if (k < sizeof piece) break;
  }
  if (std::ferror(f.get())) fail(path, std::string("read error: ") + std::strerror(errno));
  return parse_idx(buf.data(), buf.size(), path);
}

}  // namespace memstrat
