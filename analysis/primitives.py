#!/usr/bin/env python3
"""Transfer-primitive records (``memstrat primitives --json``) -> CSV, knees and a plot.

    analysis/primitives.py results/primitives.jsonl --out reports/primitives

Writes into OUT: ``primitives.csv`` (one row per primitive and size), ``primitives_summary.csv``
(per primitive: peak GB/s, the 50% / 90% knees, 4 KiB latency, fixed cost, or why it was
waived/failed) and ``primitives.png`` (bandwidth and latency against size, log-log, one line
per primitive, with the PCIe link's raw rate when the records know the link). With records
from several GPUs, one PNG per GPU (``primitives_<gpu>.png``).

For a cost model::

    from analysis.primitives import PrimitiveTable
    t = PrimitiveTable.load("results/primitives.jsonl")
    t.time_us_at("pinned-h2d", 47_040_000)    # µs, interpolated in log-log between sizes
    t.bandwidth_at("pinned-h2d", 1 << 20)     # GB/s at that size
    t.fixed_cost_us("pinned-h2d")             # what a transfer costs beyond its bytes

Record format: docs/methodology.md, "Transfer primitives". Primitive records are their own
kind (``"record": "primitive"``); keep them in their own file, apart from run records.
"""
from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.records import (RecordError, drop_duplicates, json_type,  # noqa: E402
                              read_jsonl)

PRIMITIVE_SCHEMA_VERSION = 1
RECORD_KIND = "primitive"
STATUSES = ("ok", "failed", "waived")
LATENCY_BYTES = 4096

# PCIe: per-lane transfer rate (GT/s) and line-code efficiency by generation.
_PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def pcie_raw_gbps(gen: int | None, width: int | None) -> float | None:
    """Raw link rate in GB/s (1e9 B/s) of a PCIe link: GT/s per lane x encoding x width / 8.

    8b/10b for gen 1-2, 128b/130b for gen 3 and later. Before packet and protocol overhead,
    so no transfer reaches it. None when the generation or width is unknown.
    """
    if gen not in _PCIE_GTS or not width:
        return None
    encoding = 8 / 10 if gen <= 2 else 128 / 130
    return _PCIE_GTS[gen] * encoding * width / 8


# ---- loading and validation -------------------------------------------------------------------

def _field(obj: dict, key: str, want: str, where: str, source: str,
           nullable: bool = False) -> Any:
    """obj[key] checked against want ("string", "integer", "number", "object", "array")."""
    if key not in obj:
        raise RecordError(source, f"missing required field '{where}{key}'")
    value = obj[key]
    if value is None and nullable:
        return None
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool)
        and math.isfinite(value),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[want]
    if not ok:
        raise RecordError(source, f"field '{where}{key}' is {json_type(value)} {value!r:.60}; "
                                  f"expected {'a finite number' if want == 'number' else want}")
    return value


_POINT_NUMBERS = ("median_us", "p25_us", "p75_us", "min_us", "max_us", "gbps")


