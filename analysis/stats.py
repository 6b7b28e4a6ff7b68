"""Statistics over processes: the median and its interval, effects between two configurations,
pairwise tests with Holm's correction, ranks, the instability rule. Every table, plot, the
regression guard and the docs blocks take their statistics from here.

A configuration's published time is built from several *processes* (independent `memstrat
train` runs): each contributes one value, the median of its own steady epochs (aggregate.py).
Epochs of one process are not independent samples of the configuration (they share clocks,
placement, allocation luck), so every interval and test here is over processes.

- `summarize(values)`: the median over processes with a distribution-free interval from order
  statistics (the interval of `scipy.stats.quantile_test`). Its coverage is computed exactly from the binomial
  (`scipy.stats.binom`) and travels with the interval: at least 95% wherever n >= 6 (97.85% at
  n = 10, 95.86% at n = 20); with 3..5 processes no 95% interval exists and the interval is
  [min, max] with its true coverage (75%, 87.5%, 93.75%), labelled so. Below 3: none.
- `shift(base, new)` / `ratio(base, new)`: the Hodges-Lehmann estimate of new - base (the
  median of all pairwise differences; for the ratio, of all pairwise ratios) with the Moses
  interval, whose coverage comes from the exact null distribution of the Mann-Whitney U
  statistic (`scipy.stats.mannwhitneyu`): exact when the two differ by a shift (by a factor,
  for the ratio), the model the interval assumes.
- `mann_whitney_p(a, b)`: two-sided Mann-Whitney U p-value (exact without ties).
  `holm(pvalues)`: Holm's step-down adjustment (SciPy has none; BH/BY control something else).
  `rank_by_tests(...)`: rank = 1 + the number of items significantly faster after Holm over
  every pair of the family; never a chain of overlapping intervals.
- Unstable (the one rule, applied alike everywhere): an interval of at least 95% coverage whose
  half-width exceeds 5% of the median. Below n = 6 stability is not assessed ("unknown").

Definitions and their coverage: docs/methodology.md, "Statistics over processes".
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Sequence, TypeVar

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE        # family-wise error rate of a table's pairwise tests
MIN_PROCESSES = 3               # fewer: no interval at all (two values give a 50% interval)
UNSTABLE_HALF_WIDTH = 0.05      # half-width / median above this: unstable
MEDIAN_METHOD = "order statistics"
MOSES_METHOD = "Moses (Mann-Whitney)"
_EXACT_MAX_PAIRS = 2500         # m * n above this: the U distribution's normal approximation

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Interval:
    low: float
    high: float
    coverage: float = CONFIDENCE   # probability the interval holds the true value
    method: str = MEDIAN_METHOD

    @property
    def meets_target(self) -> bool:
        """Coverage of at least CONFIDENCE (a 95% interval, or better)."""
        return self.coverage >= CONFIDENCE - 1e-12

    def overlaps(self, other: "Interval") -> bool:
        """Closed intervals: touching ends count as overlapping."""
        return self.low <= other.high and other.low <= self.high

    def coverage_label(self) -> str:
        """'95.9%', '93.75%': the exact coverage, as printed beside the interval."""
        pct = 100.0 * self.coverage
        text = f"{pct:.2f}".rstrip("0").rstrip(".")
        return text + "%"


@dataclasses.dataclass(frozen=True)
class Summary:
    """One configuration's value over its processes."""
    median: float
    n: int                        # processes
    min: float
    max: float
    rel_iqr: float | None         # (p75 - p25) / median over processes; None if median == 0
    ci: Interval | None           # order-statistic interval of the median; None if n < 2

    @property
    def half_width_pct(self) -> float | None:
        """Interval half-width in % of the median (None without an interval)."""
        if self.ci is None or self.median == 0:
            return None
        return (self.ci.high - self.ci.low) / 2.0 / abs(self.median) * 100.0

    @property
    def unstable(self) -> bool | None:
        """The instability rule; None (not assessed) without an interval of >= 95% coverage."""
        hw = self.half_width_pct
        if hw is None or not self.ci.meets_target:
            return None
        return hw > UNSTABLE_HALF_WIDTH * 100.0


