"""memstrat's multi-GPU primitives beside PyTorch's, from the records of one machine and run:
`memstrat primitives --gpus N --json F` and experiments/baselines/pytorch_multi_gpu_primitives.py
--json F write "multi-gpu-primitive" records that pair by (pattern, GPUs, src, dst) and size.

    python3 analysis/multi_gpu_primitives.py results/primitives_x2.jsonl results/torch_x2.jsonl \\
        --out-md reports/multi_gpu_primitives.md

Per pattern and GPUs (at the largest size both measured): each side's algorithm bandwidth (and,
for the collectives, nccl-tests' bus bandwidth: the same factor on both sides, so the ratio is
the same), memstrat / PyTorch, and whether memstrat reaches TARGET (95%) of PyTorch. Then, where
memstrat measured h2d-alone and h2d-all, each GPU's host->device rate with all GPUs copying at
once as a fraction of its rate alone. Exit 2 for a missing or unreadable file or no pairs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analysis.jsonl import RecordError, read_jsonl  # noqa: E402

TARGET = 0.95
RECORD = "multi-gpu-primitive"


def load(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The ok multi-gpu-primitive records of every file (other records are skipped)."""
    out = []
    for path in paths:
        for source, rec in read_jsonl(path):
            if not isinstance(rec, dict) or rec.get("record") != RECORD:
                continue
            if rec.get("status") != "ok":
                continue
            for key in ("implementation", "config", "results"):
                if key not in rec:
                    raise RecordError(source, f"a {RECORD} record without '{key}'")
            out.append(rec)
    return out


def case_key(rec: dict[str, Any]) -> tuple:
    c = rec["config"]
    return (c["pattern"], c["gpus"], c.get("src"), c.get("dst"))


def label(key: tuple) -> str:
    pattern, gpus, src, dst = key
    if src is not None and dst is not None:
        return f"{pattern} {src}{'<->' if pattern.endswith('-both') else '->'}{dst}"
    if pattern == "h2d-alone":
        return f"{pattern} {dst}"
    return f"{pattern} x{gpus}"


def by_size(rec: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(p["bytes"]): p for p in rec["results"]}


def pairs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per case measured by both: the largest size both have, each side's algbw and
    busbw there, the ratio and whether it reaches TARGET. The latest record of a side wins."""
    sides: dict[tuple, dict[str, dict[str, Any]]] = {}
    for rec in sorted(records, key=lambda r: r.get("started_at", "")):
        sides.setdefault(case_key(rec), {})[rec["implementation"]] = rec
    rows = []
    for key in sorted(sides, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        got = sides[key]
        if "memstrat" not in got or "pytorch" not in got:
            continue
        ours, theirs = by_size(got["memstrat"]), by_size(got["pytorch"])
        common = sorted(set(ours) & set(theirs))
        if not common:
            continue
        size = common[-1]
        a, b = ours[size], theirs[size]
        ratio = a["algbw_gbps"] / b["algbw_gbps"]
        rows.append({"case": label(key), "bytes": size, "memstrat_gbps": a["algbw_gbps"],
                     "pytorch_gbps": b["algbw_gbps"], "memstrat_busbw": a.get("busbw_gbps"),
                     "pytorch_busbw": b.get("busbw_gbps"), "ratio": ratio,
                     "reaches": ratio >= TARGET})
    return rows


def contention(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """memstrat's h2d-all per GPU against h2d-alone of that GPU, at the largest size of both."""
    alone: dict[int, dict[int, dict]] = {}
    together = None
    for rec in sorted(records, key=lambda r: r.get("started_at", "")):
        if rec["implementation"] != "memstrat":
            continue
        if rec["config"]["pattern"] == "h2d-alone":
            alone[rec["config"]["dst"]] = by_size(rec)
        elif rec["config"]["pattern"] == "h2d-all":
            together = rec
    if together is None:
        return []
    rows = []
    for size, point in sorted(by_size(together).items())[-1:]:
        for g, rate in enumerate(point.get("per_gpu_gbps") or []):
            if g in alone and size in alone[g]:
                solo = alone[g][size]["algbw_gbps"]
                rows.append({"gpu": g, "bytes": size, "alone_gbps": solo, "together_gbps": rate,
                             "fraction": rate / solo})
    return rows


def size_text(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def markdown(rows: list[dict[str, Any]], cont: list[dict[str, Any]]) -> str:
    def bw(x):
        return "-" if x is None else f"{x:.1f}"
    lines = [f"| case | size | memstrat GB/s (busbw) | PyTorch GB/s (busbw) | memstrat / PyTorch "
             f"| >= {TARGET:.0%} |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {size_text(r['bytes'])} | {bw(r['memstrat_gbps'])} "
                     f"({bw(r['memstrat_busbw'])}) | {bw(r['pytorch_gbps'])} "
                     f"({bw(r['pytorch_busbw'])}) | {r['ratio']:.3f} | "
                     f"{'yes' if r['reaches'] else 'NO'} |")
    lines.append("")
    lines.append("GB/s = 1e9 bytes/s: the algorithm bandwidth at the largest size both measured "
                 "(nccl-tests' busbw in brackets for the collectives).")
    if cont:
        lines += ["", "| GPU | size | host->device alone, GB/s | with every GPU copying, GB/s "
                      "| together / alone |", "|---|---|---|---|---|"]
        for c in cont:
            lines.append(f"| {c['gpu']} | {size_text(c['bytes'])} | {c['alone_gbps']:.1f} | "
                         f"{c['together_gbps']:.1f} | {c['fraction']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("records", nargs="+", help="JSON Lines files of both implementations")
    ap.add_argument("--out-md", help="also write the tables to this Markdown file")
    a = ap.parse_args(argv)
    try:
        recs = load(a.records)
    except RecordError as e:
        print(f"multi_gpu_primitives.py: {e}", file=sys.stderr)
        return 2
    rows = pairs(recs)
    if not rows:
        print("multi_gpu_primitives.py: no case was measured by both memstrat and PyTorch in "
              f"{', '.join(a.records)}", file=sys.stderr)
        return 2
    text = markdown(rows, contention(recs))
    print(text, end="")
    if a.out_md:
        Path(a.out_md).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out_md).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
