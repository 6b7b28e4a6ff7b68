"""Where the spread of an unstable configuration lies: between processes, or inside them.

A configuration is unstable (stats.py) when the interval of its median over processes is wide.
That says nothing of why. Each process times many steady epochs, so its own epochs tell the two
cases apart:

- **between processes**: every process is steady by itself, but processes settle at different
  levels (placement, allocation, clocks decided once per process). The epochs of the different
  processes are then not samples of one distribution: Kruskal-Wallis over the processes' steady
  epochs (`scipy.stats.kruskal`) rejects it.
- **within processes**: a process changes level during its run (a state the driver or the host
  enters mid-run and keeps). Per process, the first half of its steady epochs against the second
  half by a two-sided Mann-Whitney U test (`scipy.stats.mannwhitneyu`), Holm-corrected over the
  configuration's processes (stats.holm); a *level shift* is a significant test whose two halves'
  medians differ by more than UNSTABLE_HALF_WIDTH of the process's median. A shift at another
  point than the middle still moves one half's median, less so the nearer it is to an end.

The rule is pre-declared and applied alike to every unstable configuration: ALPHA for both tests,
halves of the steady epochs (at least MIN_HALF epochs each, else the process is not tested).
Each part of the epoch a record times (copy, stall, compute, host) is spread over processes too:
the part whose range of process medians is near the epoch's carries the spread.

Spikes (single slow epochs) move neither a process's median nor, much, a half's: they are not
what makes a configuration unstable and are not reported here.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Sequence

from scipy import stats as sps

from analysis.stats import ALPHA, UNSTABLE_HALF_WIDTH, holm

MIN_HALF = 4          # steady epochs in each half for a process's level-shift test


@dataclasses.dataclass(frozen=True)
class SpreadDiagnosis:
    processes: int
    process_min: float            # the lowest and highest process medians
    process_max: float
    within_iqr: float             # median over processes of (IQR / median) of its steady epochs
    between: bool                 # Kruskal-Wallis over processes rejects one distribution
    between_p: float | None
    tested: int                   # processes with enough steady epochs for the halves test
    shifted: int                  # of them, processes with a level shift

    @property
    def where(self) -> str:
        """'between processes', 'within processes', 'both' or 'not located'."""
        inside = self.shifted > 0
        if self.between and inside:
            return "both"
        if self.between:
            return "between processes"
        if inside:
            return "within processes"
        return "not located"


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _iqr_share(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    m = _median(values)
    return (q3 - q1) / m if m else 0.0


def level_shift_p(epochs: Sequence[float]) -> tuple[float, float] | None:
    """(p, |median(second half) - median(first half)| / median) of one process's steady epochs
    (an odd count leaves the middle epoch out); None with fewer than MIN_HALF epochs a half."""
    half = len(epochs) // 2
    if half < MIN_HALF:
        return None
    first, second = list(epochs[:half]), list(epochs[len(epochs) - half:])
    m = _median(epochs)
    step = abs(_median(second) - _median(first)) / m if m else 0.0
    if min(first) == max(first) == min(second) == max(second):
        return 1.0, step
    p = float(sps.mannwhitneyu(first, second, alternative="two-sided").pvalue)
    return p, step


def diagnose(per_process: Sequence[Sequence[float]]) -> SpreadDiagnosis | None:
    """The diagnosis of one configuration from each process's steady epoch values (e.g. wall ms
    per epoch); None with fewer than two processes that have two or more values."""
    runs = [[float(v) for v in p if v is not None] for p in per_process]
    runs = [r for r in runs if len(r) >= 2]
    if len(runs) < 2:
        return None
    medians = [_median(r) for r in runs]
    distinct = len({v for r in runs for v in r}) > 1
    between_p = float(sps.kruskal(*runs).pvalue) if distinct else 1.0
    tests = [level_shift_p(r) for r in runs]
    tested = [t for t in tests if t is not None]
    adjusted = holm([p for p, _ in tested]) if tested else []
    shifted = sum(1 for (_, step), p in zip(tested, adjusted)
                  if p < ALPHA and step > UNSTABLE_HALF_WIDTH)
    spread = (max(medians) - min(medians)) / _median(medians) if _median(medians) else 0.0
    return SpreadDiagnosis(
        processes=len(runs), process_min=min(medians), process_max=max(medians),
        within_iqr=_median([_iqr_share(r) for r in runs]),
        between=between_p < ALPHA and spread > 2 * UNSTABLE_HALF_WIDTH, between_p=between_p,
        tested=len(tested), shifted=shifted)


RULE = (f"Between processes: Kruskal-Wallis over the processes' steady epochs rejects one "
        f"distribution at {ALPHA:g} and the process medians span more than "
        f"{2 * UNSTABLE_HALF_WIDTH:.0%} of their median. Within processes: a level shift, the "
        f"first half of a process's steady epochs against the second by Mann-Whitney, "
        f"Holm-corrected over the configuration's processes at {ALPHA:g}, the halves' medians "
        f"more than {UNSTABLE_HALF_WIDTH:.0%} apart (analysis/spread.py).")


def steady_values(record: dict, metric: str = "wall_ms") -> list[float]:
    """One process's steady epoch values of `metric` (epochs 2..N, nulls dropped)."""
    eps = record["epochs"]
    eps = eps[1:] if len(eps) > 1 else eps
    return [float(e[metric]) for e in eps if e.get(metric) is not None]


