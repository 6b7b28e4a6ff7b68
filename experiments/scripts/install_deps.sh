#!/usr/bin/env bash
# install_deps.sh: install what memstrat needs on a fresh Debian/Ubuntu machine that already
# has the CUDA toolkit: build tools and libraries from apt, Python packages (pinned) from pip.
# Idempotent and quiet when everything is already there. Used by both README commands.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

need_apt=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v make >/dev/null || need_apt+=(make)
command -v git >/dev/null || need_apt+=(git)
command -v python3 >/dev/null || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
[ -f /usr/include/CLI/CLI.hpp ] || need_apt+=(libcli11-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need_apt+=(nlohmann-json3-dev)
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
{ [ -f /usr/include/gtest/gtest.h ] && { have_pkg libgtest-dev || ls /usr/lib/*/libgtest* >/dev/null 2>&1; }; } || need_apt+=(libgtest-dev)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  else
    echo "install_deps: error: the CUDA toolkit (nvcc) is not installed. Install CUDA 12.4+ from" >&2
    echo "  your distribution or NVIDIA (https://developer.nvidia.com/cuda-downloads) and rerun." >&2
    exit 1
  fi
fi

# Python: analysis and the matrix runner. Pinned versions; skip pip when they already import.
if ! python3 -c "import matplotlib, numpy, pytest, jsonschema" >/dev/null 2>&1; then
  echo "install_deps: pip install -r analysis/requirements.txt"
  python3 -m pip install -q -r "$REPO/analysis/requirements.txt" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -r "$REPO/analysis/requirements.txt"
fi
