"""One function per figure; each takes aggregated groups (analysis.aggregate) of ONE
comparable slice (same GPU, hidden layers, GEMM, epochs) and writes a PNG.

Every figure has a title that names what is measured and the slice it comes from, axis
labels with units, and a legend. Counters that are null in the records are drawn as
"n/a", never as zero bars. A function returns the PNG path, or None when the slice has
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

from .aggregate import (STRATEGY_ORDER, Group, OverlapPoint, overlap_efficiency,  # noqa: E402
                        present, reference_batch, representative, strategies_in)

DPI = 120
_TAB10 = matplotlib.colormaps["tab10"].colors
STRATEGY_COLORS = {s: _TAB10[i] for i, s in enumerate(STRATEGY_ORDER)}
BATCH_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d")
SCENARIO_ORDER = ("static", "refresh")
TRANSFER_ORDER = ("u8", "f32")
NA_COLOR = "0.45"
SCENARIO_NOTE = {"static": "static data (never changes)",
                 "refresh": "refresh (host rewrites the data every epoch)"}


def strategy_color(name: str):
    if name in STRATEGY_COLORS:
        return STRATEGY_COLORS[name]
    return _TAB10[(len(STRATEGY_ORDER) + sum(map(ord, name))) % 10]  # stable per name


def context(groups: Sequence[Group], **extra) -> str:
    """'NVIDIA H200 · hidden 256 · cublas · 10 epochs (+ extra)' for a slice."""
    k = groups[0].key
    parts = [k.gpu, f"hidden {k.hidden_label}", f"GEMM {k.gemm}", f"{k.epochs} epochs/run"]
    runs = sorted({g.runs for g in groups})
    parts.append(f"{runs[0]} run{'s' if runs[0] != 1 else ''}/config" if len(runs) == 1
                 else f"{runs[0]}-{runs[-1]} runs/config")
    for name, value in extra.items():
        parts.append(f"{name.replace('_', ' ')} {value}")
    return " · ".join(parts)


def _figure(nrows: int, ncols: int, panel_w: float, panel_h: float):
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(max(8.0, panel_w * ncols), panel_h * nrows + 1.6))
    return fig, axes


def _finish(fig, path: Path, title: str, subtitle: str, handles, labels,
            ncol: int | None = None) -> Path:
    fig.suptitle(f"{title}\n{subtitle}", fontsize=12)
    if handles:
        # As many columns as fit the figure width (9 pt text: ~0.06 in per character,
        # plus the handle), so that no legend entry is cut off at the edges.
        fig_w = fig.get_size_inches()[0]
        entry_w = max(len(l) for l in labels) * 0.062 + 0.75
        fit = max(1, int((fig_w - 0.3) // entry_w))
        ncol = min(ncol or len(handles), fit, len(handles))
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=9,
                   frameon=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _panels(groups: Sequence[Group]):
    scen = present(groups, "scenario", SCENARIO_ORDER)
    trans = present(groups, "transfer", TRANSFER_ORDER)
    return scen, trans


def _panel_title(scenario: str, transfer: str | None = None) -> str:
    t = SCENARIO_NOTE.get(scenario, scenario)
    return t if transfer is None else f"{t}, {transfer} transfer"


def _find(groups: Sequence[Group], **match) -> Group | None:
    for g in groups:
        if all(getattr(g.key, k) == v for k, v in match.items()):
            return g
    return None


def _strategy_axis(ax, strategies: Sequence[str]) -> None:
    ax.set_xticks(range(len(strategies)))
    ax.set_xticklabels(strategies, rotation=30, ha="right")
    ax.set_xlim(-0.6, len(strategies) - 0.4)
    ax.set_xlabel("strategy")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _maybe_log(ax, values: Sequence[float], ratio: float = 25.0) -> bool:
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > ratio:
        ax.set_yscale("log")
        return True
    return False


def _na(ax, x: float, text: str = "n/a", y: float | None = None) -> None:
    """Mark a missing/null value at the bottom of a bar slot."""
    ax.annotate(text, (x, 0 if y is None else y), xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=7,
                color=NA_COLOR, rotation=90)


def _compact(v: float) -> str:
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.1f}G"
    if a >= 1e6:
        return f"{v / 1e6:.1f}M"
    if a >= 1e4:
        return f"{v / 1e3:.0f}k"
    if a >= 1e3:
        return f"{v / 1e3:.1f}k"
    if a >= 10 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.2g}"


# --------------------------------------------------------------------------------------
# 1. ms per epoch per strategy
# --------------------------------------------------------------------------------------
def plot_ms_per_epoch(groups: Sequence[Group], path: str | Path) -> Path | None:
    """Bars: steady-state median wall ms per epoch per strategy, one bar per batch size;
    whiskers from the fastest to the slowest steady-state epoch over all repeats."""
    groups = representative(groups)
    if not groups:
        return None
    scen, trans = _panels(groups)
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 0.75 * len(strategies) + 2.5, 3.8)
    width = 0.8 / len(batches)
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            heights = []
            for bi, b in enumerate(batches):
                for i, name in enumerate(strategies):
                    x = i + (bi - (len(batches) - 1) / 2) * width
                    g = _find(groups, strategy=name, scenario=s, transfer=t, batch=b)
                    st = g.steady["wall_ms"] if g else None
                    if st is None:
                        continue
                    heights.append(st.median)
                    ax.bar(x, st.median, width * 0.92, color=BATCH_COLORS[bi % 6],
                           yerr=[[st.median - st.min], [st.max - st.median]],
                           capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "0.15"})
            log = _maybe_log(ax, heights)
            _strategy_axis(ax, strategies)
            ax.set_ylabel("ms per epoch (wall clock)" + (", log scale" if log else ""))
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=BATCH_COLORS[i % 6]) for i in range(len(batches))]
    labels = [f"batch {b}" for b in batches]
    handles.append(Line2D([], [], color="0.15", marker="_", markersize=10, linewidth=0.8))
    labels.append("whiskers: fastest-slowest steady epoch")
    return _finish(fig, path, "Time per epoch by strategy (median of steady-state epochs "
                              "2..N; lower is better)", context(groups), handles, labels)


# --------------------------------------------------------------------------------------
# 2. throughput vs batch size
# --------------------------------------------------------------------------------------
def plot_throughput_vs_batch(groups: Sequence[Group], path: str | Path) -> Path | None:
    """Lines: training throughput (samples/s at the median epoch time) vs batch size;
    the band spans the p25-p75 epoch times."""
    groups = representative(groups)
    if not groups:
        return None
    scen, trans = _panels(groups)
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 5.5, 3.8)
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            for name in strategies:
                pts = []
                for b in batches:
                    g = _find(groups, strategy=name, scenario=s, transfer=t, batch=b)
                    if g and g.samples_per_s:
                        rng = g.samples_per_s_range() or (g.samples_per_s, g.samples_per_s)
                        pts.append((b, g.samples_per_s / 1e6, rng[0] / 1e6, rng[1] / 1e6))
                if not pts:
                    continue
                xs, ys, lo, hi = zip(*pts)
                ax.plot(xs, ys, marker="o", color=strategy_color(name), label=name)
                ax.fill_between(xs, lo, hi, color=strategy_color(name), alpha=0.15,
                                linewidth=0)
            ax.set_xscale("log", base=2)
            ax.set_xticks(batches)
            ax.set_xticklabels([str(b) for b in batches])
            ax.minorticks_off()
            ax.set_xlabel("batch size (samples, log scale)")
            ax.set_ylabel("throughput (million samples/s)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Line2D([], [], color=strategy_color(n), marker="o") for n in strategies]
    handles.append(Patch(color="0.5", alpha=0.25))
    labels = list(strategies) + ["band: p25-p75 epoch time"]
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
                         batch: int | None = None) -> Path | None:
    """Per strategy, at one batch size: a stacked bar compute + stall + host preparation
    (steady-state medians; compute + stall ~ GPU ms of the compute stream), the wall time
    as a black tick, and beside it a hatched bar with the GPU time of the strategy's own
    copies/prefetches, which may overlap compute and is therefore not stacked."""
    groups = representative(groups)
    batch = batch or reference_batch(groups)
    groups = [g for g in groups if g.key.batch == batch]
    if not groups:
        return None
    scen, trans = _panels(groups)
    strategies = strategies_in(groups)
    fig, axes = _figure(len(scen), len(trans), 0.75 * len(strategies) + 2.5, 4.0)
    w = 0.38
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            for i, name in enumerate(strategies):
                g = _find(groups, strategy=name, scenario=s, transfer=t)
                if g is None:
                    continue
                bottom = 0.0
                for metric, _, color in BREAKDOWN:
                    v = g.median(metric)
                    if v is None:
                        if metric == "compute_ms":
                            _na(ax, i - w / 2)
                        continue
                    ax.bar(i - w / 2, v, w, bottom=bottom, color=color)
                    bottom += v
                wall = g.median("wall_ms")
                if wall is not None:
                    ax.plot([i - w, i], [wall, wall], color="black", linewidth=2)
                copy = g.median("copy_ms")
                if copy is None:
                    _na(ax, i + w / 2, "no copies")
                else:
                    ax.bar(i + w / 2, copy, w, color="#8fbbd9", hatch="///",
                           edgecolor="#2b6f9e", linewidth=0.5)
            _strategy_axis(ax, strategies)
            ax.set_ylabel("ms per epoch (steady-state median)")
            ax.set_ylim(bottom=0)
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=c) for _, _, c in BREAKDOWN]
    labels = [l for _, l, _ in BREAKDOWN]
    handles += [Patch(facecolor="#8fbbd9", hatch="///", edgecolor="#2b6f9e"),
                Line2D([], [], color="black", linewidth=2)]
    labels += ["copy/prefetch GPU time (may overlap compute; not stacked)",
               "wall-clock epoch time"]
    return _finish(fig, path, f"Where an epoch's time goes (batch {batch})",
                   context(groups), handles, labels, ncol=3)


# --------------------------------------------------------------------------------------
# 4. epoch 1 vs steady state
# --------------------------------------------------------------------------------------
def plot_epoch1_vs_steady(groups: Sequence[Group], path: str | Path,
                          batch: int | None = None) -> Path | None:
    """Per strategy: wall ms of epoch 1 (warm-up: first-touch faults, graph capture)
    next to the steady-state median, at one batch size."""
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
                e1, st = g.epoch1["wall_ms"], g.median("wall_ms")
                for dx, v, col in ((-w / 2, e1, colors[0]), (w / 2, st, colors[1])):
                    if v is None:
                        _na(ax, i + dx)
                        continue
                    vals.append(v)
                    ax.bar(i + dx, v, w, color=col)
            log = _maybe_log(ax, vals, ratio=20.0)
            _strategy_axis(ax, strategies)
            ax.set_ylabel("ms per epoch (wall clock)" + (", log scale" if log else ""))
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Patch(color=colors[0]), Patch(color=colors[1])]
    labels = ["epoch 1 (warm-up; median over runs)", "steady state (median of epochs 2..N)"]
    return _finish(fig, path, f"First epoch vs steady state (batch {batch})",
                   context(groups), handles, labels)


# --------------------------------------------------------------------------------------
# 5. cudaMalloc calls per epoch
# --------------------------------------------------------------------------------------
def plot_malloc_per_epoch(groups: Sequence[Group], path: str | Path,
                          batch: int | None = None, transfer: str | None = None,
                          api: str = "cudaMalloc") -> Path | None:
    """Table-like heat map per scenario: rows = strategies, columns = set-up (before
    epoch 1) and epochs 1..N, cell = calls of `api` (median over runs). After set-up
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
    labels = [f"{api} calls (number in cell; median over runs)", "0 calls",
              "n/a: API calls not recorded (--no-profile)"]
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
    """Per strategy (CUPTI unified-memory counters): GPU page faults and migrated bytes in
    epoch 1 and in steady state. Strategies whose counters are null (explicit copies,
    or counters unavailable) are marked n/a, not drawn as zero."""
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
            top = max([0.0] + [v / scale for g in groups if g.key.scenario == s
                                for v in (g.epoch1[metric], g.median(metric))
                                if v is not None])
            for i, name in enumerate(strategies):
                g = _find(groups, strategy=name, scenario=s)
                for dx, v, col in ((-w / 2, g.epoch1[metric] if g else None, colors[0]),
                                   (w / 2, g.median(metric) if g else None, colors[1])):
                    if v is None:
                        _na(ax, i + dx)
                        continue
                    v /= scale
                    ax.bar(i + dx, v, w, color=col)
                    ax.annotate(_compact(v), (i + dx, v), xytext=(0, 2),
                                textcoords="offset points", ha="center", va="bottom",
                                fontsize=7, rotation=90)
            ax.set_ylim(0, (top if top > 1e-6 else 1.0) * 1.35)
            _strategy_axis(ax, strategies)
            if r < len(UM_ROWS) - 1:
                ax.set_xlabel("")
            ax.set_ylabel(ylabel, fontsize=9)
            if r == 0:
                ax.set_title(_panel_title(s), fontsize=10)
    handles = [Patch(color=colors[0]), Patch(color=colors[1])]
    labels = ["epoch 1 (first touch)", "steady state (median of epochs 2..N)"]
    handles.append(Patch(facecolor="none", edgecolor="none"))
    labels.append("n/a (grey) = counter is null: not applicable or unavailable, not zero")
    return _finish(fig, path, f"Unified-memory page faults and migrations (batch {batch}, "
                              f"{transfer} transfer)", context(groups), handles, labels,
                   ncol=3)


