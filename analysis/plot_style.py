"""What every memstrat figure shares: how a strategy is drawn (its colour, marker and line
style), the style constants (whiskers, floors, unstable marks), the labels that say what a
whisker is, the context line that names a figure's slice, the figure/panel/legend helpers, and
`save`, which writes every figure as PNG, SVG and PDF. The figures themselves are in
analysis/plots.py, analysis/parity_plot.py, analysis/timeline.py and (the stream scenario's)
analysis/stream.py.

Strategies: one hue per approach (a naive form and its best forms,
analysis/strategy_pairs.py), taken from matplotlib's 'petroff10' sequence (chosen for colour
vision deficiencies, M. A. Petroff 2021) in the sorted order of the approaches' names, so a
strategy has the same colour in every figure; the naive form is drawn with circles and solid
lines, a best form with squares and dashed lines. Twelve strategies stay apart: eight hues by
two forms.

Files: `save` writes <stem>.png at DPI, <stem>.svg and <stem>.pdf (fonts embedded as TrueType,
`pdf.fonttype` 42), with fixed metadata (no dates) and a fixed SVG hash salt, so that drawing
the same records twice gives the same bytes. It returns the PNG's path, which is what the
report links and embeds; the SVG and PDF lie beside it.
"""
from __future__ import annotations

import math
import textwrap
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import (FuncFormatter, LogLocator, NullFormatter,  # noqa: E402
                               NullLocator)

from .aggregate import STRATEGY_ORDER, Floor, Group, present  # noqa: E402
from .stats import (CONFIDENCE, MEDIAN_METHOD, MOSES_METHOD, Interval,  # noqa: E402
                    Summary, order_statistic_coverage)
from .strategy_pairs import IMPROVES, naive_form  # noqa: E402

# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------
DPI = 200
FORMATS = ("png", "svg", "pdf")
CREATOR = "memstrat analysis (matplotlib)"
# Read when a figure is saved: fonts embedded as TrueType (editable text in PDF), and the SVG
# ids derived from a fixed salt instead of a random one.
SAVE_RC = {"svg.hashsalt": "memstrat", "pdf.fonttype": 42, "ps.fonttype": 42,
           "svg.fonttype": "path"}
METADATA = {"png": {"Software": CREATOR},
            "svg": {"Creator": CREATOR, "Date": None},
            "pdf": {"Creator": CREATOR, "Producer": CREATOR, "CreationDate": None,
                    "ModDate": None}}


def save(fig, path: str | Path) -> Path:
    """Write `fig` as <stem>.png, <stem>.svg and <stem>.pdf, close it, return the PNG path."""
    png = Path(path).with_suffix(".png")
    png.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(SAVE_RC):
        for i, fmt in enumerate(FORMATS):
            fig.savefig(png.with_suffix("." + fmt), format=fmt, dpi=DPI,
                        metadata=METADATA[fmt])
            if i == 0:
                # The layout is solved once, for the first file; the others keep it (solving
                # it again per format costs as much as drawing, for the same positions).
                fig.set_layout_engine("none")
    plt.close(fig)
    return png


def companions(png: str | Path) -> list[Path]:
    """The files `save` wrote for the figure whose PNG is `png` (PNG, SVG, PDF)."""
    return [Path(png).with_suffix("." + fmt) for fmt in FORMATS]


# --------------------------------------------------------------------------------------
# Strategies: hue by approach, marker and line style by form
# --------------------------------------------------------------------------------------
PALETTE = tuple(matplotlib.colors.to_hex(c) for c in matplotlib.color_sequences["petroff10"]) \
    if "petroff10" in matplotlib.color_sequences else (
        "#3f90da", "#ffa90e", "#bd1f01", "#94a4a2", "#832db6", "#a96b59", "#e76300",
        "#b9ac70", "#717581", "#92dadd")
# The approaches: every naive form the analysis knows, sorted by name, one hue each.
APPROACHES = tuple(sorted({naive_form(s) for s in STRATEGY_ORDER} | set(IMPROVES.values())))
NAIVE_STYLE = {"marker": "o", "linestyle": "-"}
BEST_STYLES = ({"marker": "s", "linestyle": "--"}, {"marker": "D", "linestyle": "-."},
               {"marker": "^", "linestyle": ":"})


def _approach_color(approach: str) -> str:
    if approach in APPROACHES:
        return PALETTE[APPROACHES.index(approach) % len(PALETTE)]
    spare = PALETTE[len(APPROACHES):] or PALETTE          # approaches added later
    return spare[zlib.crc32(approach.encode()) % len(spare)]