def validate_primitive_record(rec: Any, source: str) -> dict[str, Any]:
    """Check one decoded record; returns it with ``_source`` ("file:line") added."""
    if not isinstance(rec, dict):
        raise RecordError(source, f"a record must be a JSON object, got {json_type(rec)}")
    if rec.get("record") != RECORD_KIND:
        raise RecordError(source, f"not a primitive record (\"record\" is {rec.get('record')!r}, "
                                  f"expected \"{RECORD_KIND}\"); `memstrat primitives --json` "
                                  "writes them; run records go to analysis/report.py")
    version = _field(rec, "schema_version", "integer", "", source)
    if version != PRIMITIVE_SCHEMA_VERSION:
        raise RecordError(source, f"schema_version {version} is not supported: this analysis "
                                  f"reads primitive records of schema_version "
                                  f"{PRIMITIVE_SCHEMA_VERSION} only")
    status = _field(rec, "status", "string", "", source)
    if status not in STATUSES:
        raise RecordError(source, f"field 'status' must be one of {', '.join(STATUSES)}, "
                                  f"got {status!r}")
    for key in ("run_id", "started_at"):
        _field(rec, key, "string", "", source)
    _field(_field(rec, "config", "object", "", source), "primitive", "string", "config.", source)
    prim = _field(rec, "primitive", "object", "", source)
    for key in ("name", "timed_by", "direction"):
        _field(prim, key, "string", "primitive.", source)
    if prim["name"] != rec["config"]["primitive"]:
        raise RecordError(source, f"primitive.name {prim['name']!r} differs from "
                                  f"config.primitive {rec['config']['primitive']!r}")
    env = _field(rec, "env", "object", "", source)
    for key in ("pcie_gen", "pcie_width"):
        if key in env:
            _field(env, key, "integer", "env.", source, nullable=True)
    results = _field(rec, "results", "array", "", source)
    if status == "waived":
        _field(rec, "waived_reason", "string", "", source)
    elif status == "failed":
        _field(rec, "error", "string", "", source)
    elif not results:
        raise RecordError(source, "field 'results' is empty in a record with status ok")
    previous = 0
    for i, point in enumerate(results):
        where = f"results[{i}]."
        if not isinstance(point, dict):
            raise RecordError(source, f"results[{i}] must be an object, got {json_type(point)}")
        size = _field(point, "bytes", "integer", where, source)
        if size <= previous:
            raise RecordError(source, f"results must be in increasing size: results[{i}].bytes "
                                      f"{size} after {previous}")
        previous = size
        for key in _POINT_NUMBERS:
            if _field(point, key, "number", where, source) < 0:
                raise RecordError(source, f"field '{where}{key}' is negative")
        if point["median_us"] <= 0:
            raise RecordError(source, f"field '{where}median_us' must be > 0")
    rec["_source"] = source
    return rec