@dataclasses.dataclass(frozen=True)
class Effect:
    """new against base: a Hodges-Lehmann estimate with its Moses interval, and (computed when
    first read) the two-sided Mann-Whitney U p-value, unadjusted."""
    estimate: float
    ci: Interval
    n_base: int
    n_new: int
    base: tuple = dataclasses.field(default=(), repr=False, compare=False)
    new: tuple = dataclasses.field(default=(), repr=False, compare=False)

    @functools.cached_property
    def p(self) -> float:
        return mann_whitney_p(self.base, self.new)


def _clean(values: Sequence[float | None]) -> np.ndarray:
    """Non-null values, sorted: a result depends on the values, not on record order."""
    if isinstance(values, np.ndarray):
        return np.sort(values.astype(float, copy=False))
    return np.sort(np.asarray([float(v) for v in values if v is not None], dtype=float))


# --------------------------------------------------------------------------------------
# The median and its interval
# --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def order_statistic_coverage(n: int, j: int) -> float:
    """Exact coverage of [X(j), X(n+1-j)] for the median of a continuous distribution."""
    return float(1.0 - 2.0 * sps.binom.cdf(j - 1, n, 0.5))


def median_interval(values: Sequence[float | None],
                    confidence: float = CONFIDENCE) -> Interval | None:
    """Order-statistic interval [X(j), X(n+1-j)] of the median, j the largest whose exact
    coverage reaches `confidence`; [min, max] with its (lower) true coverage when none does;
    None below 2 values. (The same interval as scipy.stats.quantile_test's, which leaves it
    undefined where no order statistic reaches the confidence.)"""
    x = _clean(values)
    n = len(x)
    if n < MIN_PROCESSES:
        return None
    j = _order_statistic_rank(n, confidence)
    return Interval(float(x[j - 1]), float(x[n - j]), order_statistic_coverage(n, j),
                    MEDIAN_METHOD)


