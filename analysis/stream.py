"""The stream scenario's part of the report: epoch time and starvation against the number of
host workers, per strategy and augmentation, and the worker count at which each strategy
stops starving. Definitions (docs/methodology.md, "The stream scenario's measures"):

- starvation of an epoch = (input_wait_ms - input_wait_first_ms) / wall_ms: the share of the
  epoch the trainer blocked waiting for a batch the workers had not finished, the pipeline
  fill at the epoch's first batch left out (it is reported apart, as `fill`);
- per process the median over its steady epochs, per configuration the median over
  processes with its order-statistic interval (analysis/stats.py), as for epoch time;
- a configuration starves when its starvation is at or above STARVATION_LIMIT (5%);
- a strategy stops starving at w workers (per augmentation and input settings) when w is the
  smallest measured worker count such that it and every larger measured count do not starve.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from .aggregate import Group, steady_epochs, strategies_in
from .document import Doc, also_as, fmt_num
from .stats import Summary, describe_interval, summarize

STREAM = "stream"
STARVATION_LIMIT = 0.05
AUGMENT_ORDER = ("none", "light", "heavy", "light (GPU)", "heavy (GPU)")
GPU_AUGMENT = " (GPU)"  # the label's suffix where the GPU augmented (config.augment_device gpu)
CAPTION = ("Top: wall-clock ms per epoch; bottom: starvation, the share of the epoch the "
           "trainer waited for a batch the host workers had not finished (the first batch's "
           "wait, filling the pipeline, left out). Per process the median of its steady "
           "epochs, per point the median over processes; whiskers: the order-statistic "
           "interval of that median (coverage at least 95% from 6 processes on; none below "
           "3). Dotted line: the 5% below which a strategy "
           "no longer starves.")


def is_stream(g: Group) -> bool:
    return g.key.scenario == STREAM


def starvation_share(epoch: dict[str, Any]) -> float | None:
    """(input_wait_ms - input_wait_first_ms) / wall_ms of one epoch; None when not measured."""
    wait, first, wall = (epoch.get(k) for k in ("input_wait_ms", "input_wait_first_ms",
                                                 "wall_ms"))
    if wait is None or first is None or not wall or wall <= 0:
        return None
    return max(wait - first, 0.0) / wall


def process_starvation(record: dict[str, Any]) -> float | None:
    vals = sorted(v for v in map(starvation_share, steady_epochs(record)) if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def augment_label(key: Any) -> str:
    """A stream configuration's augmentation as tables name it: "light", or "light (GPU)" where
    the GPU augmented each batch (--augment-device gpu): a configuration of its own, its curve
    never merged with the host's."""
    label = str(key.augment)
    return label + GPU_AUGMENT if key.option("augment_device") == "gpu" else label


def augmented_on_gpu(label: str) -> bool:
    return label.endswith(GPU_AUGMENT)


@dataclasses.dataclass
class StreamPoint:
    """One stream configuration (one strategy, augmentation and worker count)."""
    group: Group
    epoch_ms: Summary | None
    starvation: Summary | None

    @property
    def strategy(self) -> str:
        return self.group.key.strategy

    @property
    def workers(self) -> int:
        return int(self.group.key.workers or 0)

    @property
    def augment(self) -> str:
        return augment_label(self.group.key)

    @property
    def starves(self) -> bool | None:
        return None if self.starvation is None else self.starvation.median >= STARVATION_LIMIT


def stream_points(groups: Sequence[Group]) -> list[StreamPoint]:
    out = []
    for g in groups:
        if not is_stream(g) or g.key.workers is None:
            continue
        shares = [v for v in map(process_starvation, g.timing_records) if v is not None]
        out.append(StreamPoint(g, g.stat("wall_ms"), summarize(shares)))
    return out


def stream_sets(points: Sequence[StreamPoint]) -> list[list[StreamPoint]]:
    """Points that belong in one figure: the same GPU, transfer, batch, slots and options."""
    sets: dict[tuple, list[StreamPoint]] = {}
    for p in points:
        k = p.group.key
        sets.setdefault((k.slice_key(), k.transfer, k.batch, k.prefetch), []).append(p)
    return list(sets.values())


def curves(points: Sequence[StreamPoint]) -> dict[tuple[str, str], list[StreamPoint]]:
    """(augment, strategy) -> its points by increasing worker count."""
    out: dict[tuple[str, str], list[StreamPoint]] = {}
    for p in sorted(points, key=lambda p: p.workers):
        out.setdefault((p.augment, p.strategy), []).append(p)
    return out


def stops_starving(curve: Sequence[StreamPoint]) -> StreamPoint | None:
    """The point with the fewest workers from which on (it and every point with more workers)
    the strategy does not starve; None when it still starves at the most workers measured, or
    when starvation was not measured at some worker count above it."""
    found = None
    for p in sorted(curve, key=lambda p: p.workers, reverse=True):
        if p.starves is not False:
            break
        found = p
    return found


