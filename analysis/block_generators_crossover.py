"""The crossover block: where, along the hidden width, each strategy's data path stops mattering.

    <!-- generated:crossover from docs/results/nvidia-h200 -->

A wider hidden layer makes every step longer while a batch's bytes stay the same, so the
data-movement cost (the epoch minus resident's at the same launch form, step and batch:
aggregate.data_movement) shrinks against resident's epoch. Per strategy (naive and best form,
each at its own launch form), scenario and transfer, the block gives

- measured: the smallest width from which the cost's interval upper bound stays under SHARE of
  resident's epoch at the same form (each width's own resident), else "not yet at <largest>";
- predicted: the same from cost_model.predict with that width's C (resident's GPU time at the
  form) and the configuration's measured host time, as the model's wall prediction adds it;
- agreement: both crossings interpolated in log width (between the last width above SHARE and
  the first under it) and within AGREE of each other, or the residual (measured - predicted
  cost, in % of resident's epoch) at the measured crossing, or at the largest width.

Widths come from the configurations with one hidden layer (compute.toml sweeps them; 256 is
results.toml's); shapes with several layers are listed beside them. A set without at least two
widths says so and how to measure them: no number is invented. Registered with
analysis/block_generators.py's ``@generator`` under its rules.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from analysis import cost_model
from analysis.aggregate import (LAUNCH_FORMS, REFERENCE_STRATEGY, STRATEGY_ORDER, Group,
                                compute_reference, data_movement, variant_rank)
from analysis.block_generators import (FILTERS, BlockArgs, BlockError, data_as_marked, generator,
                                       key_fields)
from analysis.document import Doc
from analysis.primitives import PrimitiveTable
from analysis.results_set import ResultsSet
from analysis.stream import augment_label

SHARE = 0.05        # a data-movement cost under this share of resident's epoch: it stops mattering
AGREE = 0.15        # measured and predicted crossing widths closer than this: they agree
SCENARIOS = ("static", "refresh", "stream")
TRANSFERS = ("u8", "f32")
HOW_TO_MEASURE = ("the compute stage: `bash experiments/scripts/reproduce.sh --stages compute` "
                  "(experiments/matrix/matrices/compute.toml)")
NO_SWEEP = "not measured in this set"


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The configurations of one batch across hidden shapes, in one comparable slice."""
    groups: list[Group]
    widths: list[int]                  # one-hidden-layer widths, ascending
    deeper: list[tuple[int, ...]]      # shapes of several hidden layers

    @property
    def measured(self) -> bool:
        return len(self.widths) >= 2


def sweep(rs: ResultsSet, a: BlockArgs) -> Sweep:
    """The groups at the block's batch and filters over every hidden shape; BlockError when
    they span several slices other than the hidden shape (the marker must pick one)."""
    filters = {k: v for k, v in a.options.items() if k in FILTERS}
    # Augmentation on the GPU (stream.toml's cells at width 256 only) is no part of the sweep.
    groups = [g for g in rs.groups if g.key.batch == a.batch and g.key.scenario in SCENARIOS
              and all(key_fields(g.key).get(k) == v for k, v in filters.items())
              and data_as_marked(g, filters) and g.key.option("augment_device") != "gpu"]
    slices = {(k.gpu, k.gemm, k.epochs, k.slice_key()[4]) for k in (g.key for g in groups)}
    if len(slices) > 1:
        raise BlockError(f"the configurations at batch {a.batch} differ in more than the hidden "
                         "shape (GPU, GEMM, epochs or options): add a filter such as "
                         "gemm=cublas to the marker")
    shapes = {g.key.hidden for g in groups}
    return Sweep(groups, sorted(h[0] for h in shapes if len(h) == 1),
                 sorted(h for h in shapes if len(h) > 1))


def pipeline_of(g: Group) -> tuple:
    """The stream scenario's input pipeline (workers, slots, augmentation, "(GPU)" where the GPU
    augmented: stream.augment_label); () elsewhere."""
    k = g.key
    return (k.workers, k.prefetch, augment_label(k)) if k.scenario == "stream" else ()


