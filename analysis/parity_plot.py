"""The cost model's parity plot: predicted vs measured ms per epoch (analysis/cost_model.py).

Two panels, GPU time and wall time, log-log; the line y = x and the band in which
|residual| = |measured - predicted| / measured <= 25% (measured between predicted / 1.25 and
predicted / 0.75); one marker shape and colour per strategy; whiskers: the measured 95% interval
over processes (none with fewer than 3 processes); hollow markers: unstable measurements. The
compute-only reference itself is left out (its prediction is its measurement).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter  # noqa: E402

from .cost_model import UNEXPLAINED, Comparison  # noqa: E402
from .plot_style import context, strategy_color  # noqa: E402

MARKERS = "os^vDP<>Xph*"
PANELS = (("GPU time per epoch (compute stream, CUDA events)", "predicted_gpu_ms", "gpu"),
          ("wall time per epoch (GPU prediction + measured host_ms)", "predicted_wall_ms",
           "wall"))


def plot_parity(comparisons: Sequence[Comparison], path: str | Path) -> Path | None:
    """Write the parity plot; None (nothing written) when no configuration was predicted."""
    shown = [c for c in comparisons if c.prediction is not None and not c.is_reference]
    if not shown:
        return None
    strategies = list(dict.fromkeys(c.group.key.strategy for c in shown))
    marker = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(strategies)}
    fig, axes = plt.subplots(1, 2, figsize=(13, 6.2), layout="constrained")
    any_hollow = False
    for ax, (title, attr, metric) in zip(axes, PANELS):
        values = []
        for c in shown:
            pred, meas = getattr(c, attr), getattr(c, metric)
            if pred is None or meas is None or pred <= 0 or meas.median <= 0:
                continue
            color = strategy_color(c.group.key.strategy)
            hollow = bool(meas.unstable)
            any_hollow |= hollow
            err = None
            if meas.ci is not None:
                err = [[meas.median - meas.ci.low], [meas.ci.high - meas.median]]
                values += [meas.ci.low, meas.ci.high]
            ax.errorbar(pred, meas.median, yerr=err, fmt=marker[c.group.key.strategy],
                        markersize=7, color=color, markerfacecolor="none" if hollow else color,
                        ecolor=color, elinewidth=0.8, capsize=2)
            values += [pred, meas.median]
        if not values:
            ax.set_title(f"{title}: nothing predicted", fontsize=10)
            continue
        lo, hi = min(values) / 1.5, max(values) * 1.5
        xs = [lo, hi]
        ax.fill_between(xs, [x / (1 + UNEXPLAINED) for x in xs],
                        [x / (1 - UNEXPLAINED) for x in xs], color="0.85", linewidth=0)
        ax.plot(xs, xs, color="0.3", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):   # 1, 2, 5, 10 ... in plain numbers
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FormatStrFormatter("%g"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("predicted ms per epoch")
        ax.set_ylabel("measured ms per epoch (median over processes)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], linestyle="none", marker=marker[s], color=strategy_color(s),
                      markersize=7) for s in strategies]
    labels = list(strategies)
    handles += [Line2D([], [], color="0.3", linestyle="--"), Patch(color="0.85")]
    labels += ["measured = predicted",
               f"|residual| <= {UNEXPLAINED:.0%} (outside: unexplained)"]
    if any_hollow:
        handles.append(Line2D([], [], linestyle="none", marker="o", color="0.2",
                              markerfacecolor="none"))
        labels.append("hollow: unstable (interval half-width > 5% of the median)")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(handles), 6),
               fontsize=8, frameon=False)
    groups = [c.group for c in shown]
    same_slice = len({g.key.slice_key() for g in groups}) == 1
    fig.suptitle("Cost model: predicted vs measured steady epoch (whiskers: 95% interval "
                 "over processes)\n" + (context(groups) if same_slice else
                                        "several configuration sets (GPU, hidden, GEMM ...)"),
                 fontsize=11)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