def ordered_curves(points: Sequence[StreamPoint]
                   ) -> list[tuple[tuple[str, str], list[StreamPoint]]]:
    """curves() in the order tables list them: by augmentation (AUGMENT_ORDER), then
    strategy."""
    augments = _augments(points)
    return sorted(curves(points).items(), key=lambda kv: (augments.index(kv[0][0]), kv[0][1]))


def _augments(points: Sequence[StreamPoint]) -> list[str]:
    present = {p.augment for p in points}
    return [a for a in AUGMENT_ORDER if a in present] + sorted(present - set(AUGMENT_ORDER))


def plot_stream(points: Sequence[StreamPoint], path: Path, title: str) -> Path | None:
    """Epoch time (top) and starvation (bottom, left out when no point measured it) against
    workers, one column per augmentation, one line per strategy (plot_style.strategy_style);
    whiskers: the interval of the median over processes (method and coverage in the legend);
    ×: unstable epoch time. Writes PNG, SVG and PDF; returns the PNG path."""
    if not points:
        return None
    from .plot_style import (UNSTABLE_MARK, _figure, _finish, _maybe_log, legend_tail,
                             no_minor_x, strategy_handle, strategy_style)
    augments = _augments(points)
    with_starvation = any(p.starvation for p in points)
    fig, axes = _figure(2 if with_starvation else 1, len(augments), 5.0, 3.4)
    by_curve = curves(points)
    drawn: set[str] = set()
    summaries: list[Summary] = []
    any_unstable = False
    for col, aug in enumerate(augments):
        top = axes[0][col]
        bottom = axes[1][col] if with_starvation else None
        rows = ((top, "epoch_ms", 1.0),) + (((bottom, "starvation", 100.0),)
                                            if with_starvation else ())
        for (a, strategy), curve in by_curve.items():
            if a != aug:
                continue
            st = strategy_style(strategy)
            for ax, attr, scale in rows:
                pts = [(p.workers, getattr(p, attr)) for p in curve if getattr(p, attr)]
                if not pts:
                    continue
                xs = [w for w, _ in pts]
                ys = [s.median * scale for _, s in pts]
                err = [[(s.median - s.ci.low) * scale if s.ci else 0 for _, s in pts],
                       [(s.ci.high - s.median) * scale if s.ci else 0 for _, s in pts]]
                ax.errorbar(xs, ys, yerr=err, marker=st["marker"], markersize=4,
                            color=st["color"], linestyle=st["linestyle"], capsize=2,
                            linewidth=1.2, elinewidth=0.8)
                summaries += [s for _, s in pts]
                drawn.add(strategy)
                if attr == "epoch_ms":
                    bad = [(w, y) for (w, s), y in zip(pts, ys) if s.unstable]
                    if bad:
                        any_unstable = True
                        ax.plot(*zip(*bad), **UNSTABLE_MARK)
        _maybe_log(top, [p.epoch_ms.median for p in points if p.augment == aug and p.epoch_ms])
        top.set_title(f"--augment {aug.removesuffix(GPU_AUGMENT)}"
                      + (" --augment-device gpu" if augmented_on_gpu(aug) else ""))
        top.set_ylabel("ms per epoch")
        if bottom is not None:
            bottom.axhline(STARVATION_LIMIT * 100, color="0.3", linestyle=":", linewidth=1.0)
            bottom.set_ylabel("starvation, % of the epoch")
            bottom.set_ylim(bottom=0)
        for ax, _, _ in rows:
            ax.set_xscale("log", base=2)
            ticks = sorted({p.workers for p in points if p.augment == aug})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(t) for t in ticks])
            no_minor_x(ax)
            ax.set_xlabel("host workers (--workers)")
            ax.grid(alpha=0.3)
            ax.set_axisbelow(True)
    names = [s for s in strategies_in([p.group for p in points]) if s in drawn]
    key = ([strategy_handle(s, line=True) for s in names], list(names))
    handles, labels = legend_tail(summaries, any_unstable)
    if with_starvation:
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], color="0.3", linestyle=":", linewidth=1.0))
        labels.append(f"starvation {STARVATION_LIMIT:.0%}: below it a strategy no longer starves")
    return _finish(fig, path, "Stream scenario: epoch time and starvation vs host workers",
                   title, handles, labels, key=key)


def _pct(s: Summary | None) -> str:
    if s is None:
        return "n/a"
    text = f"{100 * s.median:.1f}%"
    if s.ci is not None:
        text += f" [{100 * s.ci.low:.1f}-{100 * s.ci.high:.1f}%]"
        if not s.ci.meets_target:
            text += f" {s.ci.coverage_label()}"
    return text


