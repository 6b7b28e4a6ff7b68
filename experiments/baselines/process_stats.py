"""memstrat against a PyTorch side, configuration by configuration, over processes
(docs/methodology.md, "Statistics over processes"; the statistics are analysis/stats.py's):

- a process's value is the median of its steady epochs 2..N (analysis/aggregate.py);
- each side of a configuration: the median over its processes with the seeded bootstrap 95%
  interval of that median (no interval with fewer than 3 processes);
- the ratio PyTorch side / memstrat of the two medians, with the interval of a bootstrap of
  the ratio (each side's processes resampled on their own);
- when the two sides' intervals overlap, neither is called faster.
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from analysis.aggregate import process_median  # noqa: E402  (the one per-process value)
from analysis.stats import (Interval, Summary, bootstrap_ratio_ci,  # noqa: E402
                            median_with_interval, summarize, tiers)

T = TypeVar("T")
# SideBySide.order values
MEMSTRAT_FASTER, OTHER_FASTER, OVERLAP, NOT_JUDGED = "memstrat", "other", "overlap", "not judged"


def process_values(records: Iterable[dict], metric: str = "wall_ms") -> list[float]:
    """One value per process (record): the median of its steady epochs; nulls left out."""
    return [v for v in (process_median(r, metric) for r in records) if v is not None]


@dataclass(frozen=True)
class SideBySide:
    """One configuration: memstrat's processes against the PyTorch side's."""
    memstrat: Summary | None
    other: Summary | None
    ratio: float | None          # median(other) / median(memstrat)
    ratio_ci: Interval | None

    @property
    def order(self) -> str:
        """MEMSTRAT_FASTER / OTHER_FASTER only when the two intervals are apart; OVERLAP when
        they overlap; NOT_JUDGED when a side is missing or has no interval."""
        m, o = self.memstrat, self.other
        if m is None or o is None or m.ci is None or o.ci is None:
            return NOT_JUDGED
        if m.ci.overlaps(o.ci):
            return OVERLAP
        return MEMSTRAT_FASTER if m.ci.high < o.ci.low else OTHER_FASTER


def side_by_side(memstrat_values: Sequence[float], other_values: Sequence[float]) -> SideBySide:
    m, o = summarize(memstrat_values), summarize(other_values)
    if m is None or o is None or m.median <= 0:
        return SideBySide(m, o, None, None)
    return SideBySide(m, o, o.median / m.median,
                      bootstrap_ratio_ci(memstrat_values, other_values))


def fastest_tier(items: Sequence[T], summary: Callable[[T], Summary | None]) -> list[T]:
    """The items no other item is faster than, by non-overlapping intervals (analysis/stats.py
    tiers); empty when no item has an interval."""
    ts = tiers(items, summary)
    return ts[0] if ts else []


# ---------------------------------------------------------------------------------------------
# table cells

def ms_cell(s: Summary | None, missing: str = "not run") -> str:
    """'15.50 [15.40-15.62] n=3' (UNSTABLE appended when unstable), '15.50 (n=1)', `missing`."""
    return missing if s is None else median_with_interval(s, lambda v: f"{v:.2f}")


def pct_cell(s: Summary | None, missing: str = "n/a") -> str:
    """A share (0.123) as '12.3% [10.0%-14.1%] n=3'."""
    return missing if s is None else median_with_interval(s, lambda v: f"{100 * v:.1f}%")


def ratio_cell(p: SideBySide) -> str:
    if p.ratio is None:
        return "-"
    if p.ratio_ci is None:
        return f"{p.ratio:.2f}x (no interval)"
    return f"{p.ratio:.2f}x [{p.ratio_ci.low:.2f}-{p.ratio_ci.high:.2f}]"


def overlap_cell(p: SideBySide, other: str) -> str:
    """The column that says whether the two intervals overlap, i.e. whether either side may be
    called faster."""
    o = p.order
    if o == OVERLAP:
        return "overlap: not ordered"
    if o == MEMSTRAT_FASTER:
        return "apart: memstrat faster"
    if o == OTHER_FASTER:
        return f"apart: {other} faster"
    if p.memstrat is None or p.other is None:
        return "-"
    return "no interval (n<3)"


def tally(pairs: Sequence[SideBySide], other: str) -> str:
    """'memstrat faster (intervals apart) in 5 of 6, intervals overlap in 1; ratio of the
    medians 1.20x to 9.80x, geometric mean 3.10x'."""
    orders = [p.order for p in pairs]
    counts = [(orders.count(MEMSTRAT_FASTER), "memstrat faster (intervals apart)"),
              (orders.count(OTHER_FASTER), f"{other} faster (intervals apart)"),
              (orders.count(OVERLAP), "intervals overlap (not ordered)"),
              (orders.count(NOT_JUDGED), "not judged (a side missing or n<3)")]
    text = "; ".join(f"{what} in {n} of {len(pairs)}" for n, what in counts if n)
    ratios = [p.ratio for p in pairs if p.ratio is not None]
    if ratios:
        geo = statistics.geometric_mean(ratios)
        text += (f"; {other} / memstrat of the medians {min(ratios):.2f}x to "
                 f"{max(ratios):.2f}x, geometric mean {geo:.2f}x")
    return text