# The parts of an epoch a record times (docs/methodology.md, "Timing"): which of them carries an
# unstable configuration's spread says where to look (the strategy's own copies or prefetches,
# the step waiting for them, the step itself, the host's work).
PARTS = (("copy_ms", "copy"), ("stall_ms", "stall"), ("compute_ms", "compute"),
         ("host_ms", "host"))


@dataclasses.dataclass(frozen=True)
class PartSpread:
    label: str
    low: float                    # the lowest and highest process medians of the part, ms
    high: float

    @property
    def span(self) -> float:
        return self.high - self.low


def part_spreads(records: Sequence[dict]) -> list[PartSpread]:
    """Per part of the epoch that every one of `records` times: the range of the processes'
    medians of its steady epochs, the widest first (ties in PARTS order)."""
    out = []
    for metric, label in PARTS:
        per_process = [steady_values(r, metric) for r in records]
        if len(per_process) < 2 or not all(per_process):
            continue
        medians = [_median(v) for v in per_process]
        out.append(PartSpread(label, min(medians), max(medians)))
    return sorted(out, key=lambda p: -p.span)


def format_parts(parts: Sequence[PartSpread]) -> str:
    """"copy 6.1-17.6; stall 0.8-12.3; ..."; a part below 0.01 ms in every process as "<0.01"."""
    return "; ".join(f"{p.label} <0.01" if p.high < 0.01 else f"{p.label} {p.low:.3g}-{p.high:.3g}"
                     for p in parts) or "not timed"


PARTS_NOTE = ("By part: the lowest and highest process medians of each part of the epoch the "
              "records time, the widest first (copy: the GPU time of the strategy's own copies "
              "or prefetches; stall: the step waiting for its data; compute: the step; host: "
              "the host's work within the epoch; docs/methodology.md, \"Timing\"). The part "
              "whose range is near the epoch's is the one that carries the spread.")

HEADERS = ("configuration", "processes", "process medians, ms", "within-process IQR",
           "level shifts", "the spread lies", "by part, ms")


def table_rows(groups: Sequence) -> list[list[str]]:
    """One row per unstable configuration (aggregate.Group whose wall_ms is unstable), from its
    timing runs' steady wall-clock epochs."""
    rows = []
    for g in groups:
        s = g.stat("wall_ms")
        if not (s and s.unstable):
            continue
        d = diagnose([steady_values(r) for r in g.timing_records])
        if d is None:
            continue
        k = g.key
        rows.append([f"{k.variant_label} {k.scenario}/{k.transfer}/b{k.batch}", str(d.processes),
                     f"{d.process_min:.4g}-{d.process_max:.4g}", f"{d.within_iqr:.1%}",
                     f"{d.shifted} of {d.tested}", d.where,
                     format_parts(part_spreads(g.timing_records))])
    return sorted(rows)
