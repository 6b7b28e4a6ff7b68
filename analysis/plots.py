"""One function per figure; each takes aggregated groups (analysis.aggregate) of ONE
comparable slice (same GPU, hidden layers, GEMM, epochs) and writes it as PNG, SVG and PDF
(analysis/plot_style.save).

Every figure has a title that names what is measured and the slice it comes from, axis
labels with units, and a legend built from what was drawn. Timings are points (a median over
processes) with whiskers whose legend entry names the interval's method and its exact
coverage (stats.summarize: an order-statistic interval of the median, at least 95% from 6
processes on; [min, max] with its lower coverage printed for 3-5; none below 3); a × marks an
unstable value. A value axis spanning more than a decade is logarithmic, and only points and
lines go on a log axis; bars (stacked parts, counters) stay on linear axes. Floors
(analysis/aggregate.py) are short horizontal lines. Panels are drawn only for slices with
data. Counters that are null in the records are "n/a", never zero bars. Colour, marker and
line style of a strategy come from plot_style.strategy_style (one hue per approach, its naive
and best forms told apart by marker and line style). A function returns the PNG path (the SVG
and PDF lie beside it), or None when the slice has no data for that figure (e.g. no
double-buffer runs), in which case nothing is written.
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
from .plot_style import (NA_COLOR, NEUTRAL, RANGE_LABEL, SCENARIO_ORDER,  # noqa: E402
                         TRANSFER_ORDER, UNSTABLE_MARK, WHISKER, _ci_err, _compact, _figure,
                         _find, _finish, _floor_lines, _maybe_log, _na, _panel_title,
                         _range_err, _strategy_axis, batch_colors, batch_marker, context,
                         floor_legend, legend_tail, no_minor_x, panel_grid, panel_keys, point,
                         strategy_color, strategy_handle, strategy_style, whisker_handle)



def epoch_time_axis(ax, values, strategies, scenario: str, transfer: str) -> None:
    """A panel of ms per epoch against strategies: log scale where the values span more than
    LOG_SPAN, else from 0; strategy ticks, label, the panel's title."""
    log = _maybe_log(ax, values)
    if not log:
        ax.set_ylim(bottom=0)
    _strategy_axis(ax, strategies)
    ax.set_ylabel("ms per epoch (wall clock)" + (", log scale" if log else ""))
    ax.set_title(_panel_title(scenario, transfer), fontsize=10)


# --------------------------------------------------------------------------------------
# 1. ms per epoch per strategy
# --------------------------------------------------------------------------------------
def plot_ms_per_epoch(groups: Sequence[Group], path: str | Path,
                      pinned_bw: float | None = None) -> Path | None:
    """Points: median over processes of each process's steady-state wall ms per epoch, per
    strategy (its colour) and batch size (marker, left to right); whiskers: the interval of
    that median; ×: unstable; short lines at each point: its compute floor and its floor
    (analysis/aggregate.py)."""
    fl = floors(groups, pinned_bw)
    groups = representative(groups)
    if not groups:
        return None
    keys, scen, trans = panel_keys(groups)
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = panel_grid(keys, 0.62 * len(strategies) + 2.5, 3.8, scen, trans)
    slot = 0.8 / len(batches)
    drew_floor = drew_compute = any_unstable = False
    drawn, batches_drawn = [], set()
    for (s, t), ax in axes.items():
        heights = []
        for i, name in enumerate(strategies):
            for bi, b in enumerate(batches):
                g = _find(groups, strategy=name, scenario=s, transfer=t, batch=b)
                st = g.stat("wall_ms") if g else None
                if st is None:
                    continue
                x = i + (bi - (len(batches) - 1) / 2) * slot
                drawn.append(st)
                batches_drawn.add(bi)
                any_unstable |= point(ax, x, st, batch_marker(bi), strategy_color(name), 5.5)
                heights += [st.median] + ([st.ci.low, st.ci.high] if st.ci else [])
                f = fl[g.key]
                heights += _floor_lines(ax, x, slot * 0.9, f)
                drew_floor |= f.floor_ms is not None
                drew_compute |= f.compute_ms is not None
        epoch_time_axis(ax, heights, strategies, s, t)
    handles = [Line2D([], [], color=NEUTRAL, marker=batch_marker(i), linestyle="none")
               for i in sorted(batches_drawn)]
    labels = [f"batch {batches[i]}" for i in sorted(batches_drawn)]
    more_h, more_l = legend_tail(drawn, any_unstable)
    fh, flab = floor_legend(drew_floor, drew_compute)
    return _finish(fig, path, "Time per epoch by strategy (median over processes; lower is "
                              "better)",
                   context(groups), handles + more_h + fh, labels + more_l + flab,
                   ncol=max(len(batches), 2))


