#!/usr/bin/env bash
# build.sh [BUILD_DIR] [extra cmake args...]: configure + build memstrat (Release).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$REPO/build}"; shift || true
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
JOBS="$(nproc 2>/dev/null || echo 2)"
cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD" -j"$JOBS"
