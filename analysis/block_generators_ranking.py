"""Generated blocks that compare configurations: the headline, the strategy table, naive vs
best form (with the best form's gain split into what its launch form saves and what its data
path saves), and the data-movement table (every strategy at every launch form it ran, against
resident at the same form).

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module), under the same rules: numbers with their interval and n, order only from
Holm-corrected pairwise tests, NOT_MEASURED for what the set does not hold.

    <!-- generated:headline from docs/results/nvidia-h200 -->
    <!-- generated:data-movement b256 u8 static from docs/results/nvidia-h200 -->
"""
from __future__ import annotations

from typing import Callable, Sequence

from analysis.aggregate import (LAUNCH_FORM_ORDER, LAUNCH_FORMS, REFERENCE_MISSING,
                                REFERENCE_STRATEGY, STRATEGY_ORDER, Group, compute_reference,
                                data_movement, floors, representative, variant_rank)
from analysis.block_generators import (HEADLINE, MIN_PROCESSES, NOT_MEASURED, RANK_RULE,
                                       BlockArgs, effect_text, generator, group_value, improves,
                                       holm_verdicts, ordered, pick, pooling_notes, rank_labels,
                                       select, wall)
from analysis.document import Doc, fmt_num
from analysis.results_set import ResultsSet
from analysis.stats import (UNSTABLE_HALF_WIDTH, Summary, family_can_order, ratio,
                            shift, stability_label)


@generator("headline", defaults=HEADLINE)
def headline(rs: ResultsSet, a: BlockArgs) -> str:
    """GPU, commit, date; then per launch form: resident at that form (no byte moves, so its
    time is what the form and the step cost) and the fastest data-moving strategies at the
    SAME form, each with its data-movement cost over resident there. Like with like only."""
    groups = select(rs, a)
    p = rs.provenance
    forms = [f for f in LAUNCH_FORM_ORDER if any(g.key.epoch_form == f for g in groups)]
    items, shown = [], []
    for form in forms:
        at = [g for g in groups if g.key.epoch_form == form]
        ref = pick(at, REFERENCE_STRATEGY)
        moving = [g for g in at if g.key.strategy != REFERENCE_STRATEGY]
        shown += at
        resident = (f"resident {group_value(ref)}" if ref is not None
                    else "no resident run at this form (no data-movement cost)")
        fastest = fastest_text(
            moving, lambda g: f"{g.key.variant_label} {group_value(g)}{movement_clause(at, g)}")
        items.append(f"**{LAUNCH_FORMS.get(form, form)}**: {resident}; {fastest}")
    if not items:
        items.append(NOT_MEASURED)
    items += pooling_notes(shown)
    doc = Doc()
    doc.p(f"**{p.gpu}**, {p.commit}, {p.date}; ms per epoch (wall clock) at {a.where()}, "
          "per launch form (how the host issues an epoch's steps: the same form on both sides "
          "of every comparison):")
    doc.ul(items)
    doc.p("Data movement: the epoch minus resident's at the same launch form, step and batch "
          "(Hodges-Lehmann shift over processes, Moses interval).")
    return doc.markdown()


def fastest_text(moving: Sequence[Group], describe: Callable[[Group], str],
                 describe_unranked: Callable[[Group], str] | None = None,
                 power_note: str = "") -> str:
    """'fastest data-moving: A; B (not significantly different: listed by median)': the
    rank-1 configurations of `moving` (Holm-corrected tests over its pairs), at most
    HEADLINE_LISTED named by `describe(group)`, the rest counted; or, with too few processes
    to rank, each named by `describe_unranked` (default: its label and value). Where no pair
    can be significant with these process counts, `power_note` (default POWER_NOTE) says so."""
    ranked, loose = ordered(moving)
    top = [g for rank, g in ranked if rank == 1]
    if top:
        listed = top[:HEADLINE_LISTED]
        more = len(top) - len(listed)
        return ("fastest data-moving: " + "; ".join(describe(g) for g in listed)
                + (f"; and {more} more" if more else "")
                + (" (not significantly different: listed by median"
                   + ("" if can_order([g for _, g in ranked])
                      else f"; {power_note or POWER_NOTE}") + ")"
                   if len(top) > 1 else ""))
    if moving:
        unranked = describe_unranked or (lambda g: f"{g.key.variant_label} {group_value(g)}")
        return ("data-moving: " + "; ".join(unranked(g) for g in loose)
                + " (too few processes to order)")
    return "no data-moving strategy at this form"


