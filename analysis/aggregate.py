"""Aggregate run records over repeats: steady-state medians, spread, per-epoch series.

Runs are grouped by their configuration minus the seed and run identity (run_id, run_tag,
started_at) and by GPU name, so repeats of one configuration end up in one Group. For
strategies without a pipeline (everything but double-buffer) depth and copy streams are
ignored, as they do not change what the run does.

Steady state = epochs 2..N of each run (all epochs when N == 1). A group's statistics pool
the steady-state epochs of all its runs: median, p25/p75 (numpy's linear percentiles),
min and max. Epoch 1 (warm-up: first touch, graph capture) is reported separately as the
median over runs. Counters that are null in the records stay None here; they are never
turned into zeros.
"""
from __future__ import annotations

import csv
import dataclasses
import statistics
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

PIPELINED_STRATEGIES = ("double-buffer",)
DEFAULT_DEPTH = 2
DEFAULT_STREAMS = 1
DEFAULT_TRAIN_SAMPLES = 60000
STRATEGY_ORDER = ("resident", "pageable", "pinned", "double-buffer", "zero-copy",
                  "um", "um-prefetch", "um-advise")

EPOCH_METRICS = ("wall_ms", "gpu_ms", "host_ms", "copy_ms", "compute_ms", "stall_ms",
                 "h2d_bytes", "um_htod_bytes", "um_dtoh_bytes", "um_gpu_faults",
                 "um_cpu_faults", "kernel_ms", "memcpy_ms")
# Config fields (besides the named key fields) that make two runs different experiments.
_OTHER_CONFIG = ("lr", "momentum", "tf32", "graphs", "advise", "profile")


@dataclasses.dataclass(frozen=True, order=True)
class GroupKey:
    gpu: str
    strategy: str
    scenario: str
    transfer: str
    batch: int
    hidden: tuple[int, ...]
    gemm: str
    depth: int | None
    streams: int | None
    epochs: int
    other: tuple = ()

    @property
    def hidden_label(self) -> str:
        return "x".join(str(h) for h in self.hidden)

    @property
    def variant_label(self) -> str:
        """Strategy name plus pipeline settings where they apply."""
        if self.depth is None:
            return self.strategy
        return f"{self.strategy} (depth {self.depth}, {self.streams} copy stream" + \
            ("s)" if self.streams != 1 else ")")

    def slice_key(self) -> tuple:
        """What must be equal for two groups to be compared in one figure."""
        return (self.gpu, self.hidden, self.gemm, self.epochs, self.other)


@dataclasses.dataclass
class Stat:
    median: float
    p25: float
    p75: float
    min: float
    max: float
    n: int


