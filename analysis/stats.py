"""Statistics over processes: the median, its bootstrap interval, spread, stability, tiers.

A configuration's published time is built from several *processes* (independent
`memstrat train` runs): each process contributes one value, the median of its own steady
epochs (aggregate.py). Epochs of one process are not independent samples of the
configuration (they share clocks, placement, allocation luck), so every interval here is
over processes, never over pooled epochs.

- `summarize(values)`: median over processes, a seeded percentile-bootstrap 95% interval of
  that median (10,000 resamples), min/max and the relative IQR. With fewer than
  MIN_PROCESSES processes there is no interval (`ci` is None) and `describe_interval` says so.
- A summary is *unstable* when its interval's half-width exceeds 5% of its median.
- `tiers(...)`: groups items so that no two items whose intervals overlap are ever ordered.
- `bootstrap_ratio_ci(base, new)`: interval of median(new) / median(base).

The bootstrap uses a fixed seed and sorts its input, so the same values always give the
same interval, in whatever order the records list them.
Definitions: docs/methodology.md, "Statistics over processes".
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence, TypeVar

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261121
MIN_PROCESSES = 3          # fewer processes: no interval is claimed
UNSTABLE_HALF_WIDTH = 0.05  # interval half-width / median above this: unstable

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def overlaps(self, other: "Interval") -> bool:
        """Closed intervals: touching ends count as overlapping."""
        return self.low <= other.high and other.low <= self.high


@dataclasses.dataclass(frozen=True)
class Summary:
    """One configuration's value over its processes."""
    median: float
    n: int                        # processes
    min: float
    max: float
    rel_iqr: float | None         # (p75 - p25) / median over processes; None if median == 0
    ci: Interval | None           # bootstrap interval of the median; None if n < MIN_PROCESSES

    @property
    def half_width_pct(self) -> float | None:
        """Interval half-width in % of the median (None without an interval)."""
        if self.ci is None or self.median == 0:
            return None
        return (self.ci.high - self.ci.low) / 2.0 / abs(self.median) * 100.0

    @property
    def unstable(self) -> bool | None:
        """True/False when there is an interval; None when there is none (not known)."""
        hw = self.half_width_pct
        return None if hw is None else hw > UNSTABLE_HALF_WIDTH * 100.0


def describe_interval(s: Summary | None) -> str:
    """'[4.81, 4.95] ±1.4%' or 'n=1, no interval' (never an invented interval)."""
    if s is None:
        return "n/a"
    if s.ci is None:
        return f"n={s.n}, no interval"
    return f"[{_short(s.ci.low)}, {_short(s.ci.high)}] ±{s.half_width_pct:.1f}%"


def median_with_interval(s: Summary | None, fmt: Callable[[float], str] | None = None) -> str:
    """Compact '4.65 [4.6-4.69] n=5' (' UNSTABLE' appended when unstable) or '11 (n=1)'
    without an interval, for secondary table columns; numbers formatted with `fmt`."""
    fmt = fmt or _short
    if s is None:
        return "n/a"
    if s.ci is None:
        return f"{fmt(s.median)} (n={s.n})"
    return (f"{fmt(s.median)} [{fmt(s.ci.low)}-{fmt(s.ci.high)}] n={s.n}"
            + (" UNSTABLE" if s.unstable else ""))


def stability_label(s: Summary | None) -> str:
    if s is None:
        return "n/a"
    if s.unstable is None:
        return f"unknown (n<{MIN_PROCESSES})"
    return "UNSTABLE" if s.unstable else "stable"


def _short(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"


def _clean(values: Sequence[float | None]) -> np.ndarray:
    """Non-null values, sorted: an interval depends on the values, not on record order."""
    return np.sort(np.asarray([float(v) for v in values if v is not None], dtype=float))


def _bootstrap_medians(values: np.ndarray, rng: np.random.Generator,
                       resamples: int) -> np.ndarray:
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.median(values[idx], axis=1)


def _percentile_interval(samples: np.ndarray, confidence: float) -> Interval:
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(samples, [tail, 100.0 - tail])
    return Interval(float(lo), float(hi))


def bootstrap_median_ci(values: Sequence[float | None], confidence: float = CONFIDENCE,
                        resamples: int = RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> Interval | None:
    """Percentile-bootstrap interval of the median; None with fewer than MIN_PROCESSES."""
    arr = _clean(values)
    if len(arr) < MIN_PROCESSES:
        return None
    rng = np.random.default_rng(seed)
    return _percentile_interval(_bootstrap_medians(arr, rng, resamples), confidence)


def bootstrap_ratio_ci(base: Sequence[float | None], new: Sequence[float | None],
                       confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> Interval | None:
    """Interval of median(new) / median(base), each side resampled on its own.

    None when either side has fewer than MIN_PROCESSES values or a resampled base median
    is 0.
    """
    b, n = _clean(base), _clean(new)
    if len(b) < MIN_PROCESSES or len(n) < MIN_PROCESSES:
        return None
    rng = np.random.default_rng(seed)
    mb = _bootstrap_medians(b, rng, resamples)
    mn = _bootstrap_medians(n, rng, resamples)
    if np.any(mb == 0):
        return None
    return _percentile_interval(mn / mb, confidence)


def summarize(values: Sequence[float | None], with_ci: bool = True) -> Summary | None:
    """Summary of per-process values (nulls dropped); None when no value is left."""
    arr = _clean(values)
    if len(arr) == 0:
        return None
    med = float(np.median(arr))
    p25, p75 = np.percentile(arr, [25, 75])
    return Summary(median=med, n=len(arr), min=float(arr.min()), max=float(arr.max()),
                   rel_iqr=float((p75 - p25) / abs(med)) if med != 0 else None,
                   ci=bootstrap_median_ci(arr) if with_ci else None)


def tiers(items: Sequence[T], summary: Callable[[T], Summary | None]) -> list[list[T]]:
    """Order items into tiers, fastest (lowest) first; items without an interval are left out.

    Two items are put in different tiers only when their intervals do not overlap, and
    every item of a later tier lies wholly above every item of an earlier one: tiers are
    the connected runs of overlapping intervals (an interval chain A~B~C shares one tier
    even when A and C alone would be distinguishable). Inside a tier items are listed by
    median, which is not a ranking.
    """
    with_ci = [(summary(i), i) for i in items]
    with_ci = [(s, i) for s, i in with_ci if s is not None and s.ci is not None]
    with_ci.sort(key=lambda si: (si[0].ci.low, si[0].median))
    out: list[list[tuple[Summary, T]]] = []
    reach = -np.inf
    for s, i in with_ci:
        if out and s.ci.low <= reach:
            out[-1].append((s, i))
            reach = max(reach, s.ci.high)
        else:
            out.append([(s, i)])
            reach = s.ci.high
    return [[i for _, i in sorted(t, key=lambda si: si[0].median)] for t in out]