def swept_pipeline(groups: Sequence[Group], strategy: str, transfer: str,
                   widths: Sequence[int]) -> tuple:
    """The stream pipeline the sweep ran the strategy with: the one held at the most widths
    (compute.toml runs one at every width; stream.toml varies it at 256 only), the most
    workers first."""
    seen: dict[tuple, set[int]] = {}
    for g in groups:
        k = g.key
        if (k.strategy == strategy and k.scenario == "stream" and k.transfer == transfer
                and len(k.hidden) == 1 and k.hidden[0] in widths):
            seen.setdefault(pipeline_of(g), set()).add(k.hidden[0])
    if not seen:
        return ()
    return max(seen, key=lambda p: (len(seen[p]), p[0] or 0, p))


def own_form(groups: Sequence[Group], strategy: str, scenario: str, transfer: str,
             hidden: tuple[int, ...], pipeline: tuple = ()) -> Group | None:
    """The strategy's configuration at its own launch form, at its defaults (the variant
    aggregate.variant_rank shows first); in the stream scenario, with the input pipeline
    given."""
    found = [g for g in groups if g.key.strategy == strategy and g.key.scenario == scenario
             and g.key.transfer == transfer and g.key.hidden == hidden
             and pipeline_of(g) == pipeline]
    return min(found, key=lambda g: variant_rank(g.key)) if found else None


@dataclasses.dataclass(frozen=True)
class Point:
    """One width of one strategy: the measured cost and the model's, as shares of resident's
    epoch at the same form."""
    width: int
    group: Group
    resident_ms: float                 # resident's median wall ms at the form
    share: float                       # measured cost's Hodges-Lehmann estimate / resident_ms
    share_high: float                  # its interval's upper bound / resident_ms
    predicted: float | None            # the model's cost / resident_ms
    no_model: str | None

    @property
    def under(self) -> bool:
        return self.share_high < SHARE


def point(groups: Sequence[Group], g: Group, width: int,
          tables: dict[str, PrimitiveTable]) -> Point | None:
    ref = compute_reference(groups, g)
    dm = data_movement(groups, g)
    if ref is None or dm is None or not ref.median("wall_ms"):
        return None
    w = ref.median("wall_ms")
    predicted, why = None, None
    try:
        pred = cost_model.predict_group(groups, g, tables)
        predicted = (pred.gpu_ms - pred.compute_ms + (g.median("host_ms") or 0.0)) / w
    except cost_model.NoModel as e:
        why = str(e)
    return Point(width, g, w, dm.estimate / w, dm.ci.high / w, predicted, why)


def crossing(points: Sequence[Point], shares: Sequence[float]) -> tuple[int, float] | None:
    """(the smallest measured width from which every share is under SHARE, that crossing
    interpolated in log width from the width before it), or None."""
    first = None
    for i in range(len(points) - 1, -1, -1):
        if shares[i] >= SHARE:
            break
        first = i
    if first is None:
        return None
    if first == 0:
        return points[0].width, float(points[0].width)
    lo, hi = points[first - 1], points[first]
    s_lo, s_hi = shares[first - 1], shares[first]
    t = min(1.0, max(0.0, (s_lo - SHARE) / (s_lo - s_hi))) if s_lo != s_hi else 1.0
    return hi.width, math.exp(math.log(lo.width) + t * (math.log(hi.width) - math.log(lo.width)))


def _pct(v: float) -> str:
    return f"{v * 100:+.1f}%" if abs(v) < 0.1 else f"{v * 100:+.0f}%"


def row(points: Sequence[Point], widths: Sequence[int]) -> list[str]:
    """[form, shares by width, measured, predicted, agreement] of one strategy."""
    forms = ", ".join(dict.fromkeys(LAUNCH_FORMS.get(p.group.key.epoch_form, p.group.key.epoch_form)
                                    for p in points))
    shares = " · ".join(f"{p.width}: {_pct(p.share)}" for p in points)
    largest = widths[-1]
    meas = crossing(points, [p.share_high for p in points])
    measured = f"{meas[0]}" + (" or less" if meas[0] == points[0].width else "") if meas \
        else f"not yet at {largest}"
    if len(points) < len(widths):
        missing = [w for w in widths if w not in {p.width for p in points}]
        measured += f" (no reference or run at {', '.join(map(str, missing))})"
    if any(p.predicted is None for p in points):
        why = next(p.no_model for p in points if p.predicted is None)
        return [forms, shares, measured, f"no model: {why}", "n/a"]
    pred = crossing(points, [p.predicted for p in points])
    predicted = (f"{pred[0]}" + (" or less" if pred[0] == points[0].width else "")
                 if pred else f"not yet at {largest}")
    at = next((p for p in points if meas and p.width == meas[0]), points[-1])
    residual = f"residual at {at.width}: {_pct(at.share - at.predicted)} of resident's epoch"
    if meas is None and pred is None:
        verdict = f"agree (neither under {SHARE:.0%}); {residual}"
    elif meas is not None and pred is not None and abs(pred[1] / meas[1] - 1) <= AGREE:
        verdict = f"agree (~{meas[1]:.0f} vs ~{pred[1]:.0f}); {residual}"
    else:
        verdict = "differ" + (f" (~{meas[1]:.0f} vs ~{pred[1]:.0f})"
                              if meas and pred else "") + f"; {residual}"
    return [forms, shares, measured, predicted, verdict]