HEADLINE_LISTED = 3      # rank-1 configurations named in the headline; the rest counted
POWER_NOTE = ("with these process counts no pair can be significant after Holm's correction "
              "over the form's pairs")


def can_order(groups: Sequence[Group]) -> bool:
    return family_can_order([len(g.process_values("wall_ms")) for g in groups])


def movement_text(groups: Sequence[Group], g: Group) -> str | None:
    """'+0.21 ms [0.19, 0.23]': g's data-movement cost, signed; None without a compute-only
    reference at g's form."""
    dm = data_movement(groups, g)
    if dm is None:
        return None
    return effect_text(dm, " ms", signed=True)


def movement_clause(groups: Sequence[Group], g: Group) -> str:
    """', data movement +0.21 ms [0.19, 0.23]' or '' without a reference at g's form."""
    text = movement_text(groups, g)
    return f", data movement {text}" if text else ""


def _floor_cells(g: Group, floor, ms: Summary | None) -> tuple[str, str]:
    if floor.floor_ms is None:
        if any(r.startswith("no measured pinned") for r in floor.reasons):
            why = "pinned bandwidth not measured"
        else:
            why = "; ".join("no compute-only reference" if r == REFERENCE_MISSING else r
                            for r in floor.reasons) or "unknown"
        return f"no floor: {why}", "n/a"
    ratio = floor.gpu_ratio(g)
    return fmt_num(floor.floor_ms), f"{fmt_num(ratio)}×" if ratio is not None else "n/a"


@generator("strategy-table", required=("batch", "transfer", "scenario"))
def strategy_table(rs: ResultsSet, a: BlockArgs) -> str:
    """One row per strategy (and variant): median [CI] n, tier, stability, floor, ratio to
    the floor, and the naive form a best form improves."""
    groups = select(rs, a)
    if not groups:
        return f"No configuration at {a.where()}: {NOT_MEASURED}."
    fl = floors(rs.groups, rs.rates)
    best_of = improves(rs)
    ranked, loose = ordered(groups)
    rows = []
    for rank, g in rank_labels(ranked, loose):
        floor_ms, ratio = _floor_cells(g, fl[g.key], wall(g))
        dm = data_movement(rs.groups, g)
        rows.append([g.key.variant_label, rank, group_value(g), stability_label(wall(g)),
                     effect_text(dm, " ms") if dm else "no resident run at this form",
                     floor_ms, ratio, best_of.get(g.key.strategy, "")])
    doc = Doc()
    doc.table(["strategy", "rank", "ms/epoch [interval], n", "stability",
               "data movement [interval]", "GPU floor ms", "GPU time/floor", "best form of"],
              rows, align="lllllrrl")
    notes = [RANK_RULE[0].upper() + RANK_RULE[1:] + ". UNSTABLE: a 95% interval whose "
             f"half-width is above {UNSTABLE_HALF_WIDTH:.0%} of the median (not assessed "
             "below 6 processes)."]
    if not can_order([g for _, g in ranked]):
        notes.append("With these process counts no pair of this table can be significant after "
                     "Holm's correction over its pairs (the smallest attainable two-sided p of "
                     "m and n processes is 2 / C(m+n, m)): every rank is 1.")
    if loose:
        notes.append(f"Rank none: {', '.join(g.key.variant_label for g in loose)}: fewer than "
                     f"{MIN_PROCESSES} processes, not tested, not ordered.")
    notes.append("Data movement: the epoch minus resident's (static) at the same launch form, "
                 "step and batch, wall with wall (Hodges-Lehmann shift over processes, Moses "
                 "interval); a form at which resident did not run has none.")
    if rs.pinned:
        sm = (f", sm-copy-mapped {rs.sm_mapped.gb_per_s:.1f} GB/s for the strategies whose "
              "SMs read mapped host memory" if rs.sm_mapped else "")
        notes.append(f"GPU floors (docs/methodology.md) at each row's launch form: pinned "
                     f"bandwidth {rs.pinned.gb_per_s:.1f} GB/s, the median peak of "
                     f"{rs.pinned.records} pinned-h2d primitive record(s){sm}; GPU time/floor "
                     "= median GPU ms per epoch / floor (GPU time with GPU time).")
    else:
        notes.append("No floor: pinned bandwidth not measured (no pinned-h2d primitive "
                     "record in this results set).")
    doc.ul(notes + pooling_notes(groups))
    return doc.markdown()


