"""The torch-free parts of pytorch_multi_gpu_primitives.py (the PyTorch anchor of `memstrat
primitives --gpus N`): transfer sizes, nccl-tests' bandwidths, the spread of the samples and the
"multi-gpu-primitive" record (one JSON object per pattern and GPU or pair, schema 1)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: analysis/
from analysis.collective_bandwidth import bus_factor  # noqa: E402
from baseline_record import make_run_id, spread  # noqa: E402
from memstrat_inputs import UsageError  # noqa: E402
from nccl_env import format_nccl_version, nccl_settings, nvls_refusal  # noqa: E402,F401

COPIES = ("h2d-alone", "h2d-all", "d2d-ce", "d2d-ce-both")
COLLECTIVES = ("nccl-all-reduce", "nccl-all-gather", "nccl-broadcast")
PATTERNS = COPIES + COLLECTIVES
MIN_BYTES = 16  # memstrat's smallest transfer (its SM copy kernel moves 16-byte vectors)
_SIZE = re.compile(r"(\d{1,15})(b|k|kib|m|mib|g|gib)?", re.IGNORECASE)
_SHIFT = {None: 0, "b": 0, "k": 10, "kib": 10, "m": 20, "mib": 20, "g": 30, "gib": 30}


def parse_size(text: str, option: str = "size") -> int:
    """'4096', '4K', '4KiB', '256M', '1GiB', '512B' (binary units, any case) -> bytes."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise UsageError(f"{option} '{text}' is not a size; write bytes or a number with a "
                         "binary unit, e.g. 4096, 4KiB, 64K, 256MiB, 1GiB")
    return int(m.group(1)) << _SHIFT[m.group(2) and m.group(2).lower()]


def format_size(n: float) -> str:
    unit = 0
    while n >= 1024 and unit < 3:
        n, unit = n / 1024, unit + 1
    return f"{n:.4g} {('B', 'KiB', 'MiB', 'GiB')[unit]}"


def size_sweep(lo: int, hi: int) -> list[int]:
    """The powers of two lo, 2 lo, ..., hi; UsageError naming the option otherwise."""
    for v, opt in ((lo, "--min-size"), (hi, "--max-size")):
        if v < MIN_BYTES:
            raise UsageError(f"{opt} {format_size(v)} is below the smallest transfer, 16 B")
        if v & (v - 1):
            p = 1 << (v.bit_length() - 1)
            raise UsageError(f"{opt} {format_size(v)} is not a power of two; use "
                             f"{format_size(p)} or {format_size(2 * p)}")
    if lo > hi:
        raise UsageError(f"--min-size {format_size(lo)} is larger than --max-size "
                         f"{format_size(hi)}; swap them")
    return [lo << i for i in range((hi // lo).bit_length())]


#: The nccl-tests name (analysis/collective_bandwidth.py) of each collective pattern.
NCCL_TESTS_NAME = {"nccl-all-reduce": "allreduce", "nccl-all-gather": "allgather",
                   "nccl-broadcast": "broadcast"}


def busbw_factor(pattern: str, n: int) -> float | None:
    """nccl-tests' bus bandwidth factor for N ranks (analysis/collective_bandwidth.py); None for
    the copies (no busbw)."""
    name = NCCL_TESTS_NAME.get(pattern)
    return None if name is None else float(bus_factor(name, n))


def collective_count(pattern: str, size: int, n: int) -> tuple[int, int]:
    """(float32 elements each rank sends, the bytes nccl-tests reports) at a swept size: the
    buffer for all-reduce and broadcast; for all-gather the size is the gathered output, each
    rank sending size / (4 N) elements, rounded down (0 below 4 N bytes)."""
    ranks = n if pattern == "nccl-all-gather" else 1
    count = size // 4 // ranks
    return count, count * 4 * ranks


def algbw_gbps(nbytes: float, us: float) -> float:
    return nbytes / us / 1e3


def spread_us(samples: list[float]) -> dict[str, float]:
    """median, p25, p75 (linear interpolation, as memstrat's spread_of), min and max."""
    s = spread(samples)
    return {"median_us": s["median"], "p25_us": s["p25"], "p75_us": s["p75"],
            "min_us": s["min"], "max_us": s["max"]}


def result_entry(nbytes: int, samples_us: list[float], moved: int | None = None,
                 factor: float | None = None, per_gpu_us: list[list[float]] | None = None) -> dict:
    """One size: the samples' spread, algbw = moved bytes (default nbytes) / median, busbw =
    algbw x factor (None: none), per_gpu_gbps = nbytes / the median of each stream's own times."""
    s = spread_us(samples_us)
    alg = algbw_gbps(nbytes if moved is None else moved, s["median_us"])
    per = None if per_gpu_us is None else [algbw_gbps(nbytes, spread(t)["median"])
                                           for t in per_gpu_us]
    return {"bytes": nbytes, **s, "samples_us": [float(x) for x in samples_us],
            "algbw_gbps": alg, "busbw_gbps": None if factor is None else alg * factor,
            "per_gpu_gbps": per}


def summarize(results: list[dict]) -> dict:
    if not results:
        return {"peak_algbw_gbps": None, "peak_busbw_gbps": None, "peak_bytes": None}
    best = max(results, key=lambda r: r["algbw_gbps"])
    bus = [r["busbw_gbps"] for r in results if r["busbw_gbps"] is not None]
    return {"peak_algbw_gbps": best["algbw_gbps"], "peak_busbw_gbps": max(bus) if bus else None,
            "peak_bytes": best["bytes"]}


def make_config(pattern: str, a, src: int | None = None, dst: int | None = None,
                both_ways: bool = False, sizes: list[int] | None = None) -> dict:
    """A record's config; a: the checked options (gpus, sizes, warmup, samples, iters)."""
    coll = pattern in COLLECTIVES
    return {"pattern": pattern, "gpus": a.gpus, "src": src, "dst": dst, "both_ways": both_ways,
            "sizes": list(sizes or a.sizes), "warmup": a.warmup, "samples": a.samples,
            "timed_by": "cuda-events" if not coll and dst is not None and not both_ways
            else "steady-clock",  # events where one stream copies (h2d-alone, d2d one way)
            "in_place": pattern in ("nccl-all-reduce", "nccl-broadcast"),
            "iters": a.iters if coll else None}


def build_record(run: dict, config: dict, results: list[dict], errors: list[str]) -> dict:
    """run: started_at, argv, env (the same in all of a run's records). Each record has its own
    run_id, as each of `memstrat primitives --gpus`'s has: a results set refuses two different
    records under one run_id."""
    return {"schema_version": 1, "record": "multi-gpu-primitive", "implementation": "pytorch",
            "run_id": make_run_id(), "started_at": run["started_at"],
            "status": "failed" if errors else "ok", "error": "; ".join(errors) or None,
            "argv": run["argv"], "env": run["env"], "config": config, "results": results,
            "summary": summarize(results)}
