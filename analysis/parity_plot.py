"""The cost model's parity plot: predicted vs measured ms per epoch (analysis/cost_model.py).

One row of panels per batch size, GPU time on the left and wall time on the right, log-log;
the line y = x and the band in which |residual| = |measured - predicted| / measured <= the
cost model's limit for "unexplained" (measured between predicted / (1 + limit) and
predicted / (1 - limit)). Each point is one configuration: colour = the strategy's approach,
marker = naive (circle) or best form (square), filled = u8 transfer, hollow = f32; whiskers:
the measured median's interval over processes (method and coverage in the legend); ×:
unstable. The compute-only reference itself is left out (its prediction is its measurement).

This module does not import analysis/cost_model.py (which imports it to write the figure):
it reads the comparisons' attributes (prediction, is_reference, group, predicted_gpu_ms, gpu,
predicted_wall_ms, wall), and the band comes as an argument.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .aggregate import present, strategies_in  # noqa: E402
from .plot_style import (NEUTRAL, TRANSFER_ORDER, UNSTABLE_MARK, _figure,  # noqa: E402
                         _finish, context, legend_tail, log_axis, strategy_handle,
                         strategy_style)

# cost_model.UNEXPLAINED, for callers that do not pass the band (a test keeps them equal).
DEFAULT_BAND = 0.25
PANELS = (("GPU time per epoch (compute stream, CUDA events)", "predicted_gpu_ms", "gpu"),
          ("wall time per epoch (GPU prediction + measured host_ms)", "predicted_wall_ms",
           "wall"))
# Transfer -> marker fill: u8 filled, f32 hollow (others half-filled).
FILL = {"u8": "full", "f32": "none"}


def _fill(transfer: str) -> str:
    return FILL.get(transfer, "left")


def plot_parity(comparisons: Sequence[Any], path: str | Path,
                band: float | None = None) -> Path | None:
    """Write the parity plot (PNG, SVG, PDF); None (nothing written) when no configuration
    was predicted. `band`: the |residual| limit drawn as the grey band (cost_model passes
    UNEXPLAINED)."""
    band = DEFAULT_BAND if band is None else band
    shown = [c for c in comparisons if c.prediction is not None and not c.is_reference]
    if not shown:
        return None
    groups = [c.group for c in shown]
    batches = present(groups, "batch")
    strategies = strategies_in(groups)
    fig, axes = _figure(len(batches), 2, 6.2, 4.4)
    any_unstable = False
    measured, transfers_drawn, names_drawn = [], set(), set()
    for r, b in enumerate(batches):
        for col, (title, attr, metric) in enumerate(PANELS):
            ax = axes[r][col]
            values = []
            for c in shown:
                k = c.group.key
                if k.batch != b:
                    continue
                pred, meas = getattr(c, attr), getattr(c, metric)
                if pred is None or meas is None or pred <= 0 or meas.median <= 0:
                    continue
                st = strategy_style(k.strategy)
                err = None
                if meas.ci is not None:
                    err = [[meas.median - meas.ci.low], [meas.ci.high - meas.median]]
                    values += [meas.ci.low, meas.ci.high]
                ax.errorbar(pred, meas.median, yerr=err, fmt=st["marker"], markersize=6.5,
                            color=st["color"], fillstyle=_fill(k.transfer),
                            markerfacecoloralt="white", markeredgewidth=1.1,
                            ecolor=st["color"], elinewidth=0.8, capsize=2)
                if meas.unstable:
                    any_unstable = True
                    ax.plot([pred], [meas.median], **UNSTABLE_MARK)
                values += [pred, meas.median]
                measured.append(meas)
                transfers_drawn.add(k.transfer)
                names_drawn.add(k.strategy)
            if not values:
                ax.set_title(f"batch {b}: {title}: nothing predicted", fontsize=10)
                ax.set_axis_off()
                continue
            lo, hi = min(values) / 1.3, max(values) * 1.3
            xs = [lo, hi]
            ax.fill_between(xs, [x / (1 + band) for x in xs],
                            [x / (1 - band) for x in xs], color="0.88", linewidth=0,
                            zorder=0)
            ax.plot(xs, xs, color="0.3", linestyle="--", linewidth=1, zorder=1)
            log_axis(ax, "x")
            log_axis(ax, "y")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.set_xlabel("predicted ms per epoch")
            ax.set_ylabel("measured ms per epoch\n(median over processes)")
            ax.set_title(f"batch {b}: {title}", fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
    shown_names = [s for s in strategies if s in names_drawn]
    key = ([strategy_handle(s) for s in shown_names], list(shown_names))
    handles, labels = [], []
    for t in [t for t in TRANSFER_ORDER if t in transfers_drawn] + \
            sorted(transfers_drawn - set(TRANSFER_ORDER)):
        handles.append(Line2D([], [], linestyle="none", marker="o", color=NEUTRAL,
                              fillstyle=_fill(t), markerfacecoloralt="white"))
        labels.append({"full": "filled", "none": "hollow"}.get(_fill(t), "half-filled")
                      + f": {t} transfer")
    handles += [Line2D([], [], color="0.3", linestyle="--"), Patch(color="0.88")]
    labels += ["measured = predicted",
               f"|residual| <= {band:.0%} (outside: unexplained)"]
    tail_h, tail_l = legend_tail(measured, any_unstable)
    handles, labels = handles + tail_h, labels + tail_l
    same_slice = len({g.key.slice_key() for g in groups}) == 1
    return _finish(fig, path, "Cost model: predicted vs measured steady epoch, per batch size",
                   context(groups) if same_slice else
                   "several configuration sets (GPU, hidden, GEMM ...)", handles, labels,
                   ncol=2, key=key)