@generator("crossover", defaults={"batch": 256})
def crossover(rs: ResultsSet, a: BlockArgs) -> str:
    """Per strategy, scenario and transfer: the hidden width from which its data-movement cost
    is under SHARE of resident's epoch, measured beside predicted."""
    if "hidden" in a.options:
        raise BlockError("crossover sweeps the hidden width: leave hidden= out of the marker")
    sw = sweep(rs, a)
    doc = Doc()
    if not sw.measured:
        have = ", ".join(map(str, sw.widths)) or "none"
        doc.p(f"Hidden-width crossover at batch {a.batch}: {NO_SWEEP} (one-layer widths held: "
              f"{have}); measure it with {HOW_TO_MEASURE}.")
        return doc.markdown()
    tables = PrimitiveTable.by_gpu(rs.primitives)
    strategies = [s for s in STRATEGY_ORDER if any(g.key.strategy == s for g in sw.groups)]
    for scenario in [s for s in SCENARIOS if a.scenario in (None, s)]:
        for transfer in [t for t in TRANSFERS if a.transfer in (None, t)]:
            rows = []
            pipes = {s: swept_pipeline(sw.groups, s, transfer, sw.widths)
                     if scenario == "stream" else () for s in strategies}
            for s in strategies:
                if s == REFERENCE_STRATEGY and scenario == "static":
                    continue                     # the reference itself: no cost by definition
                own = [g for w in sw.widths
                       if (g := own_form(sw.groups, s, scenario, transfer, (w,), pipes[s]))
                       is not None]
                pts = [p for g in own if (p := point(sw.groups, g, g.key.hidden[0], tables))]
                if pts:
                    rows.append([s, *row(pts, sw.widths)])
                elif own:
                    rows.append([s, LAUNCH_FORMS.get(own[0].key.epoch_form, ""),
                                 "no resident run at its form (no data-movement cost)", "n/a",
                                 "n/a", "n/a"])
            if rows:
                inputs = "".join(f"; {w} workers, {n} slots, {aug} augmentation"
                                 for w, n, aug in sorted({p for p in pipes.values() if p}))
                doc.p(f"**{scenario}, {transfer}** (batch {a.batch}; widths "
                      f"{', '.join(map(str, sw.widths))}{inputs})")
                doc.table(["strategy", "launch form", "data movement / resident's epoch, by "
                           "width", f"measured: under {SHARE:.0%} from width",
                           f"predicted: under {SHARE:.0%} from width", "agreement"], rows,
                          align="llllll")
    deeper = ", ".join("x".join(map(str, h)) for h in sw.deeper)
    doc.p(f"Data movement: the epoch minus resident's (static) at the same launch form, step, "
          f"batch and width (Hodges-Lehmann shift over processes), as a share of resident's "
          f"epoch there. Measured: the smallest width from which the shift's Moses interval "
          f"upper bound stays under {SHARE:.0%}. Predicted: analysis/cost_model.py with that "
          f"width's C (resident's GPU time at the form) plus the configuration's measured host "
          f"time. Agreement: both crossings interpolated in log width between the last width "
          f"above {SHARE:.0%} and the first under it, within {AGREE:.0%} of each other; the "
          f"residual is the measured share minus the predicted one."
          + (f" Shapes of several hidden layers ({deeper}) are not on this width axis: "
             f"`data-movement b{a.batch} u8 static hidden={deeper.split(', ')[0]}` shows "
             "one." if deeper else ""))
    return doc.markdown()
