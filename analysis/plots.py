"""One function per figure; each takes aggregated groups (analysis.aggregate) of ONE
comparable slice (same GPU, hidden layers, GEMM, epochs) and writes a PNG.

Every figure has a title that names what is measured and the slice it comes from, axis
labels with units, and a legend. Timing bars carry whiskers over processes (the bootstrap
95% interval of the median; none with fewer than 3 processes), unstable ones are hatched,
a value axis spanning more than a decade is logarithmic, and floors (analysis/aggregate.py)
are drawn as horizontal lines. Counters that are null in the records are drawn as "n/a",
never as zero bars. A function returns the PNG path, or None when the slice has
no data for that figure (e.g. no double-buffer runs), in which case nothing is written.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .aggregate import (PIPELINED_STRATEGIES, Group, OverlapPoint,  # noqa: E402
                        floors, overlap_efficiency, present,
                        reference_batch, representative, strategies_in)
from .plot_style import (BATCH_COLORS, NA_COLOR, SCENARIO_ORDER, TRANSFER_ORDER, UNSTABLE_HATCH,
                         WHISKER, _bar, _ci_err, _common_legend, _compact, _figure, _find, _finish,
                         _floor_lines, _maybe_log, _na, _panel_title, _panels, _range_err,
                         _strategy_axis, context, strategy_color)  # noqa: E402

# --------------------------------------------------------------------------------------
# 1. ms per epoch per strategy
# --------------------------------------------------------------------------------------
def plot_ms_per_epoch(groups: Sequence[Group], path: str | Path,
                      pinned_bw: float | None = None) -> Path | None:
    """Bars: median over processes of each process's steady-state wall ms per epoch, per
    strategy, one bar per batch size; whiskers: the 95% interval of that median; hatched:
    unstable; lines over each bar: its compute floor and its floor (analysis/aggregate.py)."""
    fl = floors(groups, pinned_bw)
    groups = representative(groups)
    if not groups:
        return None
    scen, trans = _panels(groups)
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 0.75 * len(strategies) + 2.5, 3.8)
    width = 0.8 / len(batches)
    drew_floor = drew_compute = False
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            heights = []
            for bi, b in enumerate(batches):
                for i, name in enumerate(strategies):
                    x = i + (bi - (len(batches) - 1) / 2) * width
                    g = _find(groups, strategy=name, scenario=s, transfer=t, batch=b)
                    st = g.stat("wall_ms") if g else None
                    if st is None:
                        continue
                    heights += [st.median] + ([st.ci.low, st.ci.high] if st.ci else [])
                    _bar(ax, x, st, width * 0.92, BATCH_COLORS[bi % 6])
                    f = fl[g.key]
                    heights += _floor_lines(ax, x, width * 0.92, f)
                    drew_floor |= f.floor_ms is not None
                    drew_compute |= f.compute_ms is not None
            log = _maybe_log(ax, heights)
            _strategy_axis(ax, strategies)
            ax.set_ylabel("ms per epoch (wall clock)" + (", log scale" if log else ""))
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=BATCH_COLORS[i % 6]) for i in range(len(batches))]
    labels = [f"batch {b}" for b in batches]
    more_h, more_l = _common_legend(drew_floor, drew_compute)
    return _finish(fig, path, "Time per epoch by strategy (median over processes; lower is "
                              "better)",
                   context(groups), handles + more_h, labels + more_l,
                   ncol=max(len(batches), 2))


# --------------------------------------------------------------------------------------
# 2. throughput vs batch size
# --------------------------------------------------------------------------------------
def plot_throughput_vs_batch(groups: Sequence[Group], path: str | Path) -> Path | None:
    """Lines: training throughput (samples/s at the median epoch time) vs batch size;
    the band spans the throughput at the ends of the 95% interval; x: unstable."""
    groups = representative(groups)
    if not groups:
        return None
    scen, trans = _panels(groups)
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 5.5, 3.8)
    any_unstable = False
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            values = []
            for name in strategies:
                pts = []
                for b in batches:
                    g = _find(groups, strategy=name, scenario=s, transfer=t, batch=b)
                    if g and g.samples_per_s:
                        iv = g.samples_per_s_interval()
                        lo, hi = (iv.low, iv.high) if iv else (g.samples_per_s,) * 2
                        pts.append((b, g.samples_per_s / 1e6, lo / 1e6, hi / 1e6,
                                    bool(g.stat("wall_ms").unstable)))
                if not pts:
                    continue
                xs, ys, lo, hi, unstable = zip(*pts)
                values += list(ys) + list(lo) + list(hi)
                ax.plot(xs, ys, marker="o", color=strategy_color(name), label=name)
                ax.fill_between(xs, lo, hi, color=strategy_color(name), alpha=0.15,
                                linewidth=0)
                bad = [(x, y) for x, y, u in zip(xs, ys, unstable) if u]
                if bad:
                    any_unstable = True
                    ax.plot(*zip(*bad), linestyle="none", marker="x", markersize=9,
                            color="black")
            ax.set_xscale("log", base=2)
            ax.set_xticks(batches)
            ax.set_xticklabels([str(b) for b in batches])
            ax.minorticks_off()
            ax.set_xlabel("batch size (samples, log scale)")
            log = _maybe_log(ax, values)
            ax.set_ylabel("throughput (million samples/s)" + (", log scale" if log else ""))
            if not log:
                ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Line2D([], [], color=strategy_color(n), marker="o") for n in strategies]
    handles.append(Patch(color="0.5", alpha=0.25))
    labels = list(strategies) + ["band: 95% interval over processes (none: < 3 processes)"]
    if any_unstable:
        handles.append(Line2D([], [], linestyle="none", marker="x", color="black"))
        labels.append("x: unstable (interval half-width > 5%)")
    return _finish(fig, path, "Training throughput vs batch size (steady state; higher "
                              "is better)", context(groups), handles, labels,
                   ncol=min(len(handles), 5))


# --------------------------------------------------------------------------------------
# 3. per-epoch time breakdown
# --------------------------------------------------------------------------------------
BREAKDOWN = (("compute_ms", "compute (compute stream busy)", "#4c72b0"),
             ("stall_ms", "stall (compute waits for data)", "#dd5555"),
             ("host_ms", "host data preparation (refresh rewrite)", "#bbbbbb"))


def plot_epoch_breakdown(groups: Sequence[Group], path: str | Path,
                         batch: int | None = None,
                         pinned_bw: float | None = None) -> Path | None:
    """Per strategy, at one batch size: a stacked bar compute + stall + host preparation
    (medians over processes; compute + stall ~ GPU ms of the compute stream), the wall time
    as a black tick with its 95% interval, beside it a bar with the GPU time of the
    strategy's own copies/prefetches (may overlap compute, so not stacked), and lines at
    the compute floor and the floor. Linear axis: stacked parts are unreadable on a log
    axis. Hatched: the wall time is unstable."""
    fl = floors(groups, pinned_bw)
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    groups = [g for g in groups if g.key.batch == batch]
    if not groups:
        return None
    scen, trans = _panels(groups)
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 0.75 * len(strategies) + 2.5, 4.0)
    w = 0.38
    drew_floor = drew_compute = False
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            for i, name in enumerate(strategies):
                g = _find(groups, strategy=name, scenario=s, transfer=t)
                if g is None:
                    continue
                wall = g.stat("wall_ms")
                hatch = UNSTABLE_HATCH if wall and wall.unstable else None
                bottom = 0.0
                for metric, _, color in BREAKDOWN:
                    v = g.median(metric)
                    if v is None:
                        if metric == "compute_ms":
                            _na(ax, i - w / 2)
                        continue
                    ax.bar(i - w / 2, v, w, bottom=bottom, color=color, hatch=hatch,
                           edgecolor="0.1" if hatch else None, linewidth=0)
                    bottom += v
                if wall is not None:
                    ax.plot([i - w, i], [wall.median, wall.median], color="black",
                            linewidth=2)
                    err = _ci_err(wall)
                    if err:
                        ax.errorbar(i - w / 2, wall.median, yerr=err, fmt="none",
                                    **WHISKER)
                f = fl[g.key]
                _floor_lines(ax, i, 2 * w, f)
                drew_floor |= f.floor_ms is not None
                drew_compute |= f.compute_ms is not None
                copy = g.median("copy_ms")
                if copy is None:
                    _na(ax, i + w / 2, "no copies")
                else:
                    ax.bar(i + w / 2, copy, w, color="#8fbbd9", edgecolor="#2b6f9e",
                           linewidth=0.8)
            _strategy_axis(ax, strategies)
            ax.set_ylabel("ms per epoch (median over processes)")
            ax.set_ylim(bottom=0)
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=c) for _, _, c in BREAKDOWN]
    labels = [l for _, l, _ in BREAKDOWN]
    handles += [Patch(facecolor="#8fbbd9", edgecolor="#2b6f9e"),
                Line2D([], [], color="black", linewidth=2)]
    labels += ["copy/prefetch GPU time (may overlap compute; not stacked)",
               "wall-clock epoch time"]
    more_h, more_l = _common_legend(drew_floor, drew_compute)
    return _finish(fig, path, f"Where an epoch's time goes (batch {batch})",
                   context(groups), handles + more_h, labels + more_l, ncol=3)


# --------------------------------------------------------------------------------------
# 4. epoch 1 vs steady state
# --------------------------------------------------------------------------------------
def plot_epoch1_vs_steady(groups: Sequence[Group], path: str | Path,
                          batch: int | None = None) -> Path | None:
    """Per strategy: wall ms of epoch 1 (warm-up: first-touch faults, graph capture;
    median over processes, whiskers min-max over processes) next to the steady-state
    median (whiskers: 95% interval; hatched: unstable), at one batch size."""
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    groups = [g for g in groups if g.key.batch == batch]
    if not groups:
        return None
    scen, trans = _panels(groups)
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 0.75 * len(strategies) + 2.5, 3.8)
    w = 0.38
    colors = ("#e8a33d", "#3b6ea8")
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            vals = []
            for i, name in enumerate(strategies):
                g = _find(groups, strategy=name, scenario=s, transfer=t)
                if g is None:
                    continue
                e1, st = g.epoch1["wall_ms"], g.stat("wall_ms")
                if e1 is None:
                    _na(ax, i - w / 2)
                else:
                    e1_vals = g.epoch1_values("wall_ms")
                    vals += [e1] + e1_vals
                    ax.bar(i - w / 2, e1, w, color=colors[0],
                           yerr=_range_err(e1_vals, e1), error_kw=WHISKER)
                if st is None:
                    _na(ax, i + w / 2)
                else:
                    vals.append(st.median)
                    _bar(ax, i + w / 2, st, w, colors[1])
            log = _maybe_log(ax, vals)
            _strategy_axis(ax, strategies)
            ax.set_ylabel("ms per epoch (wall clock)" + (", log scale" if log else ""))
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=colors[0]), Patch(color=colors[1])]
    labels = ["epoch 1 (warm-up; median over processes, whisker min-max)",
              "steady state (median over processes of epochs 2..N)"]
    more_h, more_l = _common_legend(False, False)
    return _finish(fig, path, f"First epoch vs steady state (batch {batch})",
                   context(groups), handles + more_h, labels + more_l, ncol=2)


# --------------------------------------------------------------------------------------
# 5. cudaMalloc calls per epoch
# --------------------------------------------------------------------------------------
def plot_malloc_per_epoch(groups: Sequence[Group], path: str | Path,
                          batch: int | None = None, transfer: str | None = None,
                          api: str = "cudaMalloc") -> Path | None:
    """Table-like heat map per scenario: rows = strategies, columns = set-up (before
    epoch 1) and epochs 1..N, cell = calls of `api` (median over the profiled runs; a
    count, not a timing, so no interval). After set-up
    every strategy should show 0: nothing is allocated inside the training loop."""
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    transfers = present(groups, "transfer", TRANSFER_ORDER)
    transfer = transfer or (transfers[0] if transfers else None)
    groups = [g for g in groups if g.key.batch == batch and g.key.transfer == transfer]
    if not groups:
        return None
    scen = present(groups, "scenario", SCENARIO_ORDER)
    strategies = strategies_in(groups)
    n_ep = max(len(g.malloc_per_epoch) for g in groups)
    cols = ["set-up"] + [str(i) for i in range(1, n_ep + 1)]
    fig, axes = _figure(1, len(scen), 0.55 * len(cols) + 2.6, 0.42 * len(strategies) + 1.2)
    counts = [v for g in groups for v in [g.malloc_setup, *g.malloc_per_epoch]
              if v is not None]
    vmax = max([1.0] + counts)
    cmap = matplotlib.colormaps["Oranges"]
    for c, s in enumerate(scen):
        ax = axes[0][c]
        for r, name in enumerate(strategies):
            g = _find(groups, strategy=name, scenario=s)
            row = [None] * len(cols) if g is None else \
                [g.malloc_setup, *g.malloc_per_epoch] + [None] * (n_ep - len(g.malloc_per_epoch))
            for j, v in enumerate(row):
                if v is None:
                    ax.add_patch(plt.Rectangle((j - 0.5, r - 0.5), 1, 1, facecolor="0.9",
                                               hatch="//", edgecolor="0.75", linewidth=0))
                    ax.text(j, r, "n/a", ha="center", va="center", fontsize=7,
                            color=NA_COLOR)
                    continue
                frac = 0.08 + 0.92 * (v / vmax) if v > 0 else 0.0
                ax.add_patch(plt.Rectangle((j - 0.5, r - 0.5), 1, 1,
                                           facecolor=cmap(frac) if v > 0 else "white",
                                           edgecolor="0.85", linewidth=0.5))
                ax.text(j, r, f"{v:g}", ha="center", va="center", fontsize=8,
                        color="white" if frac > 0.6 else "black",
                        fontweight="bold" if (v > 0 and j > 0) else "normal")
        ax.set_xlim(-0.5, len(cols) - 0.5)
        ax.set_ylim(len(strategies) - 0.5, -0.5)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels(cols)
        ax.set_yticks(range(len(strategies)))
        ax.set_yticklabels(strategies)
        ax.set_xlabel("epoch (set-up = allocations before epoch 1)")
        ax.set_ylabel("strategy")
        ax.set_title(_panel_title(s), fontsize=10)
        ax.tick_params(length=0)
        ax.axvline(0.5, color="0.3", linewidth=1)
    handles = [Patch(facecolor=cmap(0.8)), Patch(facecolor="white", edgecolor="0.6"),
               Patch(facecolor="0.9", hatch="//", edgecolor="0.75")]
    labels = [f"{api} calls (number in cell; median over profiled runs)", "0 calls",
              "n/a: no profiled run (API calls are null with --no-profile)"]
    return _finish(fig, path, f"{api} calls per epoch (batch {batch}, {transfer} transfer)",
                   context(groups), handles, labels, ncol=3)


# --------------------------------------------------------------------------------------
# 6. unified-memory faults and migrated bytes
# --------------------------------------------------------------------------------------
UM_ROWS = (("um_gpu_faults", "GPU page faults per epoch", 1.0),
           ("um_htod_bytes", "UM migrated host→device (MB per epoch)", 1e6),
           ("um_dtoh_bytes", "UM migrated device→host (MB per epoch)", 1e6))


def plot_um_counters(groups: Sequence[Group], path: str | Path, batch: int | None = None,
                     transfer: str | None = None) -> Path | None:
    """Per strategy (CUPTI unified-memory counters, from the profiled runs): GPU page faults
    and migrated bytes in epoch 1 and in steady state, median over processes with min-max
    whiskers; a linear axis even across decades, so that zeros stay visible. Strategies
    whose counters are null (explicit copies, counters unavailable, no profiled run) are
    marked n/a, not drawn as zero."""
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    transfers = present(groups, "transfer", TRANSFER_ORDER)
    transfer = transfer or (transfers[0] if transfers else None)
    groups = [g for g in groups if g.key.batch == batch and g.key.transfer == transfer]
    if not any(g.epoch1[m] is not None or g.median(m) is not None
               for g in groups for m, _, _ in UM_ROWS):
        return None
    scen = present(groups, "scenario", SCENARIO_ORDER)
    strategies = strategies_in(groups)
    fig, axes = _figure(len(UM_ROWS), len(scen), 0.75 * len(strategies) + 2.5, 3.0)
    w = 0.38
    colors = ("#e8a33d", "#3b6ea8")
    for r, (metric, ylabel, scale) in enumerate(UM_ROWS):
        for c, s in enumerate(scen):
            ax = axes[r][c]
            vals = []
            for i, name in enumerate(strategies):
                g = _find(groups, strategy=name, scenario=s)
                bars = ((-w / 2, g.epoch1[metric], g.epoch1_values(metric), colors[0]),
                        (w / 2, g.median(metric), g.process_values(metric), colors[1])) \
                    if g else ((-w / 2, None, [], None), (w / 2, None, [], None))
                for dx, v, per_process, col in bars:
                    if v is None:
                        _na(ax, i + dx)
                        continue
                    v /= scale
                    vals += [v] + [p / scale for p in per_process]
                    ax.bar(i + dx, v, w, color=col, error_kw=WHISKER,
                           yerr=_range_err(per_process, v, scale))
                    ax.annotate(_compact(v), (i + dx, v), xytext=(0, 2),
                                textcoords="offset points", ha="center", va="bottom",
                                fontsize=7, rotation=90)
            # Linear on purpose: a steady-state 0 (nothing migrates) is the finding, and a
            # log axis cannot draw it.
            top = max([0.0] + vals)
            ax.set_ylim(0, (top if top > 1e-6 else 1.0) * 1.35)
            _strategy_axis(ax, strategies)
            if r < len(UM_ROWS) - 1:
                ax.set_xlabel("")
            ax.set_ylabel(ylabel, fontsize=9)
            if r == 0:
                ax.set_title(_panel_title(s), fontsize=10)
    handles = [Patch(color=colors[0]), Patch(color=colors[1]),
               Line2D([], [], color="0.15", marker="_", markersize=10, linewidth=0.8)]
    labels = ["epoch 1 (first touch)", "steady state (median of epochs 2..N)",
              "whisker: min-max over profiled processes"]
    handles.append(Patch(facecolor="none", edgecolor="none"))
    labels.append("n/a (grey) = counter is null: not applicable or unavailable, not zero")
    return _finish(fig, path, f"Unified-memory page faults and migrations (batch {batch}, "
                              f"{transfer} transfer)", context(groups), handles, labels,
                   ncol=2)


# --------------------------------------------------------------------------------------
# 7. overlap efficiency vs depth (double-buffer)
# --------------------------------------------------------------------------------------
def plot_overlap_efficiency(groups: Sequence[Group], path: str | Path,
                            points: Sequence[OverlapPoint] | None = None) -> Path | None:
    """double-buffer: overlap efficiency (analysis/aggregate.overlap_value) vs pipeline
    depth, one line per batch size and number of copy streams; marker = the efficiency of
    the medians, whisker = min-max of each process's own efficiency (the same compute-only
    reference). Only points with a compute-only reference are drawn."""
    pts = [p for p in (points if points is not None else overlap_efficiency(groups))
           if p.efficiency is not None and p.group.key.strategy in PIPELINED_STRATEGIES]
    if not pts:
        return None
    pgroups = [p.group for p in pts]
    scen, trans = _panels(pgroups)
    batches = present(pgroups, "batch")
    streams = present(pgroups, "streams")
    depths = present(pgroups, "depth")
    styles = ("-", "--", "-.", (0, (5, 1, 1, 1, 1, 1)))
    ideal = dict(color="0.35", linestyle=":", linewidth=1.5)
    fig, axes = _figure(len(scen), len(trans), 5.2, 3.6)
    effs = [e for p in pts for e in [p.efficiency, *p.process_efficiencies]]
    lo = min(0.0, math.floor((min(effs) - 0.05) * 10) / 10)
    hi = max(1.05, max(effs) + 0.05)
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            ax.axhline(1.0, **ideal)
            ax.axhline(0.0, **ideal)
            for bi, b in enumerate(batches):
                for si, n in enumerate(streams):
                    sel = sorted((p for p in pts if p.group.key.scenario == s
                                  and p.group.key.transfer == t and p.group.key.batch == b
                                  and p.group.key.streams == n),
                                 key=lambda p: p.group.key.depth)
                    if not sel:
                        continue
                    col = BATCH_COLORS[bi % 6]
                    ax.plot([p.group.key.depth for p in sel], [p.efficiency for p in sel],
                            color=col, linestyle=styles[si % 4], marker="o")
                    for p in sel:
                        err = _range_err(p.process_efficiencies, p.efficiency)
                        if err:
                            ax.errorbar(p.group.key.depth, p.efficiency, yerr=err,
                                        fmt="none", capsize=2, elinewidth=0.8, ecolor=col)
            ax.set_xticks(depths)
            ax.set_xlim(min(depths) - 0.3, max(depths) + 0.3)
            ax.set_ylim(lo, hi)
            ax.set_xlabel("pipeline depth (device batch buffers in flight)")
            ax.set_ylabel("overlap efficiency\n(1 = shorter part hidden, 0 = serial)")
            ax.grid(alpha=0.3)
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Line2D([], [], color=BATCH_COLORS[i % 6], marker="o")
               for i in range(len(batches))]
    labels = [f"batch {b}" for b in batches]
    for si, n in enumerate(streams):
        handles.append(Line2D([], [], color="0.2", linestyle=styles[si % 4]))
        labels.append(f"{n} copy stream{'s' if n != 1 else ''}")
    handles.append(Line2D([], [], **ideal))
    labels.append("1 = perfect overlap, 0 = serial")
    handles.append(Line2D([], [], color="0.15", marker="_", markersize=10, linewidth=0.8))
    labels.append("whisker: min-max over processes")
    return _finish(fig, path, "double-buffer overlap efficiency vs pipeline depth",
                   context(pgroups), handles, labels,
                   ncol=min(len(handles), 4))


# name of the PNG -> (function, what it shows); the report draws them in this order.
PLOTS: dict[str, tuple[Callable[..., Path | None], str]] = {
    "ms_per_epoch": (plot_ms_per_epoch, "Time per epoch by strategy"),
    "throughput_vs_batch": (plot_throughput_vs_batch, "Throughput vs batch size"),
    "epoch_breakdown": (plot_epoch_breakdown, "Per-epoch time breakdown"),
    "epoch1_vs_steady": (plot_epoch1_vs_steady, "Epoch 1 vs steady state"),
    "malloc_per_epoch": (plot_malloc_per_epoch, "cudaMalloc calls per epoch"),
    "um_counters": (plot_um_counters, "Unified-memory faults and migrated bytes"),
    "overlap_efficiency": (plot_overlap_efficiency, "double-buffer overlap efficiency"),
}