def load_primitive_records(inputs: Iterable[str | Path] | str | Path) -> list[dict[str, Any]]:
    """Every primitive record of the given .jsonl files, validated (any status), each run once
    (records.drop_duplicates)."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    return drop_duplicates([validate_primitive_record(rec, source)
                            for path in inputs
                            for source, rec in read_jsonl(
                                path, "no such file (pass the .jsonl file that "
                                      "`memstrat primitives --json` wrote)")])


# ---- curves and what they say ---------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    bytes: int
    median_us: float
    p25_us: float
    p75_us: float
    min_us: float
    max_us: float
    gbps: float
    samples: int


@dataclass
class Curve:
    """One primitive on one GPU: the latest ok record (or why there is none)."""
    primitive: str
    gpu: str
    status: str
    timed_by: str
    direction: str
    points: list[Point] = field(default_factory=list)
    reason: str = ""          # waived_reason or error
    env: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    started_at: str = ""


def _curve(rec: dict[str, Any]) -> Curve:
    prim = rec["primitive"]
    points = [Point(p["bytes"], p["median_us"], p["p25_us"], p["p75_us"], p["min_us"],
                    p["max_us"], p["gbps"], len(p.get("samples_us") or []))
              for p in rec["results"]]
    return Curve(prim["name"], str(rec["env"].get("gpu_name") or "unknown GPU"), rec["status"],
                 prim["timed_by"], prim["direction"], points,
                 rec.get("waived_reason") or rec.get("error") or "", rec["env"],
                 rec["run_id"], rec["started_at"])


def latest_curves(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], Curve]:
    """(gpu, primitive) -> Curve from the latest record; an ok record beats a newer failed one."""
    best: dict[tuple[str, str], Curve] = {}
    for rec in records:
        c = _curve(rec)
        key = (c.gpu, c.primitive)
        old = best.get(key)
        if old is None or ((c.status == "ok", c.started_at) >= (old.status == "ok", old.started_at)):
            best[key] = c
    return best


def knee_bytes(sizes: Sequence[float], gbps: Sequence[float], fraction: float) -> float:
    """First size at which gbps reaches fraction x its maximum, interpolated in log2(size).

    Scans up from the smallest size; between the last point below the level and the first at
    or above it, log2(size) is interpolated linearly in bandwidth. The smallest size when it
    already reaches the level. Same definition as experiments/primitives/knees.cpp.
    """
    if not sizes or len(sizes) != len(gbps):
        raise ValueError("knee_bytes: sizes and bandwidths must be non-empty and match")
    level = fraction * max(gbps)
    if gbps[0] >= level:
        return float(sizes[0])
    for i in range(1, len(sizes)):
        if gbps[i] < level:
            continue
        x0, x1 = math.log2(sizes[i - 1]), math.log2(sizes[i])
        t = (level - gbps[i - 1]) / (gbps[i] - gbps[i - 1])
        return 2.0 ** (x0 + t * (x1 - x0))
    return float(sizes[-1])


def _ok_points(c: Curve) -> list[Point]:
    if c.status != "ok" or not c.points:
        raise ValueError(f"{c.primitive} on {c.gpu} has no measurements "
                         f"({c.status}{': ' + c.reason if c.reason else ''})")
    return c.points


def peak(c: Curve) -> tuple[float, int]:
    """(peak GB/s, size where it is reached)."""
    p = max(_ok_points(c), key=lambda q: q.gbps)
    return p.gbps, p.bytes


def knee(c: Curve, fraction: float) -> float:
    pts = _ok_points(c)
    return knee_bytes([p.bytes for p in pts], [p.gbps for p in pts], fraction)


def latency_us(c: Curve, size: int = LATENCY_BYTES) -> float | None:
    """Median time at exactly `size` bytes, None when that size was not measured."""
    return next((p.median_us for p in _ok_points(c) if p.bytes == size), None)


def time_us_at(c: Curve, size: float) -> float:
    """Time of one transfer of `size` bytes, from the medians.

    Between measured sizes: log(time) linear in log(size). Below the smallest size: the time
    at the smallest (a transfer that small is latency). Above the largest: its time plus the
    extra bytes at the largest size's bandwidth.
    """
    pts = _ok_points(c)
    if size <= pts[0].bytes:
        return pts[0].median_us
    last = pts[-1]
    if size >= last.bytes:
        return last.median_us + (size - last.bytes) / (last.gbps * 1e3)
    for a, b in zip(pts, pts[1:]):
        if a.bytes <= size <= b.bytes:
            t = math.log(size / a.bytes) / math.log(b.bytes / a.bytes)
            return math.exp(math.log(a.median_us) + t * math.log(b.median_us / a.median_us))
    raise AssertionError("unreachable: sizes are increasing")


def bandwidth_at(c: Curve, size: float) -> float:
    """GB/s (1e9 B/s) of one transfer of `size` bytes (time_us_at)."""
    return size / (time_us_at(c, size) * 1e3)


def fixed_cost_us(c: Curve) -> float:
    """What a transfer costs beyond moving its bytes at peak bandwidth: the smallest size's
    median time minus that size at the peak rate (never below 0)."""
    first = _ok_points(c)[0]
    return max(0.0, first.median_us - first.bytes / (peak(c)[0] * 1e3))


class PrimitiveTable:
    """The primitives of ONE GPU by name, for a cost model."""

    def __init__(self, curves: dict[str, Curve]):
        self.curves = curves

    @classmethod
    def load(cls, inputs: Iterable[str | Path] | str | Path,
             gpu: str | None = None) -> "PrimitiveTable":
        tables = cls.load_all(inputs)
        if gpu is None:
            if len(tables) > 1:
                raise ValueError(f"records from several GPUs ({', '.join(tables)}); pass gpu=")
            gpu = next(iter(tables), "")
        return tables.get(gpu, cls({}))

    @classmethod
    def load_all(cls, inputs: Iterable[str | Path] | str | Path) -> dict[str, "PrimitiveTable"]:
        """One table per GPU named in the records (env.gpu_name), sorted by name; a
        RecordError when the files hold no primitive record."""
        if isinstance(inputs, (str, Path)):
            inputs = [inputs]
        inputs = list(inputs)
        tables = cls.by_gpu(load_primitive_records(inputs))
        if not tables:
            raise RecordError(", ".join(map(str, inputs)), "no primitive records (empty file?)")
        return tables

    @classmethod
    def by_gpu(cls, records: Iterable[dict[str, Any]]) -> dict[str, "PrimitiveTable"]:
        """One table per GPU of already loaded primitive records (each primitive's latest
        curve), sorted by GPU name; empty without records."""
        tables: dict[str, dict[str, Curve]] = {}
        for (gpu, prim), c in sorted(latest_curves(records).items()):
            tables.setdefault(gpu, {})[prim] = c
        return {gpu: cls(curves) for gpu, curves in tables.items()}

    def curve(self, primitive: str) -> Curve:
        if primitive not in self.curves:
            raise KeyError(f"no record for primitive {primitive!r}; have: "
                           f"{', '.join(sorted(self.curves)) or 'none'}")
        return self.curves[primitive]

    def time_us_at(self, primitive: str, size: float) -> float:
        return time_us_at(self.curve(primitive), size)

    def bandwidth_at(self, primitive: str, size: float) -> float:
        return bandwidth_at(self.curve(primitive), size)

    def fixed_cost_us(self, primitive: str) -> float:
        return fixed_cost_us(self.curve(primitive))

    def peak_gbps(self, primitive: str) -> float:
        return peak(self.curve(primitive))[0]


def summary_row(c: Curve) -> dict[str, Any]:
    row: dict[str, Any] = {"gpu_name": c.gpu, "primitive": c.primitive, "status": c.status,
                           "timed_by": c.timed_by, "direction": c.direction,
                           "peak_gbps": None, "peak_bytes": None, "knee50_bytes": None,
                           "knee90_bytes": None, "latency_4k_us": None, "fixed_cost_us": None,
                           "reason": c.reason, "run_id": c.run_id}
    if c.status == "ok" and c.points:
        row["peak_gbps"], row["peak_bytes"] = peak(c)
        row["knee50_bytes"], row["knee90_bytes"] = knee(c, 0.5), knee(c, 0.9)
        row["latency_4k_us"] = latency_us(c)
        row["fixed_cost_us"] = fixed_cost_us(c)
    return row


# ---- outputs ---------------------------------------------------------------------------------

POINT_COLUMNS = ("gpu_name", "primitive", "timed_by", "direction", "bytes", "median_us",
                 "p25_us", "p75_us", "min_us", "max_us", "gbps", "samples", "run_id")
SUMMARY_COLUMNS = ("gpu_name", "primitive", "status", "timed_by", "direction", "peak_gbps",
                   "peak_bytes", "knee50_bytes", "knee90_bytes", "latency_4k_us",
                   "fixed_cost_us", "reason", "run_id")


def write_csvs(curves: Iterable[Curve], out: Path) -> tuple[Path, Path]:
    curves = list(curves)
    points_path, summary_path = out / "primitives.csv", out / "primitives_summary.csv"
    with open(points_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(POINT_COLUMNS)
        for c in curves:
            for p in c.points if c.status == "ok" else []:
                w.writerow([c.gpu, c.primitive, c.timed_by, c.direction, p.bytes, p.median_us,
                            p.p25_us, p.p75_us, p.min_us, p.max_us, p.gbps, p.samples, c.run_id])
    with open(summary_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, SUMMARY_COLUMNS)
        w.writeheader()
        for c in curves:
            w.writerow({k: ("" if v is None else v) for k, v in summary_row(c).items()})
    return points_path, summary_path


def size_label(x: float, _pos: Any = None) -> str:
    """Bytes in binary units, 3 digits: 4K, 1.5M, 256M (also a matplotlib tick formatter)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def size_text(nbytes: float) -> str:
    """Bytes with their binary unit, for tables: '4 KiB', '1.21 MiB', '512 B'."""
    label = size_label(nbytes)
    return f"{label[:-1]} {label[-1]}iB" if label[-1] in "KMG" else f"{label} B"