def pair_verdicts(pairs: Sequence[tuple[Group | None, Group | None]]
                  ) -> list[tuple[str, str]]:
    """Per (base, other) pair: (other/base as a Hodges-Lehmann ratio with its Moses interval,
    the verdict of the Mann-Whitney test, Holm-corrected over the pairs that could be tested)."""
    effects = [ratio(b.process_values("wall_ms"), o.process_values("wall_ms"))
               if b is not None and o is not None and wall(b) and wall(o) else None
               for b, o in pairs]
    out = []
    for (b, o), e, verdict in zip(pairs, effects, holm_verdicts(effects)):
        if e is None:
            measured = b is not None and o is not None and wall(b) and wall(o)
            out.append((NOT_MEASURED, NOT_MEASURED) if not measured else
                       (NOT_MEASURED, f"too few processes (n<{MIN_PROCESSES}): not compared"))
        else:
            out.append((effect_text(e), verdict))
    return out


@generator("naive-vs-best", required=("batch", "transfer", "scenario"))
def naive_vs_best(rs: ResultsSet, a: BlockArgs) -> str:
    """Each (naive, best form) pair: both medians, best/naive as a Hodges-Lehmann ratio with its
    Moses interval, the Holm-corrected test, and the gain split into launch form and data
    path."""
    rep = representative(select(rs, a))
    pairs = sorted(improves(rs).items(), key=lambda bn: (
        STRATEGY_ORDER.index(bn[1]) if bn[1] in STRATEGY_ORDER else len(STRATEGY_ORDER), bn))
    rows, shown, found = [], [], []
    for best_name, naive_name in pairs:
        naive, best = pick(rep, naive_name), pick(rep, best_name)
        found.append((naive_name, best_name, naive, best))
        shown += [g for g in (naive, best) if g is not None]
    for (naive_name, best_name, naive, best), (eff, verdict) in zip(
            found, pair_verdicts([(n, b) for _, _, n, b in found])):
        rows.append([naive_name, best_name, group_value(naive), group_value(best), eff,
                     verdict.replace("faster", "best form faster").replace(
                         "slower", "best form slower"),
                     *_two_gains(rs.groups, naive, best)])
    doc = Doc()
    doc.table(["naive form", "best form", "naive ms/epoch", "best form ms/epoch",
               "best/naive [interval]", "test", "launch form saves",
               "data movement naive → best"], rows, align="llllllll")
    doc.p(f"At {a.where()}. best/naive: the Hodges-Lehmann ratio (the median of the ratios of "
          "every best-form process to every naive process) with its Moses interval (exact "
          "coverage from the Mann-Whitney U distribution when the two differ by a factor). "
          "Test: two-sided Mann-Whitney U over processes, Holm-corrected over the pairs of "
          "the table; a pair not significantly different is not ordered. The best form's "
          "gain in two parts: what its launch form saves (resident at the naive form's launch "
          "form minus resident at the best form's, a Hodges-Lehmann shift with its interval; "
          "where the two take different MLP steps, each resident takes its form's step, so "
          "the step's difference is in it too, and the cell names both steps) and what its "
          "data path saves (the data-movement cost, epoch minus resident at the same form, of "
          "the naive form, then of the best form).")
    doc.ul(pooling_notes(shown))
    return doc.markdown()


