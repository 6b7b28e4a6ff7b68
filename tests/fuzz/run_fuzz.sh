#!/usr/bin/env bash
# run_fuzz.sh: builds the libFuzzer target fuzz_idx (parse_idx under ASan + UBSan) and
# fuzzes it for N seconds on a working copy of tests/fuzz/corpus.
#
#   tests/fuzz/run_fuzz.sh [seconds]     default 60
#
# Build dir: build-fuzz/ in the repo root (override with MEMSTRAT_FUZZ_BUILD). The working
# corpus (build-fuzz/corpus) grows across runs; the committed seeds are never modified.
# Crash/leak/timeout inputs go to build-fuzz/artifacts/. Exit status is non-zero when the
# fuzzer found anything or could not be built.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: $0 [seconds]   (a positive whole number, default 60)" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${MEMSTRAT_FUZZ_BUILD:-$root/build-fuzz}"
mkdir -p "$build"

# --- toolchain: clang with the libFuzzer runtime ------------------------------------------
have_libfuzzer() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local probe="$build/probe"
  mkdir -p "$probe"
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' \
    >"$probe/probe.cpp"
  clang++ -fsanitize=fuzzer "$probe/probe.cpp" -o "$probe/probe" >/dev/null 2>&1
}
if ! have_libfuzzer; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "run_fuzz: installing clang and the libFuzzer runtime (apt-get)"
    apt-get install -y clang libclang-rt-14-dev ||
      { apt-get update && apt-get install -y clang libclang-rt-14-dev; }
  fi
  if ! have_libfuzzer; then
    echo "run_fuzz: error: clang++ with libFuzzer (-fsanitize=fuzzer) is not available." >&2
    echo "run_fuzz: install it with: sudo apt-get install clang libclang-rt-14-dev" >&2
    exit 2
  fi
fi

# --- build ---------------------------------------------------------------------------------
# Preferred: the project's own MEMSTRAT_FUZZ target. CUDA is a project language, so that
# needs nvcc at configure time; when configuring fails (no CUDA, a package missing, another
# folder mid-edit) compile the two files directly, which needs nothing but clang and zlib.
bin=""
if PATH="$PATH:/usr/local/cuda/bin" cmake -S "$root" -B "$build/cmake" \
      -DCMAKE_CXX_COMPILER=clang++ -DMEMSTRAT_FUZZ=ON -DMEMSTRAT_BUILD_TESTS=OFF \
      -DMEMSTRAT_CUDA_ARCH=90 >"$build/cmake.log" 2>&1 &&
   cmake --build "$build/cmake" --target fuzz_idx >>"$build/cmake.log" 2>&1; then
  bin="$build/cmake/fuzz_idx"
  echo "run_fuzz: built $bin with CMake (MEMSTRAT_FUZZ=ON)"
else
  echo "run_fuzz: CMake build failed (see $build/cmake.log); compiling fuzz_idx directly"
  clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer \
    -Wall -Wextra -I"$root" "$root/common/idx.cpp" "$root/tests/fuzz/fuzz_idx.cpp" -lz \
    -o "$build/fuzz_idx"
  bin="$build/fuzz_idx"
  echo "run_fuzz: built $bin with clang++"
fi

# --- run -----------------------------------------------------------------------------------
corpus="$build/corpus"
artifacts="$build/artifacts"
mkdir -p "$corpus" "$artifacts"
cp -n "$root"/tests/fuzz/corpus/* "$corpus"/ 2>/dev/null || true

# Tokens the mutator cannot easily guess: IDX magics and the gzip header.
dict="$build/idx.dict"
cat >"$dict" <<'EOF'
idx_u8_1d="\x00\x00\x08\x01"
idx_u8_3d="\x00\x00\x08\x03"
idx_f32="\x00\x00\x0D\x02"
gzip_magic="\x1f\x8b\x08\x00"
dim_28="\x00\x00\x00\x1c"
dim_60000="\x00\x00\xea\x60"
dim_2pow31="\x80\x00\x00\x00"
dim_max="\xff\xff\xff\xff"
EOF

before="$(find "$artifacts" -type f | wc -l)"
echo "run_fuzz: fuzzing for ${seconds}s; corpus $corpus ($(find "$corpus" -type f | wc -l) files)"
set +e
"$bin" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -dict="$dict" -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" \
  >"$build/fuzz.log" 2>&1
rc=$?
set -e
after="$(find "$artifacts" -type f | wc -l)"

execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz.log" | grep -o '[0-9]*$' || true)"
peak="$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$build/fuzz.log" | grep -o '[0-9]*$' || true)"
tail -n 15 "$build/fuzz.log"
echo "run_fuzz: ${seconds}s, executions: ${execs:-?}, corpus: $(find "$corpus" -type f | wc -l) files," \
  "peak RSS: ${peak:-?} MB, new artifacts: $((after - before)), libFuzzer exit: $rc"
echo "run_fuzz: full log $build/fuzz.log"
if [[ $rc -ne 0 || $after -ne $before ]]; then
  echo "run_fuzz: FAILED: see $artifacts/ (reproduce: $bin <artifact>)" >&2
  exit 1
fi
echo "run_fuzz: no crashes"
