// fuzz_idx.cpp: libFuzzer target for parse_idx (raw and gzip IDX input). Any exception
// other than DataError, any sanitizer report, any accepted result that breaks parse_idx's
// promises (shape matches the data, only unsigned bytes, size within the cap), and any
// difference between parsing raw bytes and parsing the same bytes gzip-compressed is a bug.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "common/idx.h"

namespace {

std::optional<memstrat::IdxArray> parse_or_reject(const std::uint8_t* data, std::size_t size) {
  try {
    memstrat::IdxArray a = memstrat::parse_idx(data, size, "fuzz-input");
    // A bad accepted array would propagate silently into training: check the contract.
    if (a.type_code != 0x08 || a.dims.empty() || a.dims.size() > 4 || a.count() != a.data.size() ||
        a.data.size() > memstrat::kIdxMaxDataBytes) {
      std::abort();
    }
    for (std::uint32_t d : a.dims) {
      if (d == 0) std::abort();
    }
    return a;
  } catch (const memstrat::DataError&) {
    return std::nullopt;  // rejecting malformed input is the expected outcome
  }
}

// One gzip member of the input. Mutations of the raw bytes then reach the decompressing
// path as *valid* gzip streams (the fuzzer cannot see inside zlib, which is not
// instrumented, so it rarely produces a valid stream by itself).
std::vector<std::uint8_t> gzip(const std::uint8_t* data, std::size_t size) {
  z_stream zs{};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::vector<std::uint8_t> out(deflateBound(&zs, size) + 32);
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::optional<memstrat::IdxArray> raw = parse_or_reject(data, size);
  const bool is_gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (!is_gzip && size > 0) {
    // Differential check: compression must not change the verdict or the result.
    const std::vector<std::uint8_t> gz = gzip(data, size);
    const std::optional<memstrat::IdxArray> dec = parse_or_reject(gz.data(), gz.size());
    if (raw.has_value() != dec.has_value()) std::abort();
    if (raw && (raw->dims != dec->dims || raw->data != dec->data)) std::abort();
  }
  return 0;
}
