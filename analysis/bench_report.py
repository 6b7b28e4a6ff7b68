#!/usr/bin/env python3
"""Time analysis/report.py on a large synthetic set of run records.

    python3 analysis/bench_report.py                     # 100,000 records
    python3 analysis/bench_report.py --records 20000 --keep /tmp/bench

Clones the committed run records of docs/results/nvidia-h200 (the matrix and the stream
scenario) into one records.jsonl: every clone gets its own run_id, every epoch's timings are
scaled by a seeded random factor (lognormal, 3%), and every second pass over the committed
records runs with another hidden layer size, so the clones spread over 436 configurations,
twice as many as the committed set holds. Then it runs report.py on that folder in a
child process and prints its wall-clock and CPU seconds (CPU time does not depend on what else
the machine runs) and its peak resident memory. Exit status: report.py's (0: report written).
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.aggregate import group_key  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("docs/results/nvidia-h200/records/results.jsonl",
           "docs/results/nvidia-h200/records/stream.jsonl")
TIMINGS = ("wall_ms", "gpu_ms", "host_ms", "copy_ms", "compute_ms", "stall_ms", "idle_ms")
OTHER_HIDDEN = [512]


def templates() -> list[dict]:
    out = []
    for name in SOURCES:
        with open(REPO / name, encoding="utf-8") as fh:
            out += [json.loads(line) for line in fh if line.strip()]
    return [r for r in out if r.get("status") == "ok"]


def write_records(path: Path, count: int, seed: int) -> int:
    """Write `count` cloned records to `path`; returns how many configurations they span."""
    rng = random.Random(seed)
    base = templates()
    configs = set()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(count):
            src = base[i % len(base)]
            rec = dict(src, run_id=f"{src['run_id']}-clone{i:06d}",
                       config=dict(src["config"]))
            if (i // len(base)) % 2:
                rec["config"]["hidden"] = OTHER_HIDDEN
            factor = rng.lognormvariate(0.0, 0.03)
            rec["epochs"] = [{k: (v * factor if k in TIMINGS and v is not None else v)
                              for k, v in ep.items()} for ep in src["epochs"]]
            if i < 2 * len(base):           # later clones repeat these configurations
                configs.add(group_key(rec))
            fh.write(json.dumps(rec) + "\n")
    return len(configs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_report.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000, help="records to generate "
                    "(default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the timing perturbation")
    ap.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it (default: "
                    "a temporary folder, removed afterwards)")
    args = ap.parse_args(argv)
    if args.records < 1:
        ap.error("--records must be at least 1")
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        cells = write_records(folder / "records.jsonl", args.records, args.seed)
        size = (folder / "records.jsonl").stat().st_size
        print(f"generated {args.records} records ({size / 1e6:.0f} MB, {cells} configurations) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, str(REPO / "analysis" / "report.py"),
                              str(folder), "--out", str(folder / "report")])
        seconds = time.perf_counter() - t0
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"report.py on {args.records} records: {seconds:.1f} s wall clock, "
          f"{child.ru_utime + child.ru_stime:.1f} s CPU, peak RSS {child.ru_maxrss / 1024:.0f} "
          f"MiB, exit {res.returncode}")
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