# --------------------------------------------------------------------------------------
# 2. throughput vs batch size
# --------------------------------------------------------------------------------------
def _throughput_interval(g: Group) -> tuple[float, float] | None:
    """Samples/s at the ends of the epoch-time interval (the same coverage: a monotone
    transformation of the median's interval)."""
    s = g.stat("wall_ms")
    if s is None or s.ci is None or s.ci.low <= 0:
        return None
    return g.train_samples / (s.ci.high / 1000.0), g.train_samples / (s.ci.low / 1000.0)


def plot_throughput_vs_batch(groups: Sequence[Group], path: str | Path) -> Path | None:
    """Lines: training throughput (samples/s at the median epoch time) vs batch size, one
    per strategy (hue by approach; circles and solid lines for a naive form, squares and
    dashed lines for its best form); whiskers: the throughput at the ends of the epoch
    time's interval; ×: unstable."""
    groups = representative(groups)
    if not groups:
        return None
    keys, scen, trans = panel_keys(groups)
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = panel_grid(keys, 5.8, 4.0, scen, trans)
    any_unstable = False
    drawn, names_drawn = [], set()
    for (s, t), ax in axes.items():
        values = []
        for si, name in enumerate(strategies):
            st = strategy_style(name)
            # a small sideways offset per strategy (a fraction of an octave) keeps the
            # whiskers of strategies with close values apart
            dodge = 2 ** (0.012 * (si - (len(strategies) - 1) / 2))
            pts = []
            for b in batches:
                g = _find(groups, strategy=name, scenario=s, transfer=t, batch=b)
                if g is None or not g.samples_per_s:
                    continue
                iv = _throughput_interval(g)
                lo, hi = iv if iv else (g.samples_per_s,) * 2
                pts.append((b * dodge, g.samples_per_s / 1e6, lo / 1e6, hi / 1e6,
                            bool(g.stat("wall_ms").unstable)))
                drawn.append(g.stat("wall_ms"))
            if not pts:
                continue
            names_drawn.add(name)
            xs, ys, lo, hi, unstable = zip(*pts)
            values += list(ys) + list(lo) + list(hi)
            ax.errorbar(xs, ys, yerr=[[y - l for y, l in zip(ys, lo)],
                                      [h - y for y, h in zip(ys, hi)]],
                        color=st["color"], marker=st["marker"], linestyle=st["linestyle"],
                        markersize=5, linewidth=1.4, capsize=2, elinewidth=0.8)
            bad = [(x, y) for x, y, u in zip(xs, ys, unstable) if u]
            if bad:
                any_unstable = True
                ax.plot(*zip(*bad), **UNSTABLE_MARK)
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) for b in batches])
        no_minor_x(ax)
        ax.set_xlim(min(batches) / 1.4, max(batches) * 1.4)
        ax.set_xlabel("batch size (samples, log scale)")
        log = _maybe_log(ax, values)
        ax.set_ylabel("throughput (million samples/s)" + (", log scale" if log else ""))
        if not log:
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.set_title(_panel_title(s, t), fontsize=10)
    shown = [n for n in strategies if n in names_drawn]
    key = ([strategy_handle(n, line=True) for n in shown], list(shown))
    more_h, more_l = legend_tail(drawn, any_unstable, of="the median over processes "
                                  "(throughput at the ends of the epoch time's interval)")
    return _finish(fig, path, "Training throughput vs batch size (steady state; higher "
                              "is better)", context(groups), more_h, more_l, key=key)


# --------------------------------------------------------------------------------------
# 3. per-epoch time breakdown
# --------------------------------------------------------------------------------------
# Okabe-Ito colours (distinct with colour vision deficiencies); not strategy colours, since
# the x axis names the strategy.
BREAKDOWN = (("compute_ms", "compute (compute stream busy)", "#0072B2"),
             ("stall_ms", "stall (compute waits for data)", "#D55E00"),
             ("host_ms", "host data preparation (refresh rewrite)", "#CC79A7"))
COPY_BAR = {"color": "#56B4E9", "edgecolor": "#004D80"}


