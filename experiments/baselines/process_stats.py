"""memstrat against a PyTorch side, configuration by configuration, over processes
(docs/methodology.md, "Statistics over processes"; the statistics are analysis/stats.py's):

- a process's value is the median of its steady epochs 2..N (analysis/aggregate.py);
- each side of a configuration: the median over its processes with its order-statistic
  interval (its coverage printed where below 95%; none with fewer than 3 processes);
- PyTorch side / memstrat as the Hodges-Lehmann ratio with its Moses interval;
- which side is faster: a two-sided Mann-Whitney U test over the processes, Holm-corrected over
  the pairs a table compares (`judge`); a pair the test does not separate is not ordered.
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from analysis.aggregate import process_median  # noqa: E402  (the one per-process value)
from analysis.stats import (ALPHA, Effect, Summary, holm, interval_text,  # noqa: E402
                            median_with_interval, rank_by_tests, ratio, summarize)

# How a table's "[low-high] n" cells are made, for its legend: every table of these benchmarks
# says the method and the true coverage of its intervals.
INTERVAL_NOTE = ("the median over processes with its distribution-free order-statistic interval "
                 "(exact coverage at least 95%, printed beside it where below; n = processes; no "
                 "interval with fewer than 3)")

T = TypeVar("T")
# SideBySide.order values
MEMSTRAT_FASTER, OTHER_FASTER, NOT_SEPARATED, NOT_JUDGED = (
    "memstrat", "other", "not separated", "not judged")


def process_values(records: Iterable[dict], metric: str = "wall_ms") -> list[float]:
    """One value per process (record): the median of its steady epochs; nulls left out."""
    return [v for v in (process_median(r, metric) for r in records) if v is not None]


@dataclass
class SideBySide:
    """One configuration: memstrat's processes against the PyTorch side's."""
    memstrat: Summary | None
    other: Summary | None
    effect: Effect | None          # other / memstrat: Hodges-Lehmann ratio, Moses interval, p
    p_holm: float | None = field(default=None)   # set by judge(); the plain p until then

    @property
    def ratio(self) -> float | None:
        return self.effect.estimate if self.effect else None

    @property
    def p(self) -> float | None:
        if self.effect is None:
            return None
        return self.p_holm if self.p_holm is not None else self.effect.p

    @property
    def order(self) -> str:
        """MEMSTRAT_FASTER / OTHER_FASTER only where the (Holm-corrected) test separates the two
        sides; NOT_SEPARATED where it does not; NOT_JUDGED when a side has < 3 processes."""
        if self.effect is None:
            return NOT_JUDGED
        if self.p >= ALPHA:
            return NOT_SEPARATED
        return MEMSTRAT_FASTER if self.effect.estimate > 1.0 else OTHER_FASTER


def side_by_side(memstrat_values: Sequence[float], other_values: Sequence[float]) -> SideBySide:
    m, o = summarize(memstrat_values), summarize(other_values)
    return SideBySide(m, o, ratio(memstrat_values, other_values))


def judge(pairs: Sequence[SideBySide]) -> Sequence[SideBySide]:
    """Holm over the pairs one table compares: each pair's p becomes its adjusted p."""
    tested = [p for p in pairs if p.effect is not None]
    for p, adj in zip(tested, holm([p.effect.p for p in tested])):
        p.p_holm = adj
    return pairs


def fastest(items: Sequence[T], values: Callable[[T], Sequence[float]]) -> list[T]:
    """The items no other item is significantly faster than (rank 1 of analysis/stats.py's
    Holm-corrected pairwise tests), by median; empty when no item has 3 processes."""
    return [r.item for r in rank_by_tests(items, values) if r.rank == 1]


# ---------------------------------------------------------------------------------------------
# table cells

def pairs_against(by_key: dict[tuple, list[dict]], reference: str, variant_at: int,
                  order: Callable[[tuple], tuple]) -> list[tuple[tuple, SideBySide]]:
    """Every configuration of `by_key` (a tuple key with the variant at position `variant_at` ->
    its run records) against the `reference` variant's configuration that differs only in the
    variant, in `order`, Holm-corrected over all of them (one family); a configuration whose
    reference did not run is left out."""
    rows = []
    for key in sorted(by_key, key=order):
        if key[variant_at] == reference:
            continue
        mine = by_key.get(key[:variant_at] + (reference,) + key[variant_at + 1:])
        if not mine:
            continue
        rows.append((key, side_by_side(process_values(mine), process_values(by_key[key]))))
    judge([p for _, p in rows])
    return rows


def ms_cell(s: Summary | None, missing: str = "not run") -> str:
    """'15.50 [15.40-15.62] n=3' (UNSTABLE appended when unstable), '15.50 (n=1)', `missing`."""
    return missing if s is None else median_with_interval(s, lambda v: f"{v:.2f}")


def pct_cell(s: Summary | None, missing: str = "n/a") -> str:
    """A share (0.123) as '12.3% [10.0%-14.1%] n=3'."""
    return missing if s is None else median_with_interval(s, lambda v: f"{100 * v:.1f}%")


def ratio_cell(p: SideBySide) -> str:
    if p.effect is None:
        if p.memstrat is None or p.other is None or p.memstrat.median <= 0:
            return "-"
        return f"{p.other.median / p.memstrat.median:.2f}x (medians; too few processes)"
    return f"{p.effect.estimate:.2f}x " + interval_text(p.effect.ci, lambda v: f"{v:.2f}")


def overlap_cell(p: SideBySide, other: str) -> str:
    """The column that says whether the test separates the two sides, i.e. whether either side
    may be called faster."""
    o = p.order
    if o == NOT_SEPARATED:
        return f"not separated (p={p.p:.2g}): not ordered"
    if o == MEMSTRAT_FASTER:
        return f"memstrat faster (p={p.p:.2g})"
    if o == OTHER_FASTER:
        return f"{other} faster (p={p.p:.2g})"
    if p.memstrat is None or p.other is None:
        return "-"
    return "too few processes (n<3)"


def tally(pairs: Sequence[SideBySide], other: str) -> str:
    """'memstrat faster in 5 of 6, not separated in 1; ratio 1.20x to 9.80x, geometric mean
    3.10x' (pairs judged together by `judge`)."""
    orders = [p.order for p in pairs]
    counts = [(orders.count(MEMSTRAT_FASTER), "memstrat faster (Holm-corrected test)"),
              (orders.count(OTHER_FASTER), f"{other} faster (Holm-corrected test)"),
              (orders.count(NOT_SEPARATED), "not separated by the test (not ordered)"),
              (orders.count(NOT_JUDGED), "not judged (a side missing or n<3)")]
    text = "; ".join(f"{what} in {n} of {len(pairs)}" for n, what in counts if n)
    ratios = [p.ratio for p in pairs if p.ratio is not None]
    if ratios:
        geo = statistics.geometric_mean(ratios)
        text += (f"; {other} / memstrat (Hodges-Lehmann) {min(ratios):.2f}x to "
                 f"{max(ratios):.2f}x, geometric mean {geo:.2f}x")
    return text