def strategy_style(name: str) -> dict:
    """{'color', 'marker', 'linestyle'} of a strategy: its approach's hue; circles and solid
    lines for a naive form, squares and dashed lines (then diamonds, triangles) for its best
    forms."""
    approach = naive_form(name)
    style = dict(NAIVE_STYLE)
    if approach != name:
        best = sorted(b for b, n in IMPROVES.items() if n == approach)
        k = best.index(name) if name in best else len(best)
        style = dict(BEST_STYLES[k % len(BEST_STYLES)])
    style["color"] = _approach_color(approach)
    return style


def strategy_color(name: str) -> tuple:
    """The strategy's colour as an RGB tuple."""
    return matplotlib.colors.to_rgb(strategy_style(name)["color"])


def strategy_marker(name: str) -> str:
    return strategy_style(name)["marker"]


STRATEGY_COLORS = {s: strategy_color(s) for s in STRATEGY_ORDER}


def strategy_handle(name: str, line: bool = False) -> Line2D:
    """A legend handle: the strategy's marker (and its line style when `line`)."""
    st = strategy_style(name)
    return Line2D([], [], color=st["color"], marker=st["marker"], markersize=6,
                  linestyle=st["linestyle"] if line else "none", linewidth=1.4)


# --------------------------------------------------------------------------------------
# Other encodings
# --------------------------------------------------------------------------------------
# Batch size is ordinal: light to dark along 'cividis' (readable with colour vision
# deficiencies), with a marker each, so that it reads in grey too.
BATCH_MARKERS = ("v", "o", "^", "D", "P", "X")


def batch_colors(n: int) -> list[str]:
    cmap = matplotlib.colormaps["cividis"]
    if n <= 1:
        return [matplotlib.colors.to_hex(cmap(0.35))]
    return [matplotlib.colors.to_hex(cmap(0.72 - 0.72 * i / (n - 1))) for i in range(n)]


def batch_marker(i: int) -> str:
    return BATCH_MARKERS[i % len(BATCH_MARKERS)]


SCENARIO_ORDER = ("static", "refresh")
TRANSFER_ORDER = ("u8", "f32")
NA_COLOR = "0.45"
NEUTRAL = "0.25"            # legend handles that show a shape, not a strategy
UNSTABLE_HATCH = "xx"
UNSTABLE_MARK = {"marker": "x", "markersize": 8, "color": "black", "linestyle": "none",
                 "markeredgewidth": 1.2, "zorder": 5}
LOG_SPAN = 10.0          # max/min of the plotted values above which the axis is logarithmic
WHISKER = {"capsize": 2, "elinewidth": 0.8, "ecolor": "0.15"}
COMPUTE_FLOOR_STYLE = dict(color="0.45", linestyle="--", linewidth=1.1)
FLOOR_STYLE = dict(color="black", linestyle="-", linewidth=1.3)
SCENARIO_NOTE = {"static": "static data (never changes)",
                 "refresh": "refresh (host rewrites the data every epoch)"}
UNSTABLE_LABEL = "×: unstable (interval of ≥ 95% coverage, half-width > 5% of the median)"
RANGE_LABEL = "whisker: min–max over processes (a range, not an interval)"


# --------------------------------------------------------------------------------------
# What a whisker is
# --------------------------------------------------------------------------------------
def _cov(c: float) -> str:
    return Interval(0.0, 0.0, c).coverage_label()


def _first_n_with_target() -> int:
    """The fewest processes whose [min, max] reaches the target coverage (6 for 95%)."""
    n = 2
    while order_statistic_coverage(n, 1) < CONFIDENCE - 1e-12:
        n += 1
    return n