def plot_epoch_breakdown(groups: Sequence[Group], path: str | Path,
                         batch: int | None = None,
                         pinned_bw: float | None = None) -> Path | None:
    """Per strategy, at one batch size: a stacked bar compute + stall + host preparation
    (medians over processes; compute + stall ~ GPU ms of the compute stream), the wall time
    as a black tick with its interval (× when unstable), beside it a bar with the GPU time of
    the strategy's own copies/prefetches (may overlap compute, so not stacked), and lines at
    the compute floor and the floor. Linear axis: stacked parts are unreadable on a log
    axis."""
    fl = floors(groups, pinned_bw)
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    groups = [g for g in groups if g.key.batch == batch]
    if not groups:
        return None
    keys, scen, trans = panel_keys(groups)
    strategies = strategies_in(groups)
    fig, axes = panel_grid(keys, 0.75 * len(strategies) + 2.5, 4.0, scen, trans)
    w = 0.38
    drew_floor = drew_compute = any_unstable = drew_copy = drew_wall = False
    parts_drawn, walls = set(), []
    for (s, t), ax in axes.items():
        for i, name in enumerate(strategies):
            g = _find(groups, strategy=name, scenario=s, transfer=t)
            if g is None:
                continue
            wall = g.stat("wall_ms")
            bottom = 0.0
            for metric, _, color in BREAKDOWN:
                v = g.median(metric)
                if v is None:
                    if metric == "compute_ms":
                        _na(ax, i - w / 2)
                    continue
                ax.bar(i - w / 2, v, w, bottom=bottom, color=color, linewidth=0)
                parts_drawn.add(metric)
                bottom += v
            if wall is not None:
                drew_wall = True
                walls.append(wall)
                ax.plot([i - w, i], [wall.median, wall.median], color="black", linewidth=2)
                err = _ci_err(wall)
                if err:
                    ax.errorbar(i - w / 2, wall.median, yerr=err, fmt="none", **WHISKER)
                if wall.unstable:
                    any_unstable = True
                    ax.plot([i - w / 2], [wall.median], **UNSTABLE_MARK)
            f = fl[g.key]
            _floor_lines(ax, i, 2 * w, f)
            drew_floor |= f.floor_ms is not None
            drew_compute |= f.compute_ms is not None
            copy = g.median("copy_ms")
            if copy is None:
                _na(ax, i + w / 2, "no copies")
            else:
                drew_copy = True
                ax.bar(i + w / 2, copy, w, linewidth=0.8, **COPY_BAR)
        _strategy_axis(ax, strategies)
        ax.set_ylabel("ms per epoch (median over processes)")
        ax.set_ylim(bottom=0)
        ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=c) for m, _, c in BREAKDOWN if m in parts_drawn]
    labels = [l for m, l, _ in BREAKDOWN if m in parts_drawn]
    if drew_copy:
        handles.append(Patch(facecolor=COPY_BAR["color"], edgecolor=COPY_BAR["edgecolor"]))
        labels.append("copy/prefetch GPU time (may overlap compute; not stacked)")
    if drew_wall:
        handles.append(Line2D([], [], color="black", linewidth=2))
        labels.append("wall-clock epoch time")
    more_h, more_l = legend_tail(walls, any_unstable, "whisker on the wall time")
    fh, flab = floor_legend(drew_floor, drew_compute)
    return _finish(fig, path, f"Where an epoch's time goes (batch {batch})",
                   context(groups), handles + more_h + fh, labels + more_l + flab, ncol=3)


