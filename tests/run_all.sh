#!/usr/bin/env bash
# run_all.sh: the README's test command (and what .ci/run calls). Installs dependencies, builds
# with warnings as errors, runs every GoogleTest (GPU tests skip with a reason when no GPU is
# present), the pytest suite, the CPU tests again under ASan+UBSan, and a short fuzzing smoke run
# of the IDX reader. Prints one closing line "N passed, N failed, N skipped".
# The tests that read MNIST take it from $MEMSTRAT_DATA; when that is not set, MNIST is provided
# in data/mnist (experiments/scripts/get_mnist.py) and those tests skip if that fails.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
bash experiments/scripts/install_deps.sh || exit 1
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
if [ -z "${MEMSTRAT_DATA:-}" ]; then
  python3 experiments/scripts/get_mnist.py --no-fallback --timeout 20 ||
    echo "run_all: no MNIST in data/mnist: the tests that need it skip"
  export MEMSTRAT_DATA="$REPO/data/mnist"
fi
echo "MNIST for the tests: $MEMSTRAT_DATA"
JOBS="$(nproc 2>/dev/null || echo 2)"
passed=0; failed=0; skipped=0; status=0

count_ctest() {  # parse ctest's summary
  local log="$1"
  local total fails skips
  total=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  fails=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' | tail -1)
  skips=$(grep -c '\*\*\*Skipped\|Not Run.*Disabled\| Skipped ' "$log" || true)
  total=${total:-0}; fails=${fails:-0}
  passed=$((passed + total - fails - skips)); failed=$((failed + fails)); skipped=$((skipped + skips))
}

echo "== build (warnings are errors) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEMSTRAT_WERROR=ON >/dev/null &&
  cmake --build build -j"$JOBS" || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

echo "== GoogleTest (cpu + gpu labels) =="
ctest --test-dir build --output-on-failure -j"$JOBS" 2>&1 | tee build/ctest.log
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
count_ctest build/ctest.log

echo "== pytest (analysis/, experiments/) =="
python3 -m pytest -q 2>&1 | tee build/pytest.log
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1
p=$(grep -Eo '[0-9]+ passed' build/pytest.log | tail -1 | grep -Eo '[0-9]+'); passed=$((passed + ${p:-0}))
f=$(grep -Eo '[0-9]+ failed' build/pytest.log | tail -1 | grep -Eo '[0-9]+'); failed=$((failed + ${f:-0}))
s=$(grep -Eo '[0-9]+ skipped' build/pytest.log | tail -1 | grep -Eo '[0-9]+'); skipped=$((skipped + ${s:-0}))

if [ "${MEMSTRAT_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer =="
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMEMSTRAT_SANITIZE=ON >/dev/null &&
    cmake --build build-asan -j"$JOBS" >/dev/null 2>build/asan-build.log || { cat build/asan-build.log; status=1; }
  ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan -L cpu --output-on-failure -j"$JOBS" 2>&1 | tee build/ctest-asan.log
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  count_ctest build/ctest-asan.log

  echo "== fuzzing smoke run of the IDX reader (${MEMSTRAT_FUZZ_SECONDS:-30} s) =="
  if bash tests/fuzz/run_fuzz.sh "${MEMSTRAT_FUZZ_SECONDS:-30}"; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
fi

echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