def _two_gains(groups: Sequence[Group], naive: Group | None, best: Group | None
               ) -> tuple[str, str]:
    """(what the best form's launch form saves, the data-movement cost naive -> best)."""
    if naive is None or best is None:
        return NOT_MEASURED, NOT_MEASURED
    ref_naive = compute_reference(groups, naive)
    ref_best = compute_reference(groups, best)
    steps = (naive.key.step, best.key.step)
    if naive.key.epoch_form == best.key.epoch_form and steps[0] == steps[1]:
        launch = f"none (both {LAUNCH_FORMS.get(best.key.epoch_form, best.key.epoch_form)})"
    elif ref_naive is None or ref_best is None:
        launch = "no resident run at " + " and ".join(
            LAUNCH_FORMS.get(g.key.epoch_form, g.key.epoch_form)
            for g, r in ((naive, ref_naive), (best, ref_best)) if r is None)
    else:
        saved = shift(ref_best.process_values("wall_ms"), ref_naive.process_values("wall_ms"))
        launch = effect_text(saved, " ms") if saved else NOT_MEASURED
        if saved and steps[0] != steps[1]:
            launch += (f" (and the step: {steps[0] or 'not recorded'} → "
                       f"{steps[1] or 'not recorded'})")
    dm_n, dm_b = data_movement(groups, naive), data_movement(groups, best)
    movement = (f"{effect_text(dm_n, ' ms') if dm_n else 'n/a'} → "
                f"{effect_text(dm_b, ' ms') if dm_b else 'n/a'}")
    return launch, movement


@generator("data-movement", required=("batch", "transfer", "scenario"))
def data_movement_table(rs: ResultsSet, a: BlockArgs) -> str:
    """Every strategy (default variant) at every launch form it ran: its epoch, resident's at
    the same form, and the difference, the data-movement cost, wall with wall and GPU with
    GPU."""
    groups = select(rs, a)
    shown = [g for g in groups if g.key.strategy != REFERENCE_STRATEGY]
    if not shown:
        return f"No data-moving configuration at {a.where()}: {NOT_MEASURED}."
    by_form: dict[tuple[str, str], Group] = {}
    for g in sorted(shown, key=lambda g: variant_rank_of(g)):
        by_form.setdefault((g.key.strategy, g.key.epoch_form), g)
    order = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    rows = []
    for (strategy, form), g in sorted(by_form.items(), key=lambda kv: (
            order.get(kv[0][0], len(order)), kv[0][0], LAUNCH_FORM_ORDER.index(kv[0][1])
            if kv[0][1] in LAUNCH_FORM_ORDER else len(LAUNCH_FORM_ORDER))):
        ref = compute_reference(rs.groups, g)
        dm, dm_gpu = data_movement(rs.groups, g), data_movement(rs.groups, g, "gpu_ms")
        share = (f"{100 * dm.estimate / wall(g).median:.0f}%"
                 if dm is not None and wall(g) and wall(g).median > 0 else "n/a")
        rows.append([g.key.variant_label, LAUNCH_FORMS.get(form, form), group_value(g),
                     group_value(ref) if ref is not None else "no resident run at this form",
                     effect_text(dm, " ms") if dm else "n/a",
                     effect_text(dm_gpu, " ms") if dm_gpu else "n/a", share])
    doc = Doc()
    doc.table(["strategy", "launch form", "ms/epoch [interval], n",
               "resident at this form", "data movement, wall [interval]",
               "data movement, GPU time [interval]", "share of the epoch"], rows,
              align="lllllll")
    doc.p(f"At {a.where()}. Data movement: the epoch minus resident's (static, no byte moves) "
          "at the same launch form, step and batch; a Hodges-Lehmann shift over processes with "
          "its Moses interval, wall clock with wall clock (the host's share of the data path "
          "included), GPU time with GPU time. A form at which resident did not run has no "
          "cost. Resident at each form is what that form and the step cost by themselves.")
    doc.ul(pooling_notes(shown))
    return doc.markdown()


def variant_rank_of(g: Group) -> tuple:
    return variant_rank(g.key)
