"""The advice-check block: how often analysis/advise.py's recommendation is the measured winner
of a results set, and every family where it is not (analysis/advise_check.py's check, rendered).

    <!-- generated:advice-check from docs/results/nvidia-h200 -->

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module): the agreement by the pairwise tests and by medians, how many families the tests
cannot order, and a row per family where the advice is not the winner, with both strategies'
predicted and measured GPU time per epoch. A set without checkable families says so.
"""
from __future__ import annotations

from analysis import advise_check as AC
from analysis import cost_model as M
from analysis.block_generators import BlockArgs, generator
from analysis.primitives import PrimitiveTable
from analysis.results_set import ResultsSet


def checks_of(rs: ResultsSet) -> list[AC.FamilyCheck]:
    """advise_check.check, on a results set already loaded."""
    tables = PrimitiveTable.by_gpu(rs.primitives)
    return [AC.check_family(rs.groups, fam, tables.get(fam[0].key.gpu))
            for _, fam in sorted(AC.families(rs.groups).items(), key=lambda kv: str(kv[0]))]


@generator("advice-check")
def advice_check(rs: ResultsSet, a: BlockArgs) -> str:
    checks = checks_of(rs)
    agree, n = AC.share(checks, "agrees")
    by_median, n_median = AC.share(checks, "agrees_by_median")
    if n == 0:
        return ("The advice against this set: no family could be checked (each needs resident "
                "and another strategy at one launch form, and the set's primitives).")
    cannot = sum(1 for c in checks if c.agrees is not None and not c.can_order)
    unchecked = sum(1 for c in checks if c.reason)
    lines = [f"The advice (analysis/advise.py) shares the measured first rank in **{agree} of "
             f"{n}** families ({agree / n:.0%}): GPU time per epoch at every width and "
             f"budget of the set, ranked by two-sided Mann-Whitney tests with "
             f"Holm's correction over each family; {cannot} of them have too few processes "
             f"for any pair to differ. By medians, its measured median is within "
             f"{AC.TIE_TOLERANCE:.0%} of the fastest in {by_median} of {n_median}. {unchecked} "
             "families were not checked (resident missing at their form, or one strategy "
             "alone)."]
    wrong = [c for c in checks if c.agrees is False or c.agrees_by_median is False]
    if not wrong:
        lines.append("")
        lines.append("In every checked family the advice is the winner or tied with it.")
        return "\n".join(lines)
    lines += ["", "Where it is not:", "",
              "| family | verdict | advice: predicted / measured ms | measured winner: "
              "predicted / measured ms |", "|---|---|---|---|"]
    for c in wrong:
        verdict = "tests: a slower rank" if c.agrees is False else "slower by medians"
        lines.append(f"| {c.label} | {verdict} | {c.recommended}: "
                     f"{M.fmt_ms(c.predicted(c.recommended))} / {M.fmt_ms(c.median(c.recommended))}"
                     f" | {c.winner}: {M.fmt_ms(c.predicted(c.winner))} / "
                     f"{M.fmt_ms(c.median(c.winner))} |")
    return "\n".join(lines)
