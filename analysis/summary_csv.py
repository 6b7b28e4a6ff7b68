"""summary.csv: one row per configuration (aggregate.Group) with its statistics, counters,
floors and overlap efficiency, in the order of CSV_COLUMNS. csv_value is the one formatting
of a value for every CSV analysis writes."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Sequence

from .aggregate import (LAUNCH_FORMS, STRATEGY_OPTION_DEFAULTS, Group, LinkRates,
                        data_movement, floors, overlap_efficiency)

CSV_COLUMNS = (
    "gpu", "strategy", "scenario", "transfer", "batch", "hidden", "gemm", "depth",
    "copy_streams", "epoch_launch", "workers", "prefetch", "augment",
    # What tells two variants of one strategy apart: the label the report and the docs use,
    # the step the run took and the strategies' own options (empty where one does not apply).
    "variant", "epoch_form", "step", *STRATEGY_OPTION_DEFAULTS,
    "epochs", "runs",
    "n_processes", "timing_profile",
    "counter_runs", "steady_epochs",
    # The interval of the median over processes: its method and its exact coverage (below
    # 0.95 where too few processes allow no 95% interval; docs/methodology.md).
    "wall_ms_median", "ci_low", "ci_high", "ci_method", "ci_coverage", "ci_half_pct",
    "unstable",
    "wall_ms_process_min", "wall_ms_process_max", "wall_ms_process_rel_iqr",
    "pooled_epochs_wall_ms_p25", "pooled_epochs_wall_ms_p75",
    "pooled_epochs_wall_ms_min", "pooled_epochs_wall_ms_max",
    "gpu_ms_median", "gpu_ms_ci_low", "gpu_ms_ci_high", "gpu_ms_ci_method", "gpu_ms_ci_coverage",
    "host_ms_median", "copy_ms_median", "compute_ms_median", "stall_ms_median",
    "h2d_bytes_median", "um_htod_bytes_median", "um_dtoh_bytes_median",
    "um_gpu_faults_median", "um_cpu_faults_median",
    "input_wait_ms_median", "input_wait_first_ms_median", "slot_wait_ms_median",
    "producer_samples_per_s_median",
    "epoch1_wall_ms", "epoch1_gpu_ms", "epoch1_um_gpu_faults", "epoch1_um_htod_bytes",
    "cudaMalloc_setup", "cudaMalloc_per_epoch_max",
    "samples_per_s", "test_acc",
    # Floors at the configuration's launch form (docs/methodology.md): C is resident's GPU
    # time at that form, T the bytes at its link's bulk rate; measured/floor is GPU time over
    # the floor (GPU with GPU).
    "compute_floor_ms", "transfer_floor_ms", "transfer_link", "floor_form", "floor_ms",
    "gpu_ms_over_floor",
    # Data-movement cost: the epoch minus resident's (static) at the same launch form, step and
    # batch, wall with wall and GPU with GPU: Hodges-Lehmann shift over processes with its
    # Moses interval.
    "launch_form", "data_movement_ms", "data_movement_ci_low", "data_movement_ci_high",
    "data_movement_ci_method", "data_movement_ci_coverage", "data_movement_gpu_ms",
    "data_movement_gpu_ms_ci_low", "data_movement_gpu_ms_ci_high",
    "data_movement_gpu_ms_ci_method", "data_movement_gpu_ms_ci_coverage",
    "overlap_efficiency",
)


def csv_rows(groups: Sequence[Group], pinned_bw: LinkRates | float | None = None
             ) -> list[dict[str, Any]]:
    eff = {p.group.key: p for p in overlap_efficiency(groups)}
    fl = floors(groups, pinned_bw)
    rows = []
    for g in groups:
        k = g.key
        wall, gpu, pooled = g.stat("wall_ms"), g.stat("gpu_ms"), g.pooled_wall
        mal = [v for v in g.malloc_per_epoch if v is not None]
        p, f = eff.get(k), fl[k]
        dm, dm_gpu = data_movement(groups, g), data_movement(groups, g, "gpu_ms")
        rows.append({
            "gpu": k.gpu, "strategy": k.strategy, "scenario": k.scenario,
            "transfer": k.transfer, "batch": k.batch, "hidden": k.hidden_label,
            "gemm": k.gemm, "depth": k.depth, "copy_streams": k.streams,
            "epoch_launch": k.epoch_launch, "workers": k.workers, "prefetch": k.prefetch,
            "augment": k.augment, "variant": k.variant_label, "epoch_form": k.epoch_form,
            "step": k.step, **{name: k.option(name) for name in STRATEGY_OPTION_DEFAULTS},
            "epochs": k.epochs, "runs": g.runs,
            "n_processes": g.n_processes, "timing_profile": g.timing_profiled,
            "counter_runs": len(g.counter_records),
            "steady_epochs": pooled.n if pooled else 0,
            "wall_ms_median": wall.median if wall else None,
            "ci_low": wall.ci.low if wall and wall.ci else None,
            "ci_high": wall.ci.high if wall and wall.ci else None,
            "ci_method": wall.ci.method if wall and wall.ci else None,
            "ci_coverage": wall.ci.coverage if wall and wall.ci else None,
            "ci_half_pct": wall.half_width_pct if wall else None,
            "unstable": wall.unstable if wall else None,
            "wall_ms_process_min": wall.min if wall else None,
            "wall_ms_process_max": wall.max if wall else None,
            "wall_ms_process_rel_iqr": wall.rel_iqr if wall else None,
            "pooled_epochs_wall_ms_p25": pooled.p25 if pooled else None,
            "pooled_epochs_wall_ms_p75": pooled.p75 if pooled else None,
            "pooled_epochs_wall_ms_min": pooled.min if pooled else None,
            "pooled_epochs_wall_ms_max": pooled.max if pooled else None,
            "gpu_ms_median": gpu.median if gpu else None,
            "gpu_ms_ci_low": gpu.ci.low if gpu and gpu.ci else None,
            "gpu_ms_ci_high": gpu.ci.high if gpu and gpu.ci else None,
            "gpu_ms_ci_method": gpu.ci.method if gpu and gpu.ci else None,
            "gpu_ms_ci_coverage": gpu.ci.coverage if gpu and gpu.ci else None,
            **{f"{m}_median": g.median(m) for m in
               ("host_ms", "copy_ms", "compute_ms", "stall_ms", "h2d_bytes",
                "um_htod_bytes", "um_dtoh_bytes", "um_gpu_faults", "um_cpu_faults",
                "input_wait_ms", "input_wait_first_ms", "slot_wait_ms",
                "producer_samples_per_s")},
            "epoch1_wall_ms": g.epoch1["wall_ms"], "epoch1_gpu_ms": g.epoch1["gpu_ms"],
            "epoch1_um_gpu_faults": g.epoch1["um_gpu_faults"],
            "epoch1_um_htod_bytes": g.epoch1["um_htod_bytes"],
            "cudaMalloc_setup": g.malloc_setup,
            "cudaMalloc_per_epoch_max": max(mal) if mal else None,
            "samples_per_s": g.samples_per_s, "test_acc": g.test_acc,
            "compute_floor_ms": f.compute_ms, "transfer_floor_ms": f.transfer_ms,
            "transfer_link": f.link, "floor_form": f.form, "floor_ms": f.floor_ms,
            "gpu_ms_over_floor": f.gpu_ratio(g),
            "launch_form": LAUNCH_FORMS.get(k.epoch_form, k.epoch_form),
            "data_movement_ms": dm.estimate if dm else None,
            "data_movement_ci_low": dm.ci.low if dm else None,
            "data_movement_ci_high": dm.ci.high if dm else None,
            "data_movement_ci_method": dm.ci.method if dm else None,
            "data_movement_ci_coverage": dm.ci.coverage if dm else None,
            "data_movement_gpu_ms": dm_gpu.estimate if dm_gpu else None,
            "data_movement_gpu_ms_ci_low": dm_gpu.ci.low if dm_gpu else None,
            "data_movement_gpu_ms_ci_high": dm_gpu.ci.high if dm_gpu else None,
            "data_movement_gpu_ms_ci_method": dm_gpu.ci.method if dm_gpu else None,
            "data_movement_gpu_ms_ci_coverage": dm_gpu.ci.coverage if dm_gpu else None,
            "overlap_efficiency": p.efficiency if p else None,
        })
    return rows


def csv_value(v: Any) -> str:
    """A CSV cell: empty for None (null, never 0), true/false, compact numbers."""
    if v is None:
        return ""          # empty cell = null / not available (never 0)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.1f}" if abs(v) >= 1e5 else f"{v:.6g}"
    return str(v)


def write_csv(groups: Sequence[Group], path: str | Path,
              pinned_bw: LinkRates | float | None = None) -> Path:
    """One row per group, columns CSV_COLUMNS; empty cells are null/unavailable values."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for row in csv_rows(groups, pinned_bw):
            w.writerow([csv_value(row[c]) for c in CSV_COLUMNS])
    return path