def interval_label(summaries: Iterable[Summary | None], what: str = "whisker",
                   of: str = "the median over processes") -> str | None:
    """What the drawn intervals are, with their exact coverage, built from the summaries whose
    intervals were drawn, e.g. 'whisker: order-statistic interval of the median over processes;
    coverage 97.85% (n = 10); [min, max] where n < 6: coverage 93.75% at n = 5'. None when
    nothing was drawn."""
    drawn = [s for s in summaries if s is not None]
    with_ci = [s for s in drawn if s.ci is not None]
    if not with_ci:
        return (f"{what}: none (fewer than 3 processes)" if drawn else None)
    methods = sorted({s.ci.method for s in with_ci})
    name = "; ".join({MEDIAN_METHOD: f"order-statistic interval of {of}",
                      MOSES_METHOD: "Moses interval of the Hodges-Lehmann estimate"}.get(m, m)
                     for m in methods)
    parts = []
    meets = sorted({(s.n, s.ci.coverage) for s in with_ci if s.ci.meets_target})
    if meets:
        ns = sorted({n for n, _ in meets})
        covs = sorted({c for _, c in meets})
        if len(ns) == 1:
            parts.append(f"coverage {_cov(covs[0])} (n = {ns[0]})")
        else:
            parts.append(f"coverage {_cov(covs[0])}–{_cov(covs[-1])} (n = {ns[0]}–{ns[-1]})")
    below = sorted({(s.n, s.ci.coverage) for s in with_ci if not s.ci.meets_target},
                   reverse=True)
    if below:
        parts.append(f"[min, max] where n < {_first_n_with_target()}: coverage "
                     + ", ".join(f"{_cov(c)} at n = {n}" for n, c in below))
    if len(with_ci) < len(drawn):
        parts.append("none below 3 processes")
    return f"{what}: {name}; " + "; ".join(parts)


# --------------------------------------------------------------------------------------
# Context, figures, panels
# --------------------------------------------------------------------------------------
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


