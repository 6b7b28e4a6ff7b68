#!/usr/bin/env python3
"""nsys_counts.py: the CUDA API counts of an Nsight Systems report against memstrat's own.

    nsys_counts.py NSYS_CSV OUT_CSV [--compare RECORDS.jsonl]

Reads the `cuda_api_sum` table that `nsys stats --format csv` wrote (NSYS_CSV), writes it as
name,calls with CUPTI's version suffixes stripped the way memstrat's records name functions
(OUT_CSV), prints the watched functions, and with --compare checks them against the last record
of RECORDS.jsonl (a run of the same command without nsys). experiments/scripts/nsys_run calls it.

The two counts cover different windows. nsys counts the whole process; the record's counts
end when the record is made, before the run's objects are destroyed. So the teardown's calls
(TEARDOWN: freeing every buffer, a final device synchronisation) are in nsys's count only: for
those, nsys may count more than the record and the surplus is reported as teardown (a free's
surplus at most the allocations it can free); fewer, or more frees than allocations, is a
difference. Every other function must agree exactly (allocations only, where the record has no
api_totals: the set-up and epoch windows leave out the calls between them).

Exit status: 0 the counts agree, 1 a function differs, 2 bad input (no header in the CSV, no
record, a record without counts).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

WATCHED = ("cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
           "cudaMallocManaged", "cudaMallocAsync", "cudaFreeAsync", "cudaMemcpy",
           "cudaMemcpyAsync", "cudaMemPrefetchAsync", "cudaMemAdvise", "cudaStreamSynchronize",
           "cudaDeviceSynchronize", "cudaLaunchKernel", "__cudaLaunchKernel", "cudaGraphLaunch",
           "cuLaunchKernelEx")
# Allocations happen in set-up, inside the profiler's windows: compared in every record.
ALLOCATIONS = ("cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged",
               "cudaMallocAsync")
# Called after the record is made, while the run's buffers, handles and device are released:
# function -> the allocations it frees (each at most once; None: no bound).
TEARDOWN = {"cudaFree": ("cudaMalloc", "cudaMallocManaged"),
            "cudaFreeHost": ("cudaMallocHost", "cudaHostAlloc"),
            "cudaFreeAsync": ("cudaMallocAsync",),
            "cudaDeviceSynchronize": None}


class UsageError(Exception):
    """Input that cannot be compared; the message says why."""


def normalize(name: str) -> str:
    """Same rule as memstrat::normalize_api_name: strip one trailing _v + 4 or more digits."""
    return re.sub(r"(?<=.)_v[0-9]{4,}$", "", name)


def read_nsys_csv(path: Path) -> dict[str, int]:
    """name -> calls from nsys's cuda_api_sum CSV (names normalised, duplicates summed)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.reader(f))
    # nsys may print a line or two before the header; find the header row.
    head = next((i for i, r in enumerate(rows)
                 if "Name" in r and any("Num Calls" in c for c in r)), None)
    if head is None:
        raise UsageError(f"no 'Num Calls'/'Name' header in {path}")
    cols = rows[head]
    i_name = cols.index("Name")
    i_calls = next(i for i, c in enumerate(cols) if "Num Calls" in c)
    calls: dict[str, int] = {}
    for r in rows[head + 1:]:
        if len(r) <= max(i_name, i_calls) or not r[i_name]:
            continue
        try:
            n = int(float(r[i_calls].replace(",", "")))
        except ValueError:
            continue
        key = normalize(r[i_name])
        calls[key] = calls.get(key, 0) + n
    return calls


def write_calls_csv(calls: dict[str, int], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["name", "calls"])
        for k in sorted(calls, key=lambda k: (-calls[k], k)):
            w.writerow([k, calls[k]])


def record_counts(rec: dict) -> tuple[dict[str, int], bool]:
    """The record's counts and whether they are its whole-run totals (api_totals), else the sum
    of its set-up and epoch windows."""
    if isinstance(rec.get("api_totals"), dict):
        return dict(rec["api_totals"]), True
    parts = [(rec.get("setup") or {}).get("api_calls")] + \
        [e.get("api_calls") for e in rec.get("epochs") or []]
    if any(p is None for p in parts):
        raise UsageError("the record has null api_calls (run it without --no-profile and "
                         "without nsys)")
    total: dict[str, int] = {}
    for p in parts:
        for k, v in p.items():
            total[k] = total.get(k, 0) + v
    return total, False


def last_record(path: Path) -> dict:
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line for line in f if line.strip()]
    if not lines:
        raise UsageError(f"no record in {path}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise UsageError(f"the last line of {path} is not a JSON record: {e}") from None


@dataclass(frozen=True)
class Row:
    name: str
    record: int
    nsys: int
    verdict: str  # "" agree, "teardown" nsys's surplus is the teardown's, "differs"


def compare(record: dict[str, int], nsys: dict[str, int], totals: bool) -> list[Row]:
    """One row per compared function: every watched one where the record has api_totals,
    the allocations otherwise."""
    names = list(ALLOCATIONS) + ([k for k in WATCHED if k not in ALLOCATIONS] if totals else [])
    rows = []
    for k in names:
        b, n = record.get(k, 0), nsys.get(k, 0)
        rows.append(Row(k, b, n, "" if b == n else
                        "teardown" if totals and _teardown_surplus(k, n - b, nsys) else
                        "differs"))
    return rows


def _teardown_surplus(name: str, surplus: int, nsys: dict[str, int]) -> bool:
    """Whether nsys counting `surplus` more calls of `name` than the record is the teardown."""
    if name not in TEARDOWN or surplus <= 0:
        return False
    frees = TEARDOWN[name]
    return frees is None or surplus <= sum(nsys.get(a, 0) for a in frees)


def report(rows: Sequence[Row], rec: dict, totals: bool) -> str:
    lines = [f"built-in ({'api_totals' if totals else 'setup + epochs'}) vs nsys, run "
             f"{rec.get('run_id', '?')}:"]
    for r in rows:
        note = {"": "", "differs": "   <-- differs",
                "teardown": f"   (+{r.nsys - r.record} after the record: teardown)"}[r.verdict]
        lines.append(f"  {r.name:<26}{r.record:>12}{r.nsys:>12}{note}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nsys_csv", type=Path, help="nsys stats' cuda_api_sum CSV")
    ap.add_argument("out_csv", type=Path, help="where to write name,calls")
    ap.add_argument("--compare", type=Path, metavar="RECORDS.jsonl",
                    help="compare with the last record of this file")
    a = ap.parse_args(argv)
    try:
        calls = read_nsys_csv(a.nsys_csv)
        write_calls_csv(calls, a.out_csv)
        print(f"CUDA API calls recorded by nsys (whole process; full table: {a.nsys_csv}, "
              f"normalised: {a.out_csv})")
        for k in WATCHED:
            print(f"  {k:<26}{calls.get(k, 0):>12}")
        print(f"  {'(all functions)':<26}{sum(calls.values()):>12}")
        if a.compare is None:
            return 0
        rec = last_record(a.compare)
        counts, totals = record_counts(rec)
    except (UsageError, OSError) as e:
        print(f"nsys_counts: {e}", file=sys.stderr)
        return 2
    rows = compare(counts, calls, totals)
    print(report(rows, rec, totals))
    bad = [r.name for r in rows if r.verdict == "differs"]
    if bad:
        print(f"nsys_counts: {len(bad)} function(s) differ between the built-in count and "
              f"nsys: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
