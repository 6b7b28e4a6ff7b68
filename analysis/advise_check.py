#!/usr/bin/env python3
"""Does the advice (analysis/advise.py) pick what a results set measured fastest?

    analysis/advise_check.py docs/results/nvidia-h200

For each configuration family of the set (GPU, scenario, transfer, batch, hidden width, data
set size and device budget, and launch form; static and refresh, the scenarios the model
covers), the advice is made as a user would make it (analysis/advise.py): C from the family's
compute-only reference (analysis.aggregate.compute_reference: resident at the same launch form,
step and width, what a user measures as their own step at that form), the set's own
primitives, the family's data set (MNIST, or its --replicate copies), the family's
--device-budget as the user's budget (none: the whole device), among the strategies measured
in the family. Like with like: the model leaves out what a launch form saves, so the
advice is held only against strategies measured at the form its C was measured at; a family
without resident at its form has no C and is listed as not checked. The measured side: one
configuration per strategy (its defaults), ranked by analysis/stats.rank_by_tests on the processes'
GPU time per epoch (pairwise Mann-Whitney, Holm over the family). The advice agrees when it
shares the first rank: no measured strategy is significantly faster than it, so it is the
measured winner or statistically tied with it. A family whose process counts cannot make any
pair significant after Holm (stats.family_can_order) cannot disagree that way; the check says
how many there are and also compares medians: the advice's measured median within
TIE_TOLERANCE of the fastest one.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import cost_model as M  # noqa: E402
from analysis.advise import (TIE_TOLERANCE, Advice, OneLineParser, advise,  # noqa: E402
                             user_shape)
from analysis.aggregate import (IMAGE_PIXELS, REFERENCE_MISSING, Group,  # noqa: E402
                                compute_reference, sort_key, variant_rank)
from analysis.primitives import PrimitiveTable  # noqa: E402
from analysis.records import RecordError  # noqa: E402
from analysis.results_set import load_results_set  # noqa: E402
from analysis.stats import family_can_order, rank_by_tests  # noqa: E402

DEFAULT_HIDDEN = (256,)      # labels name the width only where it differs
METRIC = "gpu_ms"            # the model predicts GPU time per epoch
GIB = float(1 << 30)


@dataclasses.dataclass
class FamilyCheck:
    label: str                        # 'NVIDIA H200 static/u8/b256 per-batch'
    measured: dict[str, Group]        # strategy -> the configuration compared
    advice: Advice | None = None
    ranks: dict[str, int | None] = dataclasses.field(default_factory=dict)
    winner: str | None = None         # first rank, lowest measured median
    can_order: bool = False           # whether any pair of the family can differ after Holm
    reason: str | None = None         # why the family was not checked

    @property
    def recommended(self) -> str | None:
        r = self.advice.recommended if self.advice else None
        return r.strategy if r else None

    @property
    def agrees(self) -> bool | None:
        """The advice shares the first rank; None when the family was not checked."""
        if self.recommended is None or self.winner is None:
            return None
        return self.ranks.get(self.recommended) == 1

    @property
    def agrees_by_median(self) -> bool | None:
        if self.recommended is None or self.winner is None:
            return None
        return self.median(self.recommended) <= self.median(self.winner) * (1 + TIE_TOLERANCE)

    def median(self, strategy: str) -> float:
        return self.measured[strategy].median(METRIC)

    def predicted(self, strategy: str) -> float | None:
        opt = next((o for o in self.advice.options if o.strategy == strategy), None)
        return opt.predicted_ms if opt else None


def _variant_rank(g: Group) -> tuple:
    """The variant figures show first (aggregate.variant_rank: the strategy's defaults, the
    step --fused on took), then the table order."""
    return (variant_rank(g.key), sort_key(g.key))


def family_compute_ms(groups: Sequence[Group], family: Sequence[Group]) -> float | None:
    """C of the family: the compute-only reference (resident at the family's launch form) of
    its configurations, those with the default step first."""
    for g in sorted(family, key=_variant_rank):
        ref = compute_reference(groups, g)
        if ref is not None:
            return ref.median(METRIC)
    return None


def families(groups: Sequence[Group]) -> dict[tuple, list[Group]]:
    out: dict[tuple, list[Group]] = {}
    for g in groups:
        k = g.key
        if k.scenario in ("static", "refresh") and k.strategy in M.MODELS:
            out.setdefault((k.slice_key(), k.scenario, k.transfer, k.batch, k.epoch_form),
                           []).append(g)
    return out


def family_label(k: Any) -> str:
    """'NVIDIA H200 static/u8/b256 per-batch', with the width, the copies of the set and the
    budget where they are not the defaults ('.../b256/h1024/x11/budget 0.24 GiB graph')."""
    extra = "" if k.hidden == DEFAULT_HIDDEN else f"/h{k.hidden_label}"
    if (k.option("replicate") or 1) > 1:
        extra += f"/x{k.option('replicate')}"
    if k.option("device_budget_gib") is not None:
        extra += f"/budget {k.option('device_budget_gib'):g} GiB"
    return f"{k.gpu} {k.scenario}/{k.transfer}/b{k.batch}{extra} {k.epoch_form}"


def check_family(groups: Sequence[Group], family: Sequence[Group],
                 table: PrimitiveTable | None) -> FamilyCheck:
    k = family[0].key
    measured: dict[str, Group] = {}
    for g in sorted(family, key=_variant_rank):
        measured.setdefault(g.key.strategy, g)
    fc = FamilyCheck(family_label(k), measured)
    compute = family_compute_ms(groups, family)
    if table is None:
        fc.reason = f"no primitive records for {k.gpu}"
        return fc
    if compute is None:
        fc.reason = REFERENCE_MISSING
        return fc
    if len(measured) < 2:
        fc.reason = f"only {next(iter(measured))} ran at this form: nothing to choose between"
        return fc
    names = sorted(measured, key=lambda s: sort_key(measured[s].key))
    shape = user_shape(family[0].train_samples, k.batch,
                       IMAGE_PIXELS * M.PIXEL_BYTES[k.transfer], k.transfer)
    gib = k.option("device_budget_gib")
    fc.advice = advise(shape, k.scenario, compute, table, None if gib is None else gib * GIB,
                       names, k.epoch_form)
    ranked = rank_by_tests(names, lambda s: measured[s].process_values(METRIC))
    fc.ranks = {r.item: r.rank for r in ranked}
    fc.winner = ranked[0].item if ranked and ranked[0].rank == 1 else None
    fc.can_order = family_can_order([measured[s].n_processes for s in names])
    if fc.winner is None:
        fc.reason = "too few processes to rank"
    return fc


def check(results_dir: str | Path) -> list[FamilyCheck]:
    rs = load_results_set(results_dir, str(results_dir))
    tables = PrimitiveTable.by_gpu(rs.primitives)
    return [check_family(rs.groups, fam, tables.get(fam[0].key.gpu))
            for _, fam in sorted(families(rs.groups).items(), key=lambda kv: str(kv[0]))]


def share(checks: Sequence[FamilyCheck], attr: str) -> tuple[int, int]:
    """(agreeing, checked) by `attr` ('agrees' or 'agrees_by_median')."""
    verdicts = [getattr(c, attr) for c in checks if getattr(c, attr) is not None]
    return sum(verdicts), len(verdicts)


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({n / d:.0%})" if d else "0/0 (no family checked)"


def _both(c: FamilyCheck, s: str) -> str:
    return f"{s} (predicted {M.fmt_ms(c.predicted(s))}, measured {M.fmt_ms(c.median(s))} ms)"


def text_lines(checks: Sequence[FamilyCheck], source: str) -> list[str]:
    lines = [f"advice against the measured winners of {source} (GPU ms per epoch; C from "
             "resident at the family's launch form and width; the family's budget)",
             f"{'family':<46} {'advice':<22} {'rank':>4} {'winner':<22} {'tests can order':<15}"]
    for c in checks:
        if c.reason:
            lines.append(f"{c.label:<46} not checked: {c.reason}")
            continue
        lines.append(f"{c.label:<46} {c.recommended:<22} {c.ranks[c.recommended]!s:>4} "
                     f"{c.winner:<22} {'yes' if c.can_order else 'no':<15}")
    agree, n = share(checks, "agrees")
    by_median, n_median = share(checks, "agrees_by_median")
    undecidable = sum(1 for c in checks if c.agrees is not None and not c.can_order)
    lines += ["",
              f"agreement: {_pct(agree, n)} families: the advice shares the first rank "
              "(Holm-corrected Mann-Whitney over the family's strategies)",
              f"  {undecidable} of them have too few processes for any pair to differ after "
              "Holm: there the tests cannot disagree",
              f"by medians: {_pct(by_median, n_median)}: the advice's measured median within "
              f"{TIE_TOLERANCE:.0%} of the fastest measured median"]
    for c in checks:
        if c.agrees is False or c.agrees_by_median is False:
            what = "disagrees" if c.agrees is False else "slower by medians"
            lines.append(f"  {what}: {c.label}: advice {_both(c, c.recommended)}; measured "
                         f"winner {_both(c, c.winner)}")
    return lines


def as_json(checks: Sequence[FamilyCheck], source: str) -> dict[str, Any]:
    agree, n = share(checks, "agrees")
    by_median, n_median = share(checks, "agrees_by_median")
    return {"source": source, "metric": METRIC, "tie_tolerance": TIE_TOLERANCE,
            "agreeing": agree, "checked": n, "agreeing_by_median": by_median,
            "families": [{
                "family": c.label, "reason": c.reason, "recommended": c.recommended,
                "winner": c.winner, "ranks": c.ranks, "can_order": c.can_order,
                "agrees": c.agrees, "agrees_by_median": c.agrees_by_median,
                "predicted_ms": {s: c.predicted(s) for s in c.measured} if c.advice else {},
                "measured_ms": {s: c.median(s) for s in c.measured}} for c in checks]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = OneLineParser(
        prog="advise_check.py",
        description="Compare the advice of analysis/advise.py with the measured winners of a "
                    "results set: per family (GPU, scenario, transfer, batch, hidden width, data "
                    "set and device budget, launch form), the recommendation from the "
                    "compute-only reference at that form and width, the set's primitives and the "
                    "family's budget against the strategies' ranks by Holm-corrected Mann-Whitney "
                    "tests on GPU time per epoch; and by medians.",
        epilog="Example: analysis/advise_check.py docs/results/nvidia-h200")
    ap.add_argument("results", help="a results set folder (records/*.jsonl with the primitive "
                                    "records beside the run records)")
    ap.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    args = ap.parse_args(argv)
    try:
        checks = check(args.results)
    except RecordError as e:
        print(f"advise_check.py: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(as_json(checks, args.results), indent=1))
    else:
        print("\n".join(text_lines(checks, args.results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