def panel_grid(keys: Sequence, panel_w: float, panel_h: float,
               rows: Sequence | None = None, cols: Sequence | None = None):
    """A figure with one panel per key (only keys that have data: no empty panels). With
    `rows` x `cols` given and every combination present, a rows x cols grid; otherwise the
    panels in reading order, at most two per row. Returns (fig, {key: axes})."""
    keys = list(keys)
    if rows and cols and len(keys) == len(rows) * len(cols) and \
            set(keys) == {(r, c) for r in rows for c in cols}:
        nrows, ncols = len(rows), len(cols)
        order = [(r, c) for r in rows for c in cols]
    else:
        ncols = 1 if len(keys) == 1 else 2
        nrows = math.ceil(len(keys) / ncols)
        order = keys
    fig, axes = _figure(nrows, ncols, panel_w, panel_h)
    out = {}
    for i, key in enumerate(order):
        out[key] = axes[i // ncols][i % ncols]
    for j in range(len(order), nrows * ncols):
        fig.delaxes(axes[j // ncols][j % ncols])
    return fig, out


def _legend_layout(labels: Sequence[str], width_in: float, ncol: int | None
                   ) -> tuple[int, list[str]]:
    """(columns, labels wrapped) so that no legend entry runs past `width_in` inches (9 pt
    text: ~0.062 in per character, plus ~0.75 in for the handle)."""
    for n in range(min(ncol or len(labels), len(labels)), 0, -1):
        chars = int(((width_in - 0.3) / n - 0.75) / 0.062)
        if max(len(l) for l in labels) <= chars:
            return n, list(labels)
    chars = max(30, int((width_in - 1.05) / 0.062))
    return 1, ["\n".join(textwrap.wrap(l, chars)) for l in labels]


def _finish(fig, path: Path, title: str, subtitle: str, handles, labels,
            ncol: int | None = None, key: tuple[list, list] | None = None) -> Path:
    """Title, subtitle, the legend below the panels (entries for what was drawn only; long
    ones wrapped to the figure's width) and, with `key`, a second legend right of the panels
    (the strategies' colours and markers); then `save`. Returns the PNG path."""
    # Wrap to the figure width (12 pt text: ~0.11 in per character) so nothing is cut off.
    fig_w = fig.get_size_inches()[0]
    chars = max(40, int(fig_w / 0.11))
    fig.suptitle("\n".join(textwrap.wrap(title, chars) + textwrap.wrap(subtitle, chars)),
                 fontsize=12)
    if key and key[0]:
        fig.legend(key[0], key[1], loc="outside right center", fontsize=9, frameon=False)
    if handles:
        n, wrapped = _legend_layout(labels, fig_w, ncol)
        fig.legend(handles, wrapped, loc="outside lower center", ncol=n, fontsize=9,
                   frameon=False)
    return save(fig, path)


def _panels(groups: Sequence[Group]):
    scen = present(groups, "scenario", SCENARIO_ORDER)
    trans = present(groups, "transfer", TRANSFER_ORDER)
    return scen, trans


def panel_keys(groups: Sequence[Group]) -> tuple[list[tuple[str, str]], list, list]:
    """((scenario, transfer) pairs that have groups, in order; scenarios; transfers)."""
    scen, trans = _panels(groups)
    have = {(g.key.scenario, g.key.transfer) for g in groups}
    return [(s, t) for s in scen for t in trans if (s, t) in have], scen, trans


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


def _plain(v: float, _pos=None) -> str:
    """Tick label in plain numbers: 0.5, 2, 10, 200, 1,000."""
    if v <= 0:
        return ""
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:g}"


def log_axis(ax, which: str = "y") -> None:
    """A logarithmic axis whose ticks read 1, 2, 5, 10, 20 ... in plain numbers (at least a
    few labelled ticks over any decade), minor ticks unlabelled."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    axis.set_minor_formatter(NullFormatter())


def _maybe_log(ax, values: Sequence[float], ratio: float = LOG_SPAN) -> bool:
    """Logarithmic value axis when the plotted values span more than `ratio`; for points and
    lines only (never under bars)."""
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > ratio:
        log_axis(ax, "y")
        return True
    return False


def no_minor_x(ax) -> None:
    ax.xaxis.set_minor_locator(NullLocator())


def _ci_err(s: Summary | None, scale: float = 1.0):
    """yerr for the interval of a median, or None without an interval."""
    if s is None or s.ci is None:
        return None
    return [[(s.median - s.ci.low) / scale], [(s.ci.high - s.median) / scale]]


def _range_err(values: Sequence[float], center: float, scale: float = 1.0):
    """yerr from the min to the max over processes (None with fewer than 2)."""
    if len(values) < 2:
        return None
    return [[max(0.0, center - min(values) / scale)],
            [max(0.0, max(values) / scale - center)]]


def point(ax, x: float, s: Summary, marker: str, color, size: float = 6.0,
          filled: bool = True) -> bool:
    """A median as a marker with its interval whisker; × over it when unstable. Returns
    whether it was unstable."""
    ax.errorbar(x, s.median, yerr=_ci_err(s), fmt=marker, markersize=size, color=color,
                markerfacecolor=color if filled else "white", markeredgecolor=color,
                **WHISKER)
    if s.unstable:
        ax.plot([x], [s.median], **UNSTABLE_MARK)
        return True
    return False


def _floor_lines(ax, x: float, width: float, f: Floor) -> list[float]:
    """Horizontal lines over one slot at its compute floor and its floor; the values
    drawn (so that the axis scaling sees them)."""
    drawn = []
    if f.compute_ms is not None:
        ax.plot([x - width / 2, x + width / 2], [f.compute_ms] * 2, **COMPUTE_FLOOR_STYLE)
        drawn.append(f.compute_ms)
    if f.floor_ms is not None:
        ax.plot([x - width / 2, x + width / 2], [f.floor_ms] * 2, **FLOOR_STYLE)
        drawn.append(f.floor_ms)
    return drawn


def floor_legend(has_floor: bool, has_compute_floor: bool):
    handles, labels = [], []
    if has_compute_floor:
        handles.append(Line2D([], [], **COMPUTE_FLOOR_STYLE))
        labels.append("compute floor (resident, static, same launch form)")
    if has_floor:
        handles.append(Line2D([], [], **FLOOR_STYLE))
        labels.append("floor: max(compute, transfer) overlapping / sum serial")
    return handles, labels


def legend_tail(summaries, unstable: bool, what: str = "whisker",
                of: str = "the median over processes"):
    """Legend entries for the whiskers drawn (method and coverage) and, if any, the × mark."""
    handles, labels = [], []
    label = interval_label(summaries, what, of)
    if label:
        handles.append(whisker_handle())
        labels.append(label)
    if unstable:
        handles.append(unstable_handle())
        labels.append(UNSTABLE_LABEL)
    return handles, labels


def whisker_handle() -> Line2D:
    return Line2D([], [], color="0.15", marker="|", markersize=10, linestyle="none",
                  markeredgewidth=0.8)


def unstable_handle() -> Line2D:
    return Line2D([], [], **{k: v for k, v in UNSTABLE_MARK.items() if k != "zorder"})


def _na(ax, x: float, text: str = "n/a", y: float | None = None) -> None:
    """Mark a missing/null value at the bottom of a slot."""
    if y is None:
        ax.annotate(text, (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7,
                    color=NA_COLOR, rotation=90)
    else:
        ax.annotate(text, (x, y), xytext=(0, 3), textcoords="offset points", ha="center",
                    va="bottom", fontsize=7, color=NA_COLOR, rotation=90)


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
