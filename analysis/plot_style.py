"""What every memstrat figure shares: the strategies' colours, the style constants (whiskers,
floors, hatching of unstable values), the context line that names a figure's slice, and the
figure/panel/legend helpers. The figures themselves are in analysis/plots.py (and the stream
scenario's in analysis/stream.py)."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .aggregate import STRATEGY_ORDER, Floor, Group, present  # noqa: E402
from .stats import Summary  # noqa: E402

DPI = 120
_TAB20 = matplotlib.colormaps["tab20"].colors  # 10 hues, each dark then light
_TAB10 = matplotlib.colormaps["tab10"].colors  # strategies not in STRATEGY_ORDER


def _strategy_colors() -> dict[str, tuple]:
    """A hue per naive strategy (dark), its best form the light shade of the same hue."""
    from .block_generators import IMPROVES
    colors: dict[str, tuple] = {}
    naive = [s for s in STRATEGY_ORDER if s not in IMPROVES]
    for i, s in enumerate(naive):
        colors[s] = _TAB20[(2 * i) % 20]
    for best, base in IMPROVES.items():
        colors[best] = _TAB20[(2 * naive.index(base) + 1) % 20]
    return colors


STRATEGY_COLORS = _strategy_colors()
BATCH_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d")
SCENARIO_ORDER = ("static", "refresh")
TRANSFER_ORDER = ("u8", "f32")
NA_COLOR = "0.45"
UNSTABLE_HATCH = "xx"
LOG_SPAN = 10.0          # max/min of the plotted values above which the axis is logarithmic
WHISKER = {"capsize": 2, "elinewidth": 0.8, "ecolor": "0.15"}
COMPUTE_FLOOR_STYLE = dict(color="0.35", linestyle="--", linewidth=1.1)
FLOOR_STYLE = dict(color="#7b2cbf", linestyle="-", linewidth=1.8)
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
    n = sorted({g.n_processes for g in groups})
    parts.append(f"{n[0]} process{'es' if n[0] != 1 else ''}/config" if len(n) == 1
                 else f"{n[0]}-{n[-1]} processes/config")
    prof = {g.timing_profiled for g in groups}
    parts.append("timing: profiler " + ("on" if prof == {True} else
                                        "off" if prof == {False} else "off/on (see tables)"))
    for name, value in extra.items():
        parts.append(f"{name.replace('_', ' ')} {value}")
    return " · ".join(parts)


def _figure(nrows: int, ncols: int, panel_w: float, panel_h: float):
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(max(8.0, panel_w * ncols), panel_h * nrows + 1.6))
    return fig, axes


def _finish(fig, path: Path, title: str, subtitle: str, handles, labels,
            ncol: int | None = None) -> Path:
    # Wrap to the figure width (12 pt text: ~0.11 in per character) so nothing is cut off.
    chars = max(40, int(fig.get_size_inches()[0] / 0.11))
    fig.suptitle("\n".join(textwrap.wrap(title, chars) + textwrap.wrap(subtitle, chars)),
                 fontsize=12)
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


def _maybe_log(ax, values: Sequence[float], ratio: float = LOG_SPAN) -> bool:
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > ratio:
        ax.set_yscale("log")
        return True
    return False


def _ci_err(s: Summary | None, scale: float = 1.0):
    """yerr for the bootstrap interval of a median, or None without an interval."""
    if s is None or s.ci is None:
        return None
    return [[(s.median - s.ci.low) / scale], [(s.ci.high - s.median) / scale]]


def _range_err(values: Sequence[float], center: float, scale: float = 1.0):
    """yerr from the min to the max over processes (None with fewer than 2)."""
    if len(values) < 2:
        return None
    return [[max(0.0, center - min(values) / scale)],
            [max(0.0, max(values) / scale - center)]]


def _bar(ax, x: float, s: Summary, width: float, color) -> None:
    """A median bar with its interval whisker, hatched when unstable."""
    ax.bar(x, s.median, width, color=color, yerr=_ci_err(s), error_kw=WHISKER,
           hatch=UNSTABLE_HATCH if s.unstable else None,
           edgecolor="0.1" if s.unstable else None, linewidth=0)


def _floor_lines(ax, x: float, width: float, f: Floor) -> list[float]:
    """Horizontal lines over one bar slot at its compute floor and its floor; the values
    drawn (so that the axis scaling sees them)."""
    drawn = []
    if f.compute_ms is not None:
        ax.plot([x - width / 2, x + width / 2], [f.compute_ms] * 2, **COMPUTE_FLOOR_STYLE)
        drawn.append(f.compute_ms)
    if f.floor_ms is not None:
        ax.plot([x - width / 2, x + width / 2], [f.floor_ms] * 2, **FLOOR_STYLE)
        drawn.append(f.floor_ms)
    return drawn


def _common_legend(has_floor: bool, has_compute_floor: bool):
    handles = [Line2D([], [], color="0.15", marker="_", markersize=10, linewidth=0.8),
               Patch(facecolor="white", hatch=UNSTABLE_HATCH, edgecolor="0.1")]
    labels = ["whisker: 95% interval of the median over processes (none: < 3 processes)",
              "hatched: unstable (interval half-width > 5% of the median)"]
    if has_compute_floor:
        handles.append(Line2D([], [], **COMPUTE_FLOOR_STYLE))
        labels.append("compute floor (resident, static, same launch form)")
    if has_floor:
        handles.append(Line2D([], [], **FLOOR_STYLE))
        labels.append("floor: max(compute, transfer) overlapping / sum serial")
    return handles, labels


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
