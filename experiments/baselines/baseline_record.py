"""The pieces of the baseline's run record (docs/schema/run_record.schema.json) that are the same
as memstrat's: run id and time, the steady-state summary (memstrat's quartiles), the atomic
JSON Lines append, and the environment block in memstrat's keys (null where torch cannot say)."""
from __future__ import annotations

import ctypes
import datetime as _dt
import json
import os
import platform
import re
import secrets
import socket
import subprocess
from pathlib import Path
from typing import Any, Sequence

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]



def iso_utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + \
        "-" + secrets.token_hex(4)


def spread(values: Sequence[float]) -> dict[str, float]:
    """min/max/median/p25/p75 with linear interpolation (memstrat's spread_of)."""
    v = sorted(values)
    if not v:
        return {"min": 0.0, "max": 0.0, "median": 0.0, "p25": 0.0, "p75": 0.0}

    def q(f: float) -> float:
        pos = f * (len(v) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (pos - lo) * (v[hi] - v[lo])
    return {"min": v[0], "max": v[-1], "median": q(0.5), "p25": q(0.25), "p75": q(0.75)}


def summary_json(epochs: list[dict], n_train: int) -> dict[str, Any]:
    steady = epochs[1:] if len(epochs) > 1 else epochs
    w = spread([e["wall_ms"] for e in steady])
    g = spread([e["gpu_ms"] for e in steady])
    sps = n_train / (w["median"] / 1000.0) if w["median"] > 0 else 0.0
    return {"steady_epochs": len(steady), "wall_ms_median": w["median"],
            "wall_ms_min": w["min"], "wall_ms_max": w["max"], "wall_ms_p25": w["p25"],
            "wall_ms_p75": w["p75"], "gpu_ms_median": g["median"],
            "epoch1_wall_ms": epochs[0]["wall_ms"], "samples_per_s": sps}


def append_jsonl(path: str, record: dict) -> None:
    """One write of one whole line, then fsync (as memstrat's append_jsonl)."""
    line = (json.dumps(record, allow_nan=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        n = os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if n != len(line):
        raise OSError(f"short write to results file '{path}'")


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_revision() -> tuple[str, bool]:
    """(commit, dirty) for the records, as the memstrat build takes them (CMakeLists.txt):
    MEMSTRAT_GIT_SHA [MEMSTRAT_GIT_DIRTY=0|1] in the environment win over the checkout's git
    metadata, which a copy of the tree on another machine may lack or hold for another commit;
    so the PyTorch records of a benchmark name the same commit as the memstrat binary beside them."""
    sha = os.environ.get("MEMSTRAT_GIT_SHA")
    if sha:
        return sha, os.environ.get("MEMSTRAT_GIT_DIRTY", "0") not in ("", "0")
    sha = _git("rev-parse", "--short=12", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return sha or "unknown", bool(status) if status is not None else False


BOOT_ID = "/proc/sys/kernel/random/boot_id"


def gpu_uuid(uuid) -> str | None:
    """torch's device UUID (a uuid.UUID-like object or its string) in nvidia-smi's form,
    "GPU-xxxxxxxx-...", as memstrat records it; None when the framework gives none."""
    if uuid is None:
        return None
    text = str(uuid).strip().lower()
    return "GPU-" + (text[4:] if text.startswith("gpu-") else text)


def _first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def _pcie(env: dict, bus_id: str | None) -> None:
    env["pcie_gen"] = env["pcie_width"] = None
    if not bus_id:
        return
    base = f"/sys/bus/pci/devices/{bus_id.lower()}/"
    speed = _first_line(base + "current_link_speed")
    width = _first_line(base + "current_link_width")
    try:
        gts = float(speed.split()[0]) if speed else 0.0
    except ValueError:
        gts = 0.0
    for gen, floor in ((6, 60), (5, 30), (4, 15), (3, 7.5), (2, 4.5), (1, 1e-9)):
        if gts >= floor:
            env["pcie_gen"] = gen
            break
    if width.isdigit() and int(width) > 0:
        env["pcie_width"] = int(width)


def _driver_version() -> str | None:
    """cuDriverGetVersion from libcuda (torch does not expose it), as memstrat: "13.0"."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) != 0 or v.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{v.value // 1000}.{(v.value % 1000) // 10}"


def _host() -> dict[str, Any]:
    """The host keys memstrat records: CPU model, online CPUs, this process's affinity, memory."""
    model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    ranges, start = [], None
    for i, c in enumerate(cpus):  # [0,1,2,3,8] -> "0-3,8", as memstrat writes it
        start = c if start is None else start
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            ranges.append(str(c) if start == c else f"{start}-{c}")
            start = None
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = None
    return {"cpu_model": model, "cpu_count": os.cpu_count(),
            "cpu_affinity": ",".join(ranges) or None, "cpu_affinity_count": len(cpus) or None,
            "host_memory_bytes": mem}


def driver_release(nv_version_line: str) -> str | None:
    """The kernel module's release, e.g. "580.159.04", from /proc/driver/nvidia/version's first
    line ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build
    ..."): the first dotted version number, as memstrat reads it (common/run_record.cpp)."""
    m = re.search(r"\b(\d{2,4}\.\d{1,4}(\.\d{1,4})?)\b", nv_version_line)
    return m.group(1) if m else None


FRAMEWORK_NAMES = {"pytorch": "PyTorch", "jax": "JAX"}


def common_environment(framework: str, device: str) -> dict[str, Any]:
    """The environment keys every baseline writes, the device's null until the framework's
    own function fills them."""
    sha, dirty = git_revision()
    env: dict[str, Any] = {
        "host": socket.gethostname(), "boot_id": _first_line(BOOT_ID) or None,
        "git_sha": sha, "git_dirty": dirty, "memstrat_version": None,
        "framework": framework,
        "python_version": platform.python_version(), "numpy_version": np.__version__,
        "device_type": device,
        # memstrat's device keys; those the framework does not expose stay null.
        "gpu_name": None, "gpu_uuid": None, "compute_capability": None, "sm_count": None,
        "gpu_memory_bytes": None, "driver_version": None, "runtime_version": None,
        "driver_release": None, "pcie_gen": None, "pcie_width": None,
        "concurrent_managed_access": None, "pageable_memory_access": None,
        "async_engine_count": None, "l2_bytes": None,
        # memstrat reads these from NVML and sysfs; the baseline does not (null, and says so)
        "pcie_max_gen": None, "pcie_max_width": None, "gpu_numa_node": None,
        "persistence_mode": None, "sm_clock_max_mhz": None, "mem_clock_max_mhz": None,
        "sm_clock_mhz": None, "mem_clock_mhz": None, "clock_event_reasons": None,
        "temperature_c": None, "power_w": None,
        "nvml_note": f"not read by the {FRAMEWORK_NAMES.get(framework, framework)} baseline",
        **_host(),
    }
    if device != "cuda":
        env["cpu"] = platform.processor() or platform.machine() or None
    return env


def environment_json(torch, device: str) -> dict[str, Any]:
    env = common_environment("pytorch", device)
    env["torch_version"] = torch.__version__
    if device != "cuda":
        return env
    idx = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(idx)
    env["gpu_name"] = props.name
    env["gpu_uuid"] = gpu_uuid(getattr(props, "uuid", None))
    env["compute_capability"] = f"{props.major}.{props.minor}"
    env["sm_count"] = props.multi_processor_count
    env["gpu_memory_bytes"] = props.total_memory
    env["l2_bytes"] = getattr(props, "L2_cache_size", None)
    env["driver_version"] = _driver_version()
    env["runtime_version"] = torch.version.cuda
    env["driver_release"] = driver_release(_first_line("/proc/driver/nvidia/version"))
    bus = None
    try:
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        pass
    _pcie(env, bus)
    return env
