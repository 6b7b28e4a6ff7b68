#!/usr/bin/env bash
# install_deps.sh: install what memstrat needs on a fresh Debian/Ubuntu machine that already
# has the CUDA toolkit: build tools and libraries from apt, Python packages (pinned) from pip.
# Idempotent and quiet when everything is already there, the Python packages at their pinned
# versions (experiments/scripts/check_requirements.py compares them). Used by both README
# commands. The PyTorch baselines' packages (experiments/baselines/requirements.txt, torch) are
# not installed here: reproduce.sh checks them before its baselines stage. NCCL (training on
# several GPUs) comes from the wheel pinned in experiments/scripts/requirements-nccl.txt, installed
# here where the CUDA toolkit is 13 (the wheel is built for it); CMake finds it.
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

# Python: analysis and the matrix runner, at the versions analysis/requirements.txt pins (a
# package that imports at another version is reinstalled: numbers and plots depend on it).
REQ="$REPO/analysis/requirements.txt"
check_pins() { python3 "$REPO/experiments/scripts/check_requirements.py" --quiet "$REQ"; }
rc=0
check_pins || rc=$?
[ "$rc" -eq 2 ] && exit 2  # the file itself is wrong; the message says where
if [ "$rc" -ne 0 ]; then
  echo "install_deps: pip install -r analysis/requirements.txt"
  python3 -m pip install -q -r "$REQ" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -r "$REQ"
  check_pins >/dev/null || {
    echo "install_deps: error: after pip install, the pins of analysis/requirements.txt are still not met:" >&2
    check_pins >&2 || true
    exit 1
  }
fi

# NCCL for several GPUs: the pinned wheel, for a CUDA 13 toolkit (nvidia-nccl-cu13).
NCCL_REQ="$REPO/experiments/scripts/requirements-nccl.txt"
cuda_major="$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
if [ "$cuda_major" = "13" ]; then
  rc=0
  python3 "$REPO/experiments/scripts/check_requirements.py" --quiet "$NCCL_REQ" || rc=$?
  [ "$rc" -eq 2 ] && exit 2
  if [ "$rc" -ne 0 ]; then
    echo "install_deps: pip install -r experiments/scripts/requirements-nccl.txt"
    python3 -m pip install -q -r "$NCCL_REQ" 2>/dev/null ||
      python3 -m pip install -q --break-system-packages -r "$NCCL_REQ"
  fi
else
  echo "install_deps: CUDA ${cuda_major:-?} toolkit: NCCL not installed (the pinned wheel is for CUDA 13);"
  echo "  training on several GPUs needs NCCL: pass -DNCCL_ROOT=<NCCL install> to CMake"
fi