# --------------------------------------------------------------------------------------
# 7. overlap efficiency vs depth (double-buffer)
# --------------------------------------------------------------------------------------
def plot_overlap_efficiency(groups: Sequence[Group], path: str | Path,
                            points: Sequence[OverlapPoint] | None = None) -> Path | None:
    """double-buffer: efficiency = max(copy-only, compute-only) / GPU ms vs pipeline depth,
    one line per batch size and number of copy streams. compute-only = GPU ms of the
    `resident` run of the same configuration (hollow markers: no resident run, the
    double-buffer run's own compute ms was used instead)."""
    pts = [p for p in (points if points is not None else overlap_efficiency(groups))
           if p.efficiency is not None]
    if not pts:
        return None
    pgroups = [p.group for p in pts]
    scen, trans = _panels(pgroups)
    batches = present(pgroups, "batch")
    streams = present(pgroups, "streams")
    depths = present(pgroups, "depth")
    styles = ("-", "--", "-.", (0, (5, 1, 1, 1, 1, 1)))
    perfect = dict(color="0.35", linestyle=":", linewidth=1.5)
    fig, axes = _figure(len(scen), len(trans), 5.2, 3.6)
    effs = [p.efficiency for p in pts]
    lo = max(0.0, math.floor((min(effs) - 0.05) * 10) / 10)
    hi = max(1.05, max(effs) + 0.05)
    for r, s in enumerate(scen):
        for c, t in enumerate(trans):
            ax = axes[r][c]
            ax.axhline(1.0, **perfect)
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
                            color=col, linestyle=styles[si % 4])
                    for p in sel:
                        fallback = p.compute_source != "resident"
                        ax.plot(p.group.key.depth, p.efficiency, marker="o", color=col,
                                markerfacecolor="white" if fallback else col)
            ax.set_xticks(depths)
            ax.set_xlim(min(depths) - 0.3, max(depths) + 0.3)
            ax.set_ylim(lo, hi)
            ax.set_xlabel("pipeline depth (device batch buffers in flight)")
            ax.set_ylabel("max(copy, compute) / GPU ms\n(overlap efficiency, 1 = perfect)")
            ax.grid(alpha=0.3)
            ax.set_title(_panel_title(s, t), fontsize=10)
    handles = [Line2D([], [], color=BATCH_COLORS[i % 6], marker="o")
               for i in range(len(batches))]
    labels = [f"batch {b}" for b in batches]
    for si, n in enumerate(streams):
        handles.append(Line2D([], [], color="0.2", linestyle=styles[si % 4]))
        labels.append(f"{n} copy stream{'s' if n != 1 else ''}")
    handles.append(Line2D([], [], **perfect))
    labels.append("1.0 = perfect overlap")
    if any(p.compute_source != "resident" for p in pts):
        handles.append(Line2D([], [], color="0.2", marker="o", markerfacecolor="white",
                              linestyle="none"))
        labels.append("hollow: no resident run, own compute ms used")
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
