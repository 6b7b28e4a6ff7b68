"""The data paths on several GPUs as a generated doc block (the multi-GPU set's records/gpus.jsonl,
experiments/matrix/matrices/gpus.toml).

    <!-- generated:gpus-table b256 u8 static gpus=2 reduce=ring from docs/results/nvidia-h200-x2 -->

One row per strategy trained on N GPUs in one process (a host thread per GPU: --processes one,
the form in which GPUs share one allocation) at the marker's per-GPU batch, transfer, scenario and
reduction: its epoch (median over processes with its order-statistic interval), its rank from the
table's pairwise tests (Holm-corrected), its stability, and its epoch against resident's at the
same N, scenario and step: resident holds the whole set on every GPU (replicated-resident), so in
static no byte moves during an epoch (in refresh the rewritten set is uploaded whole once per
epoch) and the ratio is what the strategy's data path costs on N GPUs (a
Hodges-Lehmann ratio over processes with its Moses interval, Mann-Whitney tested, Holm-corrected
over the rows). WITHIN_RESIDENT marks the rows whose whole interval lies within that factor.

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module), under the same rules as every block: numbers with their interval and n, order only
from Holm-corrected tests, NOT_MEASURED for what the set does not hold.
"""
from __future__ import annotations

from typing import Sequence

import statistics

from analysis.aggregate import REFERENCE_STRATEGY, Group, steady_epochs
from analysis.block_generators import (FILTERS, MIN_PROCESSES, NOT_MEASURED, RANK_RULE,
                                       BlockArgs, BlockError, data_as_marked, effect_text,
                                       generator, group_value, holm_verdicts, key_fields, ordered,
                                       pooling_notes, rank_labels, wall)
from analysis.document import Doc
from analysis.results_set import ResultsSet
from analysis.stats import (Summary, family_can_order, median_with_interval, ratio,
                            stability_label, summarize)

# The criterion a data path on several GPUs is held to: its epoch within this factor of the set
# held on every GPU (the upper bound), the whole interval of the ratio below it.
WITHIN_RESIDENT = 1.10
REDUCES = ("ring", "exact")
DEFAULTS = {"gpus": "2", "reduce": "ring"}
# What resident, the reference, moves in each scenario (docs/strategies.md).
RESIDENT_MOVES = {"static": "no byte moves during an epoch",
                  "refresh": "the host's rewritten set uploaded whole, once per epoch, to every GPU"}


def _option(a: BlockArgs, name: str) -> str:
    return a.options.get(name, DEFAULTS[name])


def select_gpus(rs: ResultsSet, a: BlockArgs) -> list[Group]:
    """The groups trained on the marker's N GPUs in one process with its reduction, at its batch,
    transfer, scenario and filters, from one comparable slice."""
    try:
        n = int(_option(a, "gpus"))
    except ValueError:
        raise BlockError(f"gpus must be a whole number of GPUs, not {_option(a, 'gpus')!r}") from None
    if n < 2:
        raise BlockError(f"gpus={n}: the table is of runs on several GPUs (gpus=2 or more)")
    reduce = _option(a, "reduce")
    if reduce not in REDUCES:
        raise BlockError(f"reduce must be one of {', '.join(REDUCES)}, not {reduce!r}")
    filters = {k: v for k, v in a.options.items() if k in FILTERS}
    out = [g for g in rs.groups
           if g.key.option("gpus", 1) == n and g.key.option("reduce") == reduce
           and g.key.option("processes") is None
           and g.key.batch == a.batch and g.key.transfer == a.transfer
           and g.key.scenario == a.scenario
           and all(key_fields(g.key).get(k) == v for k, v in filters.items())
           and data_as_marked(g, filters)]
    slices = {g.key.slice_key() for g in out}
    if len(slices) > 1:
        raise BlockError(f"the configurations on {n} GPUs at {a.where()} differ in more than "
                         "the strategy (hidden widths, GEMM, epochs or options): add a filter "
                         "such as hidden=256 to the marker")
    return out


def row_label(g: Group) -> str:
    """The variant label without the GPU count and reduction the whole table shares."""
    return g.key.variant_label.replace(
        f" ({g.key.option('gpus')} GPUs, {g.key.option('reduce')} reduction)", "")


def gpu_spread(g: Group) -> Summary | None:
    """The spread of the GPUs' own GPU time (epochs[].per_gpu[].gpu_ms): per steady epoch the
    slowest GPU's over the fastest's, per process the median over its steady epochs, summarized
    over processes; None where the records carry no per-GPU figures."""
    values = []
    for rec in g.timing_records:
        ratios = []
        for ep in steady_epochs(rec):
            times = [r.get("gpu_ms") for r in ep.get("per_gpu") or []]
            if len(times) >= 2 and all(isinstance(t, (int, float)) and t > 0 for t in times):
                ratios.append(max(times) / min(times))
        if ratios:
            values.append(statistics.median(ratios))
    return summarize(values) if values else None


