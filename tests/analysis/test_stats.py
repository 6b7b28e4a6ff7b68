"""Statistics over processes (analysis/stats.py): intervals, stability, tiers."""
import random

import pytest

from analysis import stats
from analysis.stats import (Interval, Summary, bootstrap_median_ci, bootstrap_ratio_ci,
                            describe_interval, summarize, tiers)


def test_identical_values_give_a_zero_width_interval():
    ci = bootstrap_median_ci([7.25] * 6)
    assert ci == Interval(7.25, 7.25)
    s = summarize([7.25] * 6)
    assert s.half_width_pct == 0.0 and s.unstable is False


def test_interval_does_not_depend_on_record_order():
    values = [5.31, 4.87, 5.02, 6.40, 4.95, 5.11, 5.77]
    ci = bootstrap_median_ci(values)
    for seed in range(5):
        shuffled = list(values)
        random.Random(seed).shuffle(shuffled)
        assert bootstrap_median_ci(shuffled) == ci
        assert bootstrap_ratio_ci(shuffled, values) == bootstrap_ratio_ci(values, values)


def test_known_spread_gives_sensible_deterministic_bounds():
    values = [float(v) for v in range(1, 21)]          # median 10.5
    ci = bootstrap_median_ci(values)
    assert 1.0 <= ci.low < 10.5 < ci.high <= 20.0
    # the median of 20 values moves little: the interval is well inside the range
    assert 6.0 <= ci.low <= 9.5 and 11.5 <= ci.high <= 15.0
    assert bootstrap_median_ci(values) == ci                    # same seed, same interval
    assert bootstrap_median_ci(list(reversed(values))) == ci    # order does not matter


def test_five_processes_span_min_to_max():
    # P(resampled median = smallest of 5) = 0.058 > 2.5%: the 95% interval is [min, max]
    ci = bootstrap_median_ci([4.9, 5.0, 5.1, 5.3, 5.6])
    assert ci == Interval(4.9, 5.6)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_than_three_processes_have_no_interval(n):
    values = [5.0 + i for i in range(n)]
    assert bootstrap_median_ci(values) is None
    s = summarize(values)
    if n == 0:
        assert s is None
        return
    assert s.ci is None and s.unstable is None and s.half_width_pct is None
    assert describe_interval(s) == f"n={n}, no interval"
    assert stats.stability_label(s) == "unknown (n<3)"


def test_median_with_interval_is_compact_and_says_n():
    assert stats.median_with_interval(None) == "n/a"
    assert stats.median_with_interval(summarize([5.0])) == "5 (n=1)"
    tight = Summary(median=10.0, n=5, min=9.9, max=10.1, rel_iqr=0.0, ci=Interval(9.9, 10.1))
    assert stats.median_with_interval(tight, lambda v: f"{v:.1f}") == "10.0 [9.9-10.1] n=5"
    wide = Summary(median=10.0, n=5, min=8.0, max=12.0, rel_iqr=0.2, ci=Interval(8.0, 12.0))
    assert stats.median_with_interval(wide).endswith("n=5 UNSTABLE")


def test_nulls_are_dropped_not_zeroed():
    s = summarize([None, 4.0, None, 6.0, 5.0])
    assert s.n == 3 and s.median == 5.0 and s.min == 4.0


@pytest.mark.parametrize("half_width_pct, unstable", [(4.99, False), (5.0, False),
                                                      (5.01, True), (30.0, True)])
def test_unstable_threshold_is_five_percent_half_width(half_width_pct, unstable):
    med = 10.0
    hw = med * half_width_pct / 100
    s = Summary(median=med, n=5, min=med - hw, max=med + hw, rel_iqr=0.0,
                ci=Interval(med - hw, med + hw))
    assert s.half_width_pct == pytest.approx(half_width_pct)
    assert s.unstable is unstable
    assert stats.stability_label(s) == ("UNSTABLE" if unstable else "stable")


def test_summary_spread():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 1.0, 5.0, 5)
    assert s.rel_iqr == pytest.approx((4.0 - 2.0) / 3.0)


def _summary(lo, hi, med=None):
    med = (lo + hi) / 2 if med is None else med
    return Summary(median=med, n=5, min=lo, max=hi, rel_iqr=0.0, ci=Interval(lo, hi))


def test_tiers_by_hand():
    items = {"a": _summary(1.0, 2.0), "b": _summary(1.9, 3.0), "c": _summary(2.9, 3.5),
             "d": _summary(5.0, 6.0), "e": Summary(0.5, 1, 0.5, 0.5, 0.0, None)}
    out = tiers(list(items), items.get)
    # a~b~c chain into one tier although a and c alone do not overlap; e has no interval
    assert out == [["a", "b", "c"], ["d"]]


def test_touching_intervals_are_not_ordered():
    items = {"x": _summary(1.0, 2.0), "y": _summary(2.0, 3.0)}
    assert tiers(["y", "x"], items.get) == [["x", "y"]]


@pytest.mark.parametrize("seed", range(20))
def test_tiers_never_order_overlapping_intervals(seed):
    rng = random.Random(seed)
    items = {}
    for i in range(12):
        lo = rng.uniform(0, 20)
        items[i] = _summary(lo, lo + rng.uniform(0, 4))
    out = tiers(list(items), items.get)
    assert sorted(i for t in out for i in t) == sorted(items)      # each item once
    for a_idx, tier_a in enumerate(out):
        for tier_b in out[a_idx + 1:]:
            for a in tier_a:
                for b in tier_b:
                    assert not items[a].ci.overlaps(items[b].ci)
                    assert items[a].ci.high < items[b].ci.low        # a is faster
    for t in out:                                                    # listed by median
        meds = [items[i].median for i in t]
        assert meds == sorted(meds)


def test_ratio_interval():
    base = [10.0, 10.1, 9.9, 10.05, 9.95]
    slow = [v * 1.15 for v in base]
    ci = bootstrap_ratio_ci(base, slow)
    assert 1.1 < ci.low <= 1.15 <= ci.high < 1.2
    assert bootstrap_ratio_ci(base, slow) == ci
    assert bootstrap_ratio_ci(base, base[:2]) is None
    same = bootstrap_ratio_ci(base, base)
    assert same.low < 1.0 < same.high
