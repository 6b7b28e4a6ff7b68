"""The decision block: which strategy, regime by regime, from the measurements (top of README).

    <!-- generated:decision b256 u8 from docs/results/nvidia-h200 -->

One table, a row per regime: the data fits and is static; it fits but the host rewrites it every
epoch (refresh) or it is augmented batch by batch (the stream scenario: on the host, or on the GPU
with --augment-device gpu); it is larger than the
device budget; the step is light or heavy (the smallest and the largest one-layer width of the
hidden sweep, with the data rewritten every epoch, where every byte moves); several GPUs. Per
measured regime:

- recommended: rank 1 of `stats.rank_by_tests` (Mann-Whitney, Holm over the regime's
  configurations: every strategy at its defaults and at every launch form it ran, at the block's
  batch and transfer); among rank 1 the simplest strategy (advise.SIMPLICITY), then the lowest
  median;
- its data-movement cost against resident at the same form (aggregate.data_movement) with its
  interval;
- the runner-up: the best configuration of another strategy (lowest rank, then median);
- why, from the primitives and the cost model (advise.why: the bytes per epoch, through which
  primitives, how long, added to or overlapped with C), plus the host's measured preparation.

A regime the set does not hold reads "not measured in this set — <how to measure>", never a
guess. Registered with analysis/block_generators.py's ``@generator`` under its rules.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from analysis import advise as A
from analysis import cost_model
from analysis.aggregate import (LAUNCH_FORMS, REFERENCE_MISSING, REFERENCE_STRATEGY, Group,
                                dataset_bytes, variant_rank)
from analysis.block_generators import (DATA_FILTERS, FILTERS, BlockArgs, BlockError,
                                       generator, group_value, key_fields)
from analysis.block_generators_crossover import HOW_TO_MEASURE, sweep
from analysis.block_generators_ranking import movement_text
from analysis.document import Doc
from analysis.primitives import PrimitiveTable
from analysis.results_set import ResultsSet
from analysis.stats import family_can_order, rank_by_tests
from analysis.stream import GPU_AUGMENT, augmented_on_gpu, ordered_curves, stream_points

NOT_HERE = "not measured in this set"
DEFAULT_HIDDEN = "256"
PROCEDURE = (
    "**Decision procedure for your own model.** Measure one training step with the batch "
    "already on the GPU (X µs), then run `python3 analysis/advise.py --step-us X "
    "--bytes-per-sample Y --samples N --budget-gib W` (`--help` is the reference: batch, "
    "`--scenario refresh` for data rewritten every epoch, `--input u8|f32`, the primitives of "
    "your GPU). It predicts every strategy's epoch with the cost model above, leaves out those "
    "whose device memory exceeds W, and recommends the fastest, or the simplest of those within "
    "5% of it; with `--gpus G --parameters P` it predicts resident and pinned on G GPUs "
    "(analysis/scaling_model.py). The table above is what this results set measured; the "
    "crossover block says from which hidden width each strategy's data path stops mattering.")
BUDGET_TODO = (f"{NOT_HERE} — `memstrat train --replicate K --device-budget GiB` runs it and "
               "`experiments/scripts/reproduce.sh --stages budget` sweeps it (budget.toml), not "
               "yet run for this set; `analysis/advise.py --budget-gib` gives the model's answer "
               "(strategies holding the whole set do not fit)")
GPUS_TODO = (f"{NOT_HERE} — `memstrat train --gpus N` runs it (every strategy; static, "
             "refresh, stream with host workers); on a "
             "machine of N >= 2 GPUs `experiments/scripts/reproduce.sh` measures it into a set of "
             "its own, `docs/results/<gpu>-x<N>/` (the scaling stage: scaling.toml, memstrat "
             "beside DDP and JAX, scaling_check.md; the gpus stage: every data path on 2 GPUs, "
             "gpus.toml)")


@dataclasses.dataclass(frozen=True)
class Choice:
    recommended: Group
    runner_up: Group | None
    orderable: bool          # whether any pair of the family can be significant after Holm


def defaults_only(groups: Sequence[Group]) -> list[Group]:
    """Each strategy at its own defaults (no custom option, the default pipeline depth), one
    configuration per launch form and step."""
    best: dict[tuple, Group] = {}
    for g in groups:
        k = (g.key.strategy, g.key.epoch_form, g.key.step)
        if k not in best or variant_rank(g.key) < variant_rank(best[k].key):
            best[k] = g
    return [g for g in best.values() if variant_rank(g.key)[:2] == (0, 0)]


def choose(groups: Sequence[Group]) -> Choice | None:
    """Rank 1 by the tests, the simplest strategy among it; the runner-up of another
    strategy."""
    ranked = [r for r in rank_by_tests([g for g in groups if g.stat("wall_ms")],
                                       lambda g: g.process_values("wall_ms"))
              if r.rank is not None]
    if not ranked:
        return None

    def order(r):
        g = r.item
        return (r.rank, A.SIMPLICITY_RANK.get(g.key.strategy, len(A.SIMPLICITY)),
                g.median("wall_ms"))
    top = min((r for r in ranked if r.rank == 1), key=order)
    others = [r for r in ranked if r.item.key.strategy != top.item.key.strategy]
    runner = min(others, key=lambda r: (r.rank, r.item.median("wall_ms"))) if others else None
    return Choice(top.item, runner.item if runner else None,
                  family_can_order([len(r.item.process_values("wall_ms")) for r in ranked]))


def label(g: Group) -> str:
    form = LAUNCH_FORMS.get(g.key.epoch_form, g.key.epoch_form)
    return f"{g.key.strategy} ({form})"


def movement(all_groups: Sequence[Group], g: Group) -> str:
    if g.key.strategy == REFERENCE_STRATEGY and g.key.scenario == "static":
        return "none: it is the reference"
    return movement_text(all_groups, g) or "no resident run at this form"


def why(all_groups: Sequence[Group], g: Group, tables: dict[str, PrimitiveTable]) -> str:
    """advise.why for the configuration (C its compute-only reference's GPU time), plus the
    host's measured preparation of the data."""
    host = g.median("host_ms") or 0.0
    host_text = f"; the host's preparation, {host:.3g} ms (measured), comes on top" \
        if host >= 0.05 else ""
    try:
        pred = cost_model.predict_group(all_groups, g, tables)
    except cost_model.NoModel as e:
        reason = "no resident run at its form" if str(e) == REFERENCE_MISSING else str(e)
        return f"no model: {reason}{host_text}"
    moved = cost_model.bytes_moved(pred.semantics, cost_model.shape_of(g))
    if not moved:
        return f"nothing moves in a steady epoch: the epoch is C = {pred.compute_ms:.4g} ms"
    return A.why(A.Option(g.key.strategy, pred, None, 0, "", True, moved)) + host_text


def regime_row(name: str, groups: Sequence[Group], all_groups: Sequence[Group],
               tables: dict[str, PrimitiveTable]) -> list[str]:
    c = choose(groups)
    if c is None:
        return [name, f"{NOT_HERE} (no configuration with enough processes to test)", "", "",
                ""]
    rec = f"**{label(c.recommended)}** {group_value(c.recommended)}"
    if not c.orderable:
        rec += " (no pair of this regime can be significant at its process counts: tied, the " \
               "simplest shown)"
    runner = (f"{label(c.runner_up)} {group_value(c.runner_up)}, data movement "
              f"{movement(all_groups, c.runner_up)}" if c.runner_up else "none")
    reason = why(all_groups, c.recommended, tables)
    if c.runner_up is not None and c.recommended.key.strategy == REFERENCE_STRATEGY:
        reason += f"; {c.runner_up.key.strategy}: {why(all_groups, c.runner_up, tables)}"
    return [name, rec, movement(all_groups, c.recommended), runner, reason]


def over_budget(groups: Sequence[Group]) -> tuple[float, list[Group]] | None:
    """(data-to-budget ratio, the configurations run at it): of the groups whose training set
    (as resident holds it) is larger than their device budget, those at the largest ratio;
    None without such groups."""
    ratios = [(dataset_bytes(g) / (b * 2**30), g) for g in groups
              if (b := g.key.option("device_budget_gib")) is not None
              and dataset_bytes(g) > b * 2**30]
    if not ratios:
        return None
    top = max(r for r, _ in ratios)
    return top, [g for r, g in ratios if r == top]


def stream_groups(groups: Sequence[Group], on_gpu: bool = False
                  ) -> tuple[str, list[Group]] | None:
    """(augmentation, each strategy at its fastest worker count) of the stream scenario,
    augmented on the host (or, on_gpu, on the GPU: --augment-device gpu), light preferred over
    heavy; none augments nothing and is never the regime."""
    by_augment: dict[str, list[Group]] = {}
    for (augment, _), curve in ordered_curves(stream_points(groups)):
        timed = [p for p in curve if p.epoch_ms is not None]
        if timed and augment != "none" and augmented_on_gpu(augment) == on_gpu:
            by_augment.setdefault(augment.removesuffix(GPU_AUGMENT), []).append(
                min(timed, key=lambda p: p.epoch_ms.median).group)
    for augment in ("light", "heavy", *by_augment):
        if augment in by_augment:
            return augment, by_augment[augment]
    return None


@generator("decision", defaults={"batch": 256, "transfer": "u8"})
def decision(rs: ResultsSet, a: BlockArgs) -> str:
    """One row per regime: the measured winner, its data-movement cost, the runner-up, why."""
    if a.scenario is not None:
        raise BlockError("decision covers every regime: give a batch and a transfer only (e.g. "
                         "`decision b256 u8`)")
    hidden = a.options.get("hidden", DEFAULT_HIDDEN)
    filters = {k: v for k, v in a.options.items() if k in FILTERS and k != "hidden"}
    if any(k in filters for k in DATA_FILTERS):
        raise BlockError("decision picks the data size of each regime itself: drop "
                         + ", ".join(k for k in DATA_FILTERS if k in filters))

    def at(scenario: str, width: str, data: bool = False) -> list[Group]:
        """The regime's groups: the set as loaded on the whole device, or (data) the runs
        on a replicated set or under a device budget."""
        return [g for g in rs.groups if g.key.batch == a.batch and g.key.transfer == a.transfer
                and g.key.scenario == scenario and g.key.hidden_label == width
                and all(key_fields(g.key).get(k) == v for k, v in filters.items())
                and g.key.data_as_loaded != data]

    tables = PrimitiveTable.by_gpu(rs.primitives)
    where = f"hidden {hidden}"
    rows = []
    for name, scenario in ((f"data fits, static ({where})", "static"),
                           (f"data fits, rewritten every epoch (refresh, {where})", "refresh")):
        groups = defaults_only(at(scenario, hidden))
        rows.append(regime_row(name, groups, rs.groups, tables) if groups else
                    [name, f"{NOT_HERE} — the matrix stage (results.toml)", "", "", ""])
    for on_gpu, place in ((False, "on the host"), (True, "on the GPU")):
        stream = stream_groups(at("stream", hidden), on_gpu)
        name = f"data fits, augmented {place} batch by batch (stream, {where})"
        rows.append(regime_row(f"{name[:-1]}, {stream[0]} augmentation)", stream[1], rs.groups,
                               tables) if stream else
                    [name, f"{NOT_HERE} — the stream stage (stream.toml)", "", "", ""])
    budget = over_budget(at("static", hidden, data=True))
    if budget:
        ratio, groups = budget
        copies = groups[0].key.option("replicate") or 1
        name = (f"data larger than the device budget ({copies} copies of the set, "
                f"{ratio:.3g}× the budget, static, {where})")
        rows.append(regime_row(name, defaults_only(groups), rs.groups, tables))
    else:
        rows.append(["data larger than the device budget", BUDGET_TODO, "", "", ""])
    sw = sweep(rs, dataclasses.replace(a, options=filters))
    if sw.measured:
        for kind, width in (("compute-light", sw.widths[0]), ("compute-heavy", sw.widths[-1])):
            groups = defaults_only(at("refresh", str(width)))
            name = f"{kind} step (hidden {width}), data rewritten every epoch"
            rows.append(regime_row(name, groups, rs.groups, tables) if groups else
                        [name, f"{NOT_HERE} — {HOW_TO_MEASURE}", "", "", ""])
    else:
        rows.append(["compute-light vs compute-heavy steps (hidden sweep)",
                     f"{NOT_HERE} — {HOW_TO_MEASURE}", "", "", ""])
    rows.append(["several GPUs", GPUS_TODO, "", "", ""])
    doc = Doc()
    doc.table(["regime", "recommended (measured winner), ms per epoch",
               "its data movement vs resident at its form", "runner-up", "why (primitives, "
               "cost model)"], rows, align="lllll")
    doc.p(f"At batch {a.batch}, {a.transfer}; ms per epoch, wall clock, median [interval], n "
          "processes. Recommended: rank 1 of two-sided Mann-Whitney tests, Holm-corrected over "
          "the regime's configurations (every strategy at its defaults, at every launch form it "
          "ran); among rank 1, the simplest (analysis/advise.py, SIMPLICITY). Data movement: the "
          "epoch minus resident's (static) at the same launch form, step and batch "
          "(Hodges-Lehmann shift, Moses interval). Why: what the cost model "
          "(analysis/cost_model.py) moves per epoch and through which primitives, against C, "
          "resident's GPU time at the form.")
    doc.p(PROCEDURE)
    return doc.markdown()