def reference_for(groups: Sequence[Group], g: Group) -> Group | None:
    """Resident among `groups` (one scenario, N, reduction) at g's step; of several, the one
    with the most processes."""
    refs = [r for r in groups if r.key.strategy == REFERENCE_STRATEGY
            and r.key.option("step") == g.key.option("step")]
    return max(refs, key=lambda r: wall(r).n if wall(r) else 0) if refs else None


@generator("gpus-table", required=("batch", "transfer", "scenario"), options=("gpus", "reduce"))
def gpus_table(rs: ResultsSet, a: BlockArgs) -> str:
    groups = select_gpus(rs, a)
    n, reduce = _option(a, "gpus"), _option(a, "reduce")
    where = f"{a.where()} on {n} GPUs ({reduce} reduction, one process)"
    if not groups:
        return f"No configuration at {where}: {NOT_MEASURED}."
    ranked, loose = ordered(groups)
    labelled = rank_labels(ranked, loose)

    # every row against resident: one family for Holm's correction
    effects = []
    for _, g in labelled:
        ref = reference_for(groups, g)
        if g.key.strategy == REFERENCE_STRATEGY or ref is None or not wall(ref) or not wall(g):
            effects.append((ref, None))
        else:
            effects.append((ref, ratio(ref.process_values("wall_ms"), g.process_values("wall_ms"))))
    verdicts = holm_verdicts([e for _, e in effects])

    rows = []
    for (rank, g), (ref, e), verdict in zip(labelled, effects, verdicts):
        if g.key.strategy == REFERENCE_STRATEGY:
            against, verdict, within = "the reference", "", ""
        elif e is None:
            against = ("no resident run at this step" if ref is None else
                       f"too few processes (n<{MIN_PROCESSES}): not compared")
            verdict, within = "", ""
        else:
            against = effect_text(e)
            within = "yes" if e.ci.high <= WITHIN_RESIDENT else "no"
        spread, reduce_ms = gpu_spread(g), g.stat("reduce_ms")
        rows.append([row_label(g), rank, group_value(g), stability_label(wall(g)),
                     against, verdict, within,
                     "not recorded" if reduce_ms is None else
                     median_with_interval(reduce_ms, "{:.3g}".format),
                     "not recorded" if spread is None else
                     median_with_interval(spread, "{:.3f}".format)])
    doc = Doc()
    doc.table(["strategy", "rank", "ms/epoch [interval], n", "stability",
               "against resident on every GPU", "test", f"within {WITHIN_RESIDENT:.2f}x",
               "reduce ms/epoch", "slowest/fastest GPU"],
              rows, align="lllllllll")
    notes = [RANK_RULE[0].upper() + RANK_RULE[1:] + "."]
    if not family_can_order([wall(g).n for _, g in ranked if wall(g)]):
        notes.append("With these process counts no pair of this table can be significant after "
                     "Holm's correction over its pairs: every rank is 1.")
    notes.append(f"Every row: {n} GPUs in one process (a host thread per GPU), {a.batch} rows "
                 f"per GPU per step, gradients combined by {reduce} "
                 f"({'ncclAllReduce' if reduce == 'ring' else 'ncclAllGather, summed in rank order'}). "
                 f"Against resident: the epoch over resident's (the whole set on every GPU: "
                 f"{RESIDENT_MOVES.get(a.scenario, '')}) at the same scenario and step, a "
                 "Hodges-Lehmann ratio "
                 "over processes with its Moses interval (95%); test: two-sided Mann-Whitney U, "
                 "Holm-corrected over the rows compared. "
                 f"Within {WITHIN_RESIDENT:.2f}x: the whole interval at or below it. "
                 "Reduce: of the epoch, the time the slowest GPU's compute stream spent combining "
                 "the gradients (events on each side of the collective, summed over the steps: "
                 "the collective and the wait for the other GPU to reach it), the median over a "
                 "process's steady epochs, then over the profiled processes (n; an interval "
                 "from 3): the unprofiled processes that time the epoch leave these events out, "
                 "which would slow it. "
                 "Slowest/fastest GPU: each steady epoch's largest GPU time (events, first batch "
                 "ready to last batch done) over its smallest among the GPUs, the median over a "
                 "process's epochs, then over processes with its interval; the epoch's own GPU "
                 "time is the slowest GPU's.")
    doc.ul(notes + pooling_notes(groups))
    return doc.markdown()