def stop_table(points: Sequence[StreamPoint]) -> tuple[list[str], list[list[str]]]:
    """Per (augmentation, strategy): where it stops starving, and what it costs there."""
    headers = ["augment", "strategy", "stops starving at", "starvation there [interval]",
               "ms/epoch there", "starvation at fewest workers", "note"]
    rows = []
    for (aug, strategy), curve in ordered_curves(points):
        if augmented_on_gpu(aug) and all(p.group.median("producer_samples_per_s") is None
                                         for p in curve):
            # resident, zero-copy, the um family: the GPU gathers, no host worker to wait for
            rows.append([aug, strategy, "no host worker (the GPU gathers)", "n/a",
                         fmt_num(curve[0].epoch_ms.median) if curve[0].epoch_ms else "n/a",
                         "n/a", ""])
            continue
        stop = stops_starving(curve)
        first = curve[0]
        note = ""
        if stop is not None and stop.starvation and stop.starvation.ci \
                and stop.starvation.ci.high >= STARVATION_LIMIT:
            note = "interval reaches 5%"
        elif stop is None and curve[-1].starvation is None:
            note = "starvation not measured"
        rows.append([aug, strategy,
                     f"{stop.workers} workers" if stop else
                     f"not within {curve[-1].workers} workers",
                     _pct(stop.starvation) if stop else _pct(curve[-1].starvation),
                     fmt_num(stop.epoch_ms.median) if stop and stop.epoch_ms else "n/a",
                     f"{_pct(first.starvation)} at {first.workers}", note])
    return headers, rows


def detail_rows(points: Sequence[StreamPoint]) -> list[list[Any]]:
    rows = []
    for p in sorted(points, key=lambda p: (_augments(points).index(p.augment), p.strategy,
                                           p.workers)):
        g = p.group
        rows.append([p.augment, p.strategy, p.workers, g.key.prefetch,
                     fmt_num(p.epoch_ms.median) if p.epoch_ms else "n/a",
                     describe_interval(p.epoch_ms), _pct(p.starvation),
                     fmt_num(g.median("input_wait_first_ms")),
                     fmt_num(g.median("slot_wait_ms")),
                     fmt_num(g.median("producer_samples_per_s")),
                     fmt_num(g.median("producer_worker_samples_per_s")),
                     g.n_processes])
    return rows


def _sets(groups: Sequence[Group]) -> list[tuple[list, str, str]]:
    """(points, what they share, figure suffix) per stream set among `groups`."""
    from .plot_style import context
    sets = stream_sets(stream_points(groups))
    out = []
    for i, part in enumerate(sets):
        k = part[0].group.key
        what = context([p.group for p in part], transfer=k.transfer, batch=k.batch,
                       slots=k.prefetch)
        out.append((part, what, "" if len(sets) == 1 else f"_{i + 1}"))
    return out


def figure_jobs(groups: Sequence[Group], plots_dir: Path) -> list[tuple]:
    """The stream section's figures as (function, args, kwargs) jobs (analysis/figure_pool.py),
    in the order `section` takes their results."""
    return [(plot_stream, (part, plots_dir / f"stream_workers{suffix}.png", what), {})
            for part, what, suffix in _sets(groups)]


def section(doc: Doc, groups: Sequence[Group], plots_dir: Path, level: int = 2,
            pngs: Sequence[Path | None] | None = None) -> list[Path]:
    """The report's stream section for the stream groups among `groups`; the PNGs written.
    `pngs`: the figures already drawn from figure_jobs (else they are drawn here)."""
    points = stream_points(groups)
    if not points:
        return []
    doc.h(level, "Stream scenario: the input pipeline")
    doc.ul([
        "Host worker threads (`--workers`) produce each batch just in time, a gather of the "
        "epoch's fresh permutation augmented per `--augment` (light: the +-2 px shift; heavy: "
        "an affine warp), into `--prefetch` slots of the strategy's own memory; "
        "docs/strategies.md describes each strategy's hand-off.",
        "**Starvation** is the share of an epoch the trainer waited for a batch the workers "
        "had not finished, the first batch's wait (filling the pipeline) left out; a "
        f"strategy **stops starving** at the fewest workers from which on it stays below "
        f"{STARVATION_LIMIT:.0%} (docs/methodology.md). **Back-pressure** (slot wait) is "
        "the time workers waited for a slot the GPU had not handed back: workers are "
        "ahead, the consumer sets the pace.",
        "More workers cannot make an epoch shorter than the strategy's own transfer and "
        "compute: once starvation is gone, the epoch time is the strategy's, as in the "
        "other scenarios.",
    ])
    written = []
    sets = _sets(groups)
    if pngs is None:
        pngs = [fn(*args, **kwargs) for fn, args, kwargs in figure_jobs(groups, plots_dir)]
    for i, ((part, what, _), png) in enumerate(zip(sets, pngs)):
        if len(sets) > 1:
            doc.h(level + 1, f"Stream set {i + 1}: {what}")
        if png is not None:
            written.append(png)
            doc.img(png, f"plots/{png.name}", "epoch time and starvation vs workers",
                    CAPTION + also_as(png))
        doc.h(level + 1, "Where each strategy stops starving")
        headers, rows = stop_table(part)
        doc.table(headers, rows, align="llllrll")
        doc.h(level + 1, "Every stream configuration")
        doc.table(["augment", "strategy", "workers", "slots", "ms/epoch", "interval",
                   "starvation", "fill ms", "slot wait ms", "samples/s (all)",
                   "samples/s (per worker)", "n"], detail_rows(part),
                  align="llrrrlrrrrrr")
    return written