@functools.lru_cache(maxsize=None)
def _order_statistic_rank(n: int, confidence: float) -> int:
    js = np.arange(1, n // 2 + 1)
    ok = js[1.0 - 2.0 * sps.binom.cdf(js - 1, n, 0.5) >= confidence - 1e-12]
    return int(ok.max()) if len(ok) else 1


def summarize(values: Sequence[float | None], with_ci: bool = True) -> Summary | None:
    """Summary of per-process values (nulls dropped); None when no value is left."""
    arr = _clean(values)
    if len(arr) == 0:
        return None
    med = float(np.median(arr))
    p25, p75 = np.percentile(arr, [25, 75])
    return Summary(median=med, n=len(arr), min=float(arr.min()), max=float(arr.max()),
                   rel_iqr=float((p75 - p25) / abs(med)) if med != 0 else None,
                   ci=median_interval(arr) if with_ci else None)


# --------------------------------------------------------------------------------------
# Two configurations: Mann-Whitney U, Hodges-Lehmann, Moses
# --------------------------------------------------------------------------------------
def _mwu_method(a: np.ndarray, b: np.ndarray) -> str:
    tied = len(np.unique(np.concatenate([a, b]))) < len(a) + len(b)
    return "asymptotic" if tied or len(a) * len(b) > _EXACT_MAX_PAIRS else "exact"


def mann_whitney_p(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    """Two-sided Mann-Whitney U p-value of a against b; None when a side is empty."""
    x, y = _clean(a), _clean(b)
    if len(x) == 0 or len(y) == 0:
        return None
    method = _mwu_method(x, y)
    if method == "exact":
        # Without ties the exact p depends only on U and the sizes: SciPy's answer for the
        # same (U, m, n) is asked once (a report makes thousands of these tests).
        return _exact_two_sided_p(int((x[:, None] > y[None, :]).sum()), len(x), len(y))
    return float(sps.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)


@functools.lru_cache(maxsize=None)
def _exact_two_sided_p(u: int, m: int, n: int) -> float:
    x, y = _samples_with_u(u, m, n)
    return float(sps.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue)


def _samples_with_u(u: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """m x's and n y's, all distinct, whose U statistic (#{x_i > y_j}) is exactly u: y at 0, 2,
    ..., 2n-2 and x_i just above c_i of them, sum c_i = u."""
    counts = [min(n, max(0, u - n * i)) for i in range(m)]
    x = np.array([2.0 * c - 1.0 + (i + 1) / (m + 2.0) for i, c in enumerate(counts)])
    return x, 2.0 * np.arange(n, dtype=float)


def min_attainable_p(m: int, n: int) -> float:
    """The smallest two-sided p the exact test can give with m and n values: 2 / C(m+n, m)."""
    return min(1.0, 2.0 / math.comb(m + n, m))


@functools.lru_cache(maxsize=None)
def u_cdf(u: int, m: int, n: int) -> float:
    """P(U <= u) under the null hypothesis, U = #{(i, j): x_i > y_j} for m x's and n y's, from
    SciPy's Mann-Whitney distribution. SciPy exposes it only through the test, so this builds
    two samples whose U statistic is exactly u (y at 0, 2, ..., 2n-2; x_i placed just above c_i
    of them, sum c_i = u, kept distinct) and asks for the one-sided p-value."""
    if u < 0:
        return 0.0
    if u >= m * n:
        return 1.0
    x, y = _samples_with_u(u, m, n)
    method = "exact" if m * n <= _EXACT_MAX_PAIRS else "asymptotic"
    res = sps.mannwhitneyu(x, y, alternative="less", method=method)
    return float(res.pvalue)


def _moses(diffs: np.ndarray, m: int, n: int, confidence: float) -> tuple[float, float, float]:
    """(low, high, coverage) of the Moses interval from the sorted m*n pairwise differences."""
    tail = (1.0 - confidence) / 2.0
    lo, hi = 1, (m * n + 1) // 2     # largest k with P(U <= k - 1) <= tail, by bisection
    if u_cdf(0, m, n) > tail:
        k = 1
    else:
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if u_cdf(mid - 1, m, n) <= tail:
                lo = mid
            else:
                hi = mid - 1
        k = lo
    coverage = 1.0 - 2.0 * u_cdf(k - 1, m, n)
    return float(diffs[k - 1]), float(diffs[m * n - k]), coverage


def shift_interval(base: Sequence[float | None], new: Sequence[float | None],
                   confidence: float = CONFIDENCE) -> tuple[float, Interval] | None:
    """new - base: (Hodges-Lehmann estimate, Moses interval); None when a side has < 2 values."""
    x, y = _clean(base), _clean(new)
    if len(x) < MIN_PROCESSES or len(y) < MIN_PROCESSES:
        return None
    diffs = np.sort((y[None, :] - x[:, None]).ravel())
    low, high, cov = _moses(diffs, len(x), len(y), confidence)
    return float(np.median(diffs)), Interval(low, high, cov, MOSES_METHOD)


def ratio_interval(base: Sequence[float | None], new: Sequence[float | None],
                   confidence: float = CONFIDENCE) -> tuple[float, Interval] | None:
    """new / base: the shift of the logarithms, back on the ratio scale; None when a side has
    < 2 values or a value is not positive."""
    x, y = _clean(base), _clean(new)
    if len(x) < MIN_PROCESSES or len(y) < MIN_PROCESSES or x[0] <= 0 or y[0] <= 0:
        return None
    est, ci = shift_interval(np.log(x), np.log(y), confidence)
    return math.exp(est), Interval(math.exp(ci.low), math.exp(ci.high), ci.coverage,
                                   MOSES_METHOD)


def shift(base: Sequence[float | None], new: Sequence[float | None],
          confidence: float = CONFIDENCE) -> Effect | None:
    """new - base as an Effect (estimate, interval, Mann-Whitney p); None as shift_interval."""
    got = shift_interval(base, new, confidence)
    return None if got is None else _effect(got, base, new)


def ratio(base: Sequence[float | None], new: Sequence[float | None],
          confidence: float = CONFIDENCE) -> Effect | None:
    """new / base as an Effect; None as ratio_interval."""
    got = ratio_interval(base, new, confidence)
    return None if got is None else _effect(got, base, new)


def _effect(got: tuple[float, Interval], base, new) -> Effect:
    b, n = tuple(_clean(base)), tuple(_clean(new))
    return Effect(got[0], got[1], len(b), len(n), b, n)


def family_can_order(sizes: Sequence[int], alpha: float = ALPHA) -> bool:
    """Whether any pair of a family of items with these process counts can be significant
    after Holm's correction over all its pairs: the smallest attainable p of the two largest
    samples, times the number of pairs, below alpha."""
    n = sorted(x for x in sizes if x >= MIN_PROCESSES)
    pairs = len(n) * (len(n) - 1) // 2
    return pairs > 0 and min_attainable_p(n[-1], n[-2]) * pairs < alpha


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order (monotone, capped at 1)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclasses.dataclass(frozen=True)
class Ranked:
    item: object
    rank: int | None          # 1 + items significantly faster; None: too few processes
    faster_than: int          # items it is significantly faster than


def rank_by_tests(items: Sequence[T], values: Callable[[T], Sequence[float]],
                  alpha: float = ALPHA) -> list[Ranked]:
    """Rank items (lower values are better) from every pairwise Mann-Whitney test of the family,
    Holm-adjusted: an item's rank is 1 + the number of items significantly lower. Items with
    fewer than 2 values are not tested (rank None). Sorted by rank, then by median."""
    vals = [_clean(values(i)) for i in items]
    testable = [k for k, v in enumerate(vals) if len(v) >= MIN_PROCESSES]
    pairs = [(a, b) for ai, a in enumerate(testable) for b in testable[ai + 1:]]
    adj = holm([mann_whitney_p(vals[a], vals[b]) for a, b in pairs]) if pairs else []
    lower = {k: 0 for k in testable}
    wins = {k: 0 for k in testable}
    for (a, b), p in zip(pairs, adj):
        if p < alpha:
            lo, hi = (a, b) if np.median(vals[a]) < np.median(vals[b]) else (b, a)
            lower[hi] += 1
            wins[lo] += 1
    out = [Ranked(items[k], 1 + lower[k] if k in lower else None, wins.get(k, 0))
           for k in range(len(items))]
    med = [float(np.median(v)) if len(v) else math.inf for v in vals]
    order = sorted(range(len(items)),
                   key=lambda k: (out[k].rank is None, out[k].rank or 0, med[k]))
    return [out[k] for k in order]


# --------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------
def interval_text(ci: Interval, fmt: Callable[[float], str] | None = None) -> str:
    """'[4.81, 4.95]', with its coverage appended when it is below 95%: '[4.8, 5.1] 93.75%'."""
    fmt = fmt or _short
    text = f"[{fmt(ci.low)}, {fmt(ci.high)}]"
    return text if ci.meets_target else f"{text} {ci.coverage_label()}"


def describe_interval(s: Summary | None) -> str:
    """'[4.81, 4.95] ±1.4%' or 'n=1, no interval' (never an invented interval)."""
    if s is None:
        return "n/a"
    if s.ci is None:
        return f"n={s.n}, no interval"
    return f"{interval_text(s.ci)} ±{s.half_width_pct:.1f}%"


def median_with_interval(s: Summary | None, fmt: Callable[[float], str] | None = None) -> str:
    """Compact '4.65 [4.6-4.69] n=5' (' UNSTABLE' appended when unstable) or '11 (n=1)'
    without an interval, for secondary table columns; numbers formatted with `fmt`."""
    fmt = fmt or _short
    if s is None:
        return "n/a"
    if s.ci is None:
        return f"{fmt(s.median)} (n={s.n})"
    cov = "" if s.ci.meets_target else f" {s.ci.coverage_label()}"
    return (f"{fmt(s.median)} [{fmt(s.ci.low)}-{fmt(s.ci.high)}]{cov} n={s.n}"
            + (" UNSTABLE" if s.unstable else ""))


def stability_label(s: Summary | None) -> str:
    if s is None:
        return "n/a"
    if s.unstable is None:
        return "not assessed (n<6)"
    return "UNSTABLE" if s.unstable else "stable"


def _short(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"