# --------------------------------------------------------------------------------------
# 4. epoch 1 vs steady state
# --------------------------------------------------------------------------------------
def plot_epoch1_vs_steady(groups: Sequence[Group], path: str | Path,
                          batch: int | None = None) -> Path | None:
    """Per strategy (its colour and marker): wall ms of epoch 1 (warm-up: first-touch
    faults, graph capture; hollow, median over processes, whiskers min-max over processes)
    left of the steady-state median (filled, whiskers: its interval; ×: unstable), at one
    batch size."""
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    groups = [g for g in groups if g.key.batch == batch]
    if not groups:
        return None
    keys, scen, trans = panel_keys(groups)
    strategies = strategies_in(groups)
    fig, axes = panel_grid(keys, 0.62 * len(strategies) + 2.5, 3.8, scen, trans)
    dx = 0.17
    any_unstable = drew_e1 = False
    steady = []
    for (s, t), ax in axes.items():
        vals = []
        for i, name in enumerate(strategies):
            g = _find(groups, strategy=name, scenario=s, transfer=t)
            if g is None:
                continue
            st = strategy_style(name)
            e1, ss = g.epoch1["wall_ms"], g.stat("wall_ms")
            if e1 is None:
                _na(ax, i - dx)
            else:
                drew_e1 = True
                e1_vals = g.epoch1_values("wall_ms")
                vals += [e1] + e1_vals
                ax.errorbar(i - dx, e1, yerr=_range_err(e1_vals, e1), fmt=st["marker"],
                            markersize=6, color=st["color"], markerfacecolor="white",
                            markeredgecolor=st["color"], **WHISKER)
            if ss is None:
                _na(ax, i + dx)
            else:
                steady.append(ss)
                vals += [ss.median] + ([ss.ci.low, ss.ci.high] if ss.ci else [])
                any_unstable |= point(ax, i + dx, ss, st["marker"], st["color"])
        epoch_time_axis(ax, vals, strategies, s, t)
    handles, labels = [], []
    if drew_e1:
        handles.append(Line2D([], [], color=NEUTRAL, marker="o", markerfacecolor="white",
                              linestyle="none"))
        labels.append("epoch 1 (warm-up; median over processes; " + RANGE_LABEL + ")")
    if steady:
        handles.append(Line2D([], [], color=NEUTRAL, marker="o", linestyle="none"))
        labels.append("steady state (median over processes of epochs 2..N)")
    more_h, more_l = legend_tail(steady, any_unstable, "whisker on steady state")
    return _finish(fig, path, f"First epoch vs steady state (batch {batch})",
                   context(groups), handles + more_h, labels + more_l, ncol=1)


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
    drew = {"count": False, "zero": False, "na": False}
    for c, s in enumerate(scen):
        ax = axes[0][c]
        for r, name in enumerate(strategies):
            g = _find(groups, strategy=name, scenario=s)
            row = [None] * len(cols) if g is None else \
                [g.malloc_setup, *g.malloc_per_epoch] + [None] * (n_ep - len(g.malloc_per_epoch))
            for j, v in enumerate(row):
                if v is None:
                    drew["na"] = True
                    ax.add_patch(plt.Rectangle((j - 0.5, r - 0.5), 1, 1, facecolor="0.9",
                                               hatch="//", edgecolor="0.75", linewidth=0))
                    ax.text(j, r, "n/a", ha="center", va="center", fontsize=7,
                            color=NA_COLOR)
                    continue
                drew["count" if v > 0 else "zero"] = True
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
    entries = [("count", Patch(facecolor=cmap(0.8)),
                f"{api} calls (number in cell; median over profiled runs)"),
               ("zero", Patch(facecolor="white", edgecolor="0.6"), "0 calls"),
               ("na", Patch(facecolor="0.9", hatch="//", edgecolor="0.75"),
                "n/a: no profiled run (API calls are null with --no-profile)")]
    handles = [h for k, h, _ in entries if drew[k]]
    labels = [l for k, _, l in entries if drew[k]]
    return _finish(fig, path, f"{api} calls per epoch (batch {batch}, {transfer} transfer)",
                   context(groups), handles, labels, ncol=3)


# --------------------------------------------------------------------------------------
# 6. unified-memory faults and migrated bytes
# --------------------------------------------------------------------------------------
UM_ROWS = (("um_gpu_faults", "GPU page faults per epoch", 1.0),
           ("um_htod_bytes", "UM migrated host→device (MB per epoch)", 1e6),
           ("um_dtoh_bytes", "UM migrated device→host (MB per epoch)", 1e6))
EPOCH1_BAR = {"alpha": 0.45, "hatch": "///"}