def plot_primitives(curves: Sequence[Curve], path: Path) -> Path | None:
    """Bandwidth and latency vs size (log-log) of one GPU's primitives; None if nothing to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    measured = [c for c in curves if c.status == "ok" and c.points]
    if not measured:
        return None
    from analysis.plot_style import PALETTE, save
    fig, (ax_bw, ax_lat) = plt.subplots(1, 2, figsize=(14, 5.6))
    colors = PALETTE
    for i, c in enumerate(measured):
        sizes = [p.bytes for p in c.points]
        style = dict(color=colors[i % len(colors)], marker="os^vD<>ph"[i % 9], markersize=4,
                     linestyle="-" if c.timed_by == "cuda-events" else "--")
        ax_bw.plot(sizes, [p.gbps for p in c.points], label=c.primitive, **style)
        ax_bw.fill_between(sizes, [p.bytes / (p.p75_us * 1e3) for p in c.points],
                           [p.bytes / (p.p25_us * 1e3) for p in c.points],
                           color=style["color"], alpha=0.15, linewidth=0)
        ax_lat.plot(sizes, [p.median_us for p in c.points], label=c.primitive, **style)
        ax_lat.fill_between(sizes, [p.p25_us for p in c.points], [p.p75_us for p in c.points],
                            color=style["color"], alpha=0.15, linewidth=0)
    env = measured[0].env
    link = pcie_raw_gbps(env.get("pcie_gen"), env.get("pcie_width"))
    if link:
        ax_bw.axhline(link, color="0.3", linestyle=":", linewidth=1.5,
                      label=f"PCIe gen{env['pcie_gen']} x{env['pcie_width']}: raw link rate "
                            f"{link:.1f} GB/s (before protocol overhead)")
    for ax in (ax_bw, ax_lat):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=4))
        ax.xaxis.set_major_formatter(FuncFormatter(size_label))
        ax.set_xlabel("transfer size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
    ax_bw.set_ylabel("bandwidth (GB/s = 1e9 B/s, from the median time)")
    ax_bw.set_title("Bandwidth vs size (band: p25-p75)")
    ax_lat.set_ylabel("time per transfer (µs, median)")
    ax_lat.set_title("Latency vs size (band: p25-p75)")
    ax_bw.legend(fontsize=7, loc="lower right")
    ax_lat.legend(fontsize=7, loc="upper left")
    link_note = "" if link else "; PCIe link not reported"
    fig.suptitle(f"Transfer primitives on {measured[0].gpu} (memstrat primitives; dashed: "
                 f"host clock, solid: CUDA events{link_note})", fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def build(inputs: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """Load, summarise, write the CSVs and plot(s) into `out`; returns what was written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    curves = latest_curves(load_primitive_records(inputs))
    if not curves:
        raise RecordError(", ".join(map(str, inputs)), "no primitive records")
    points_csv, summary_csv = write_csvs(curves.values(), out)
    gpus = sorted({g for g, _ in curves})
    plots = []
    for gpu in gpus:
        name = "primitives.png" if len(gpus) == 1 else f"primitives_{_slug(gpu)}.png"
        png = plot_primitives([c for (g, _), c in curves.items() if g == gpu], out / name)
        if png:
            plots.append(png)
    return {"curves": curves, "csv": points_csv, "summary_csv": summary_csv, "plots": plots}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="primitives.py",
        description="Turn `memstrat primitives --json` records into a CSV per size, a summary "
                    "CSV (peak, knees, latency, fixed cost) and a bandwidth/latency plot.",
        epilog="Example: analysis/primitives.py results/primitives.jsonl --out reports/primitives")
    ap.add_argument("records", nargs="+", help="primitive record files (.jsonl)")
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args(argv)
    try:
        res = build(args.records, args.out)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{'gpu':<22} {'primitive':<22} {'peak GB/s':>9} {'50% at':>10} {'90% at':>10} "
          f"{'4K lat us':>9}")
    for c in res["curves"].values():
        r = summary_row(c)
        if c.status != "ok":
            print(f"{c.gpu:<22} {c.primitive:<22} {c.status}: {c.reason}")
            continue
        print(f"{c.gpu:<22} {c.primitive:<22} {r['peak_gbps']:>9.2f} "
              f"{size_text(r['knee50_bytes']):>10} {size_text(r['knee90_bytes']):>10} "
              f"{_fmt(r['latency_4k_us'], '.2f'):>9}")
    print(f"wrote {res['csv']}, {res['summary_csv']} and {len(res['plots'])} plot(s) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
