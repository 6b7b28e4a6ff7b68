"""The summary block: one table, one row per scenario and launch form at one batch and
transfer, for the one-page summary that opens docs/strategies.md.

    <!-- generated:summary b256 u8 from docs/results/nvidia-h200 -->

Static and refresh: a row per launch form the scenario ran, with the compute-only reference
(resident, static, at that form) and the fastest data-moving configurations at the same form
(`fastest_text`: rank 1 of Holm-corrected tests over the form's configurations). Stream: a row
per augmentation, each strategy at its fastest worker count, ranked the same way. Registered
with analysis/block_generators.py's ``@generator`` under its rules (numbers with interval and n,
order only from tests, NOT_MEASURED for what the set does not hold).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from analysis.aggregate import LAUNCH_FORM_ORDER, LAUNCH_FORMS, REFERENCE_STRATEGY, Group
from analysis.block_generators import (NOT_MEASURED, STREAM_SLICE_IGNORES, BlockArgs,
                                       BlockError, generator, group_value, pick, pooling_notes,
                                       select)
from analysis.block_generators_ranking import fastest_text, movement_clause
from analysis.document import Doc
from analysis.results_set import ResultsSet
from analysis.stream import ordered_curves, stream_points

NO_REFERENCE = "no resident run at this form"
SHORT_POWER_NOTE = "too few processes for any pair to be significant after Holm's correction"


def _form(groups: Sequence[Group]) -> str:
    forms = sorted({g.key.epoch_form for g in groups},
                   key=lambda f: LAUNCH_FORM_ORDER.index(f) if f in LAUNCH_FORM_ORDER else 99)
    return ", ".join(LAUNCH_FORMS.get(f, f) for f in forms)


def _reference(static: Sequence[Group], form: str) -> str:
    ref = pick([g for g in static if g.key.epoch_form == form], REFERENCE_STRATEGY)
    return group_value(ref) if ref is not None else NO_REFERENCE


@generator("summary", defaults={"batch": 256, "transfer": "u8"})
def summary(rs: ResultsSet, a: BlockArgs) -> str:
    """Per scenario (static, refresh: per launch form; stream: per augmentation) the
    compute-only reference and the fastest data-moving configurations, with their
    data-movement cost where a reference exists."""
    if a.scenario is not None:
        raise BlockError("summary covers every scenario: give a batch and a transfer only "
                         "(e.g. `summary b256 u8`)")
    static = select(rs, dataclasses.replace(a, scenario="static"))
    rows, shown = [], []
    for scenario in ("static", "refresh"):
        groups = static if scenario == "static" else select(
            rs, dataclasses.replace(a, scenario=scenario))
        for form in [f for f in LAUNCH_FORM_ORDER if any(g.key.epoch_form == f for g in groups)]:
            at = [g for g in groups if g.key.epoch_form == form]
            moving = [g for g in at
                      if not (scenario == "static" and g.key.strategy == REFERENCE_STRATEGY)]
            shown += moving
            rows.append([scenario, LAUNCH_FORMS.get(form, form), _reference(static, form),
                         fastest_text(moving, lambda g: f"{g.key.variant_label} "
                                      f"{group_value(g)}{movement_clause(rs.groups, g)}",
                                      power_note=SHORT_POWER_NOTE)])
    points = stream_points(select(rs, dataclasses.replace(a, scenario="stream"),
                                  STREAM_SLICE_IGNORES))
    by_augment: dict[str, list[Group]] = {}
    for (augment, _), curve in ordered_curves(points):
        timed = [p for p in curve if p.epoch_ms is not None]
        if timed:
            best = min(timed, key=lambda p: p.epoch_ms.median)
            by_augment.setdefault(augment, []).append(best.group)
    for augment, best in by_augment.items():
        shown += best
        form = _form(best)
        label = (lambda g: f"{g.key.variant_label} {group_value(g)}")  # names the workers
        rows.append([f"stream, {augment} augmentation", form,
                     _reference(static, best[0].key.epoch_form) if len(
                         {g.key.epoch_form for g in best}) == 1 else NO_REFERENCE,
                     fastest_text(best, lambda g: label(g) + movement_clause(rs.groups, g), label,
                                  SHORT_POWER_NOTE)])
    doc = Doc()
    if not rows:
        doc.p(f"At batch {a.batch}, {a.transfer}: {NOT_MEASURED}.")
        return doc.markdown()
    doc.table(["scenario", "launch form", "resident (static) at this form",
               "data-moving configurations, ms per epoch"], rows, align="llll")
    doc.p(f"At batch {a.batch}, {a.transfer}; ms per epoch, wall clock. Resident (static) moves "
          "no byte: its time is what the launch form and the step cost. Data movement: the epoch "
          "minus resident's (static) at the same launch form, step and batch (Hodges-Lehmann "
          "shift over processes, Moses interval). Fastest: rank 1 of two-sided Mann-Whitney "
          "tests, Holm-corrected over the row's configurations; in the stream scenario each "
          "strategy at the worker count with its lowest median.")
    doc.ul(pooling_notes(shown))
    return doc.markdown()