def stat(values: Sequence[float | None]) -> Stat | None:
    """Median/p25/p75/min/max of the non-null values; None when there are none."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    arr = np.asarray(vals, dtype=float)
    return Stat(median=float(np.median(arr)), p25=float(np.percentile(arr, 25)),
                p75=float(np.percentile(arr, 75)), min=float(arr.min()),
                max=float(arr.max()), n=len(vals))


def _median_or_none(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(statistics.median(vals)) if vals else None


def steady_epochs(record: dict[str, Any]) -> list[dict[str, Any]]:
    eps = record["epochs"]
    return eps[1:] if len(eps) > 1 else eps


def api_count(calls: dict[str, int] | None, name: str) -> int | None:
    """Count of one API in an api_calls object; absent = 0, null object = None."""
    if calls is None:
        return None
    return int(calls.get(name, 0))


def group_key(record: dict[str, Any]) -> GroupKey:
    cfg = record["config"]
    env = record.get("env") or {}
    pipelined = cfg["strategy"] in PIPELINED_STRATEGIES
    other = tuple((k, _freeze(cfg.get(k))) for k in _OTHER_CONFIG)
    return GroupKey(
        gpu=str(env.get("gpu_name") or "unknown GPU"),
        strategy=cfg["strategy"], scenario=cfg["scenario"], transfer=cfg["transfer"],
        batch=int(cfg["batch"]), hidden=tuple(cfg["hidden"]), gemm=cfg["gemm"],
        depth=(cfg.get("depth") or DEFAULT_DEPTH) if pipelined else None,
        streams=(cfg.get("streams") or DEFAULT_STREAMS) if pipelined else None,
        epochs=int(cfg["epochs"]), other=other)


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


@dataclasses.dataclass
class Group:
    key: GroupKey
    records: list[dict[str, Any]]
    steady: dict[str, Stat | None]            # metric -> pooled steady-state stats
    epoch1: dict[str, float | None]           # metric -> median over runs of epoch 1
    per_epoch: dict[str, list[float | None]]  # metric -> median over runs, per epoch
    malloc_setup: float | None                # cudaMalloc calls before epoch 1 (median)
    malloc_per_epoch: list[float | None]      # cudaMalloc calls per epoch (median)
    run_wall_medians: list[float]             # each run's own steady-state median
    train_samples: int
    test_acc: float | None

    @property
    def runs(self) -> int:
        return len(self.records)

    def median(self, metric: str) -> float | None:
        s = self.steady.get(metric)
        return s.median if s else None

    @property
    def samples_per_s(self) -> float | None:
        w = self.median("wall_ms")
        return self.train_samples / (w / 1000.0) if w else None

    def samples_per_s_range(self) -> tuple[float, float] | None:
        """Throughput at the p75 and p25 epoch times (low, high)."""
        s = self.steady.get("wall_ms")
        if not s or s.p25 <= 0:
            return None
        return self.train_samples / (s.p75 / 1000.0), self.train_samples / (s.p25 / 1000.0)


def aggregate(records: Iterable[dict[str, Any]]) -> list[Group]:
    """Group ok records by configuration and compute their statistics (sorted)."""
    buckets: dict[GroupKey, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("status") != "ok":
            continue
        buckets.setdefault(group_key(rec), []).append(rec)
    groups = [_make_group(k, recs) for k, recs in buckets.items()]
    groups.sort(key=lambda g: sort_key(g.key))
    return groups


def sort_key(key: GroupKey) -> tuple:
    order = (STRATEGY_ORDER.index(key.strategy) if key.strategy in STRATEGY_ORDER
             else len(STRATEGY_ORDER))
    return (key.gpu, key.hidden, key.gemm, key.epochs, str(key.other), key.scenario,
            key.transfer, key.batch, order, key.strategy, key.depth or 0, key.streams or 0)


def _make_group(key: GroupKey, recs: list[dict[str, Any]]) -> Group:
    steady = {m: stat([ep.get(m) for r in recs for ep in steady_epochs(r)])
              for m in EPOCH_METRICS}
    epoch1 = {m: _median_or_none(r["epochs"][0].get(m) for r in recs) for m in EPOCH_METRICS}
    n_epochs = max(len(r["epochs"]) for r in recs)
    per_epoch = {
        m: [_median_or_none(r["epochs"][i].get(m) for r in recs if i < len(r["epochs"]))
            for i in range(n_epochs)]
        for m in EPOCH_METRICS}
    malloc_per_epoch = [
        _median_or_none(api_count(r["epochs"][i].get("api_calls"), "cudaMalloc")
                        for r in recs if i < len(r["epochs"]))
        for i in range(n_epochs)]
    malloc_setup = _median_or_none(
        api_count((r.get("setup") or {}).get("api_calls"), "cudaMalloc") for r in recs)
    run_wall = []
    for r in recs:
        m = _median_or_none(ep.get("wall_ms") for ep in steady_epochs(r))
        if m is not None:
            run_wall.append(m)
    samples = {((r["config"].get("dataset") or {}).get("train_samples")
                or DEFAULT_TRAIN_SAMPLES) for r in recs}
    test_acc = _median_or_none((r.get("final") or {}).get("test_acc") for r in recs)
    return Group(key=key, records=recs, steady=steady, epoch1=epoch1, per_epoch=per_epoch,
                 malloc_setup=malloc_setup, malloc_per_epoch=malloc_per_epoch,
                 run_wall_medians=run_wall, train_samples=int(max(samples)),
                 test_acc=test_acc)


# --------------------------------------------------------------------------------------
# Selections used by plots and the report
# --------------------------------------------------------------------------------------
def slices(groups: Sequence[Group]) -> list[list[Group]]:
    """Partition groups into comparable sets (same GPU, hidden, gemm, epochs, options)."""
    out: dict[tuple, list[Group]] = {}
    for g in groups:
        out.setdefault(g.key.slice_key(), []).append(g)
    return list(out.values())


def representative(groups: Sequence[Group]) -> list[Group]:
    """One group per (strategy, scenario, transfer, batch): for double-buffer the default
    variant (depth 2, 1 copy stream) when it was run, else the smallest depth/streams."""
    best: dict[tuple, Group] = {}
    for g in groups:
        k = (g.key.strategy, g.key.scenario, g.key.transfer, g.key.batch)
        cur = best.get(k)
        if cur is None or _variant_rank(g.key) < _variant_rank(cur.key):
            best[k] = g
    return sorted(best.values(), key=lambda g: sort_key(g.key))


def _variant_rank(key: GroupKey) -> tuple:
    if key.depth is None:
        return (0, 0, 0)
    is_default = key.depth == DEFAULT_DEPTH and key.streams == DEFAULT_STREAMS
    return (0 if is_default else 1, key.depth, key.streams or 0)


def reference_batch(groups: Sequence[Group]) -> int | None:
    """The batch size single-batch figures use: 256 if present, else the median size."""
    batches = sorted({g.key.batch for g in groups})
    if not batches:
        return None
    if 256 in batches:
        return 256
    return batches[(len(batches) - 1) // 2]


def present(groups: Sequence[Group], attr: str, order: Sequence[Any] = ()) -> list[Any]:
    vals = {getattr(g.key, attr) for g in groups}
    ordered = [v for v in order if v in vals]
    return ordered + sorted(v for v in vals if v not in ordered)


def strategies_in(groups: Sequence[Group]) -> list[str]:
    return present(groups, "strategy", STRATEGY_ORDER)


# --------------------------------------------------------------------------------------
# Overlap efficiency (double-buffer)
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class OverlapPoint:
    group: Group
    copy_only_ms: float | None
    compute_only_ms: float | None
    compute_source: str          # "resident" or "own compute_ms"
    efficiency: float | None


def overlap_efficiency(groups: Sequence[Group]) -> list[OverlapPoint]:
    """efficiency = max(copy-only, compute-only) / GPU ms of each double-buffer group.

    compute-only = median compute_ms (the summed MLP-step time, which excludes the refresh
    scenario's per-epoch upload) of the `resident` group with the same GPU, scenario,
    transfer, batch, hidden and gemm (the compute floor); when there is none, the group's
    own median compute_ms (compute_source says which). copy-only = the group's own median
    copy_ms (GPU time of its copies). 1.0 means the slower of the two is fully hidden
    behind the faster; lower means time is lost to serialisation or stalls.
    """
    resident: dict[tuple, Group] = {}
    for g in groups:
        if g.key.strategy == "resident":
            k = (g.key.gpu, g.key.scenario, g.key.transfer, g.key.batch, g.key.hidden,
                 g.key.gemm)
            resident.setdefault(k, g)
    points = []
    for g in groups:
        if g.key.strategy not in PIPELINED_STRATEGIES:
            continue
        k = (g.key.gpu, g.key.scenario, g.key.transfer, g.key.batch, g.key.hidden, g.key.gemm)
        res = resident.get(k)
        if res is not None and res.median("compute_ms") is not None:
            compute_only, source = res.median("compute_ms"), "resident"
        else:
            compute_only, source = g.median("compute_ms"), "own compute_ms"
        copy_only = g.median("copy_ms")
        gpu = g.median("gpu_ms")
        eff = None
        if gpu and (copy_only is not None or compute_only is not None):
            eff = max(v for v in (copy_only, compute_only) if v is not None) / gpu
        points.append(OverlapPoint(g, copy_only, compute_only, source, eff))
    return points


# --------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------
CSV_COLUMNS = (
    "gpu", "strategy", "scenario", "transfer", "batch", "hidden", "gemm", "depth",
    "copy_streams", "epochs", "runs", "steady_epochs",
    "wall_ms_median", "wall_ms_p25", "wall_ms_p75", "wall_ms_min", "wall_ms_max",
    "wall_ms_run_min", "wall_ms_run_max",
    "gpu_ms_median", "gpu_ms_p25", "gpu_ms_p75",
    "host_ms_median", "copy_ms_median", "compute_ms_median", "stall_ms_median",
    "h2d_bytes_median", "um_htod_bytes_median", "um_dtoh_bytes_median",
    "um_gpu_faults_median", "um_cpu_faults_median",
    "epoch1_wall_ms", "epoch1_gpu_ms", "epoch1_um_gpu_faults", "epoch1_um_htod_bytes",
    "cudaMalloc_setup", "cudaMalloc_per_epoch_max",
    "samples_per_s", "test_acc", "overlap_efficiency", "overlap_compute_source",
)


def csv_rows(groups: Sequence[Group]) -> list[dict[str, Any]]:
    eff = {id(p.group): p for p in overlap_efficiency(groups)}
    rows = []
    for g in groups:
        k = g.key
        wall = g.steady["wall_ms"]
        gpu = g.steady["gpu_ms"]
        mal = [v for v in g.malloc_per_epoch if v is not None]
        p = eff.get(id(g))
        rows.append({
            "gpu": k.gpu, "strategy": k.strategy, "scenario": k.scenario,
            "transfer": k.transfer, "batch": k.batch, "hidden": k.hidden_label,
            "gemm": k.gemm, "depth": k.depth, "copy_streams": k.streams,
            "epochs": k.epochs, "runs": g.runs, "steady_epochs": wall.n if wall else 0,
            "wall_ms_median": wall.median if wall else None,
            "wall_ms_p25": wall.p25 if wall else None,
            "wall_ms_p75": wall.p75 if wall else None,
            "wall_ms_min": wall.min if wall else None,
            "wall_ms_max": wall.max if wall else None,
            "wall_ms_run_min": min(g.run_wall_medians) if g.run_wall_medians else None,
            "wall_ms_run_max": max(g.run_wall_medians) if g.run_wall_medians else None,
            "gpu_ms_median": gpu.median if gpu else None,
            "gpu_ms_p25": gpu.p25 if gpu else None,
            "gpu_ms_p75": gpu.p75 if gpu else None,
            **{f"{m}_median": g.median(m) for m in
               ("host_ms", "copy_ms", "compute_ms", "stall_ms", "h2d_bytes",
                "um_htod_bytes", "um_dtoh_bytes", "um_gpu_faults", "um_cpu_faults")},
            "epoch1_wall_ms": g.epoch1["wall_ms"], "epoch1_gpu_ms": g.epoch1["gpu_ms"],
            "epoch1_um_gpu_faults": g.epoch1["um_gpu_faults"],
            "epoch1_um_htod_bytes": g.epoch1["um_htod_bytes"],
            "cudaMalloc_setup": g.malloc_setup,
            "cudaMalloc_per_epoch_max": max(mal) if mal else None,
            "samples_per_s": g.samples_per_s, "test_acc": g.test_acc,
            "overlap_efficiency": p.efficiency if p else None,
            "overlap_compute_source": p.compute_source if p else None,
        })
    return rows


def _csv_value(v: Any) -> str:
    if v is None:
        return ""          # empty cell = null / not available (never 0)
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.1f}" if abs(v) >= 1e5 else f"{v:.6g}"
    return str(v)


def write_csv(groups: Sequence[Group], path: str | Path) -> Path:
    """One row per group, columns CSV_COLUMNS; empty cells are null/unavailable values."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for row in csv_rows(groups):
            w.writerow([_csv_value(row[c]) for c in CSV_COLUMNS])
    return path