def plot_um_counters(groups: Sequence[Group], path: str | Path, batch: int | None = None,
                     transfer: str | None = None) -> Path | None:
    """Per strategy with unified-memory counters (CUPTI, from the profiled runs): GPU page
    faults and migrated bytes in epoch 1 (light, hatched) and in steady state (solid), in the
    strategy's colour, median over processes with min-max whiskers; a linear axis even across
    decades, so that zeros stay visible. Strategies whose counters are all 0 (nothing
    migrates, nothing faults: explicit copies) or all null (counters unavailable, no profiled
    run) are named in the subtitle, not drawn; a counter row with no value at all is left
    out."""
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    transfers = present(groups, "transfer", TRANSFER_ORDER)
    transfer = transfer or (transfers[0] if transfers else None)
    groups = [g for g in groups if g.key.batch == batch and g.key.transfer == transfer]

    def has(g: Group, metric: str) -> bool:
        return g.epoch1[metric] is not None or g.median(metric) is not None

    rows = [r for r in UM_ROWS if any(has(g, r[0]) for g in groups)]
    if not rows:
        return None
    def nonzero(g: Group, metric: str) -> bool:
        return any(v for v in (g.epoch1[metric], g.median(metric)) if v is not None)

    all_strategies = strategies_in(groups)
    measured = [n for n in all_strategies
                if any(has(g, m) for g in groups if g.key.strategy == n for m, _, _ in rows)]
    strategies = [n for n in measured
                  if any(nonzero(g, m) for g in groups if g.key.strategy == n
                         for m, _, _ in rows)] or measured
    zeros = [n for n in measured if n not in strategies]
    nulls = [n for n in all_strategies if n not in measured]
    scen = [s for s in present(groups, "scenario", SCENARIO_ORDER)
            if any(has(g, m) for g in groups if g.key.scenario == s for m, _, _ in rows)]
    fig, axes = _figure(len(rows), len(scen), 0.75 * len(strategies) + 2.5, 3.0)
    w = 0.38
    drew_na = False
    for r, (metric, ylabel, scale) in enumerate(rows):
        for c, s in enumerate(scen):
            ax = axes[r][c]
            vals = []
            for i, name in enumerate(strategies):
                g = _find(groups, strategy=name, scenario=s)
                color = strategy_color(name)
                bars = ((-w / 2, g.epoch1[metric], g.epoch1_values(metric), EPOCH1_BAR),
                        (w / 2, g.median(metric), g.process_values(metric), {})) \
                    if g else ((-w / 2, None, [], None), (w / 2, None, [], None))
                for dx, v, per_process, style in bars:
                    if v is None:
                        drew_na = True
                        _na(ax, i + dx)
                        continue
                    v /= scale
                    vals += [v] + [p / scale for p in per_process]
                    ax.bar(i + dx, v, w, color=color, edgecolor=color, linewidth=0.6,
                           error_kw=WHISKER, yerr=_range_err(per_process, v, scale),
                           **style)
                    ax.annotate(_compact(v), (i + dx, v), xytext=(0, 2),
                                textcoords="offset points", ha="center", va="bottom",
                                fontsize=7, rotation=90)
            # Linear on purpose: a steady-state 0 (nothing migrates) is the finding, and a
            # log axis cannot draw it.
            top = max([0.0] + vals)
            ax.set_ylim(0, (top if top > 1e-6 else 1.0) * 1.35)
            _strategy_axis(ax, strategies)
            if r < len(rows) - 1:
                ax.set_xlabel("")
            ax.set_ylabel(ylabel, fontsize=9)
            if r == 0:
                ax.set_title(_panel_title(s), fontsize=10)
    handles = [Patch(facecolor=NEUTRAL, edgecolor=NEUTRAL, **EPOCH1_BAR),
               Patch(facecolor=NEUTRAL), whisker_handle()]
    labels = ["epoch 1 (first touch)", "steady state (median of epochs 2..N)",
              RANGE_LABEL.replace("processes", "profiled processes")]
    if drew_na:
        handles.append(Patch(facecolor="none", edgecolor="none"))
        labels.append("n/a (grey) = counter is null: not applicable or unavailable, not zero")
    subtitle = context(groups)
    if zeros:
        subtitle += " · 0 in every counter (measured), not drawn: " + ", ".join(zeros)
    if nulls:
        subtitle += " · no unified-memory counters (null), not drawn: " + ", ".join(nulls)
    return _finish(fig, path, f"Unified-memory page faults and migrations (batch {batch}, "
                              f"{transfer} transfer)", subtitle, handles, labels, ncol=2)


# --------------------------------------------------------------------------------------
# 7. overlap efficiency vs depth (pipelined strategies)
# --------------------------------------------------------------------------------------
def plot_overlap_efficiency(groups: Sequence[Group], path: str | Path,
                            points: Sequence[OverlapPoint] | None = None) -> Path | None:
    """Pipelined strategies (double-buffer): overlap efficiency
    (analysis/aggregate.overlap_value) vs pipeline depth, one panel per scenario and transfer
    that has points; colour and marker = batch size, filled = one copy stream, hollow = more
    (the number in the legend); a line joins the depths of one batch size and stream count
    when more than one was measured; marker = the efficiency of the medians, whisker = min-max
    of each process's own efficiency (the same compute-only reference). Only points with a
    compute-only reference are drawn."""
    pts = [p for p in (points if points is not None else overlap_efficiency(groups))
           if p.efficiency is not None and p.group.key.strategy in PIPELINED_STRATEGIES]
    if not pts:
        return None
    pgroups = [p.group for p in pts]
    keys, scen, trans = panel_keys(pgroups)
    batches = present(pgroups, "batch")
    streams = present(pgroups, "streams")
    strategies = strategies_in(pgroups)
    colors = batch_colors(len(batches))
    ideal = dict(color="0.35", linestyle=":", linewidth=1.5)
    fig, axes = panel_grid(keys, 5.2, 3.6, scen, trans)
    effs = [e for p in pts for e in [p.efficiency, *p.process_efficiencies]]
    lo = min(0.5, math.floor((min(effs) - 0.05) * 10) / 10)
    hi = max(1.05, max(effs) + 0.05)
    drawn_b, drawn_n, drew_line, drew_whisker = set(), set(), False, False
    for (s, t), ax in axes.items():
        ax.axhline(1.0, **ideal)
        if lo <= 0:
            ax.axhline(0.0, **ideal)
        for strategy in strategies:
            for bi, b in enumerate(batches):
                for si, n in enumerate(streams):
                    sel = sorted((p for p in pts if p.group.key.scenario == s
                                  and p.group.key.transfer == t and p.group.key.batch == b
                                  and p.group.key.streams == n
                                  and p.group.key.strategy == strategy),
                                 key=lambda p: p.group.key.depth)
                    if not sel:
                        continue
                    drawn_b.add(bi)
                    drawn_n.add(n)
                    col = colors[bi]
                    face = col if si == 0 else "white"
                    dx = 0.07 * (bi - (len(batches) - 1) / 2)   # batches side by side
                    xs = [p.group.key.depth + dx for p in sel]
                    ys = [p.efficiency for p in sel]
                    if len(sel) > 1:
                        drew_line = True
                        ax.plot(xs, ys, color=col, linewidth=1.2,
                                linestyle="-" if si == 0 else "--")
                    for x, p in zip(xs, sel):
                        err = _range_err(p.process_efficiencies, p.efficiency)
                        drew_whisker |= err is not None
                        ax.errorbar(x, p.efficiency, yerr=err,
                                    fmt=batch_marker(bi), markersize=7, color=col,
                                    markerfacecolor=face, markeredgecolor=col,
                                    capsize=2, elinewidth=0.8, ecolor=col)
        depths = sorted({p.group.key.depth for p in pts})
        ax.set_xticks(depths)
        no_minor_x(ax)
        ax.set_xlim(min(depths) - 0.4, max(depths) + 0.4)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("pipeline depth (device batch buffers in flight)")
        ax.set_ylabel("overlap efficiency\n(1 = shorter part hidden, 0 = serial)")
        ax.grid(alpha=0.3)
        ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Line2D([], [], color=colors[i], marker=batch_marker(i), linestyle="none")
               for i in sorted(drawn_b)]
    labels = [f"batch {batches[i]}" for i in sorted(drawn_b)]
    if len(drawn_n) > 1:
        for si, n in enumerate(streams):
            if n not in drawn_n:
                continue
            style = ("-" if si == 0 else "--") if drew_line else "none"
            handles.append(Line2D([], [], color=NEUTRAL, marker="o", linestyle=style,
                                  markerfacecolor=NEUTRAL if si == 0 else "white"))
            labels.append(f"{n} copy stream{'s' if n != 1 else ''}"
                          + (" (filled)" if si == 0 else " (hollow)"))
    handles.append(Line2D([], [], **ideal))
    labels.append("1 = shorter of copy and compute fully hidden"
                  + (", 0 = serial" if lo <= 0 else ""))
    if drew_whisker:
        handles.append(whisker_handle())
        labels.append("whisker: min–max of each process's own efficiency")
    one_setting = ""
    if len(drawn_n) == 1:
        n = next(iter(drawn_n))
        one_setting = f" · {n} copy stream{'s' if n != 1 else ''}"
    title = " / ".join(strategies) + " overlap efficiency vs pipeline depth"
    return _finish(fig, path, title, context(pgroups) + one_setting, handles, labels,
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
