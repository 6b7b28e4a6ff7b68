"""Statistics over processes (analysis/stats.py): intervals and the coverage they print, the
Mann-Whitney distribution, Holm's correction, ranks, the instability rule."""
import itertools
import math
import random

import numpy as np
import pytest

from analysis import stats
from analysis.stats import Interval, Summary, describe_interval, summarize

DRAWS = 10_000
TOLERANCE = 0.02     # empirical coverage within 2 points of the printed coverage

# Known skewed distributions: (name, sampler(rng, shape), true median).
SKEWED = [
    ("lognormal", lambda rng, shape: rng.lognormal(0.0, 1.0, size=shape), 1.0),
    ("exponential", lambda rng, shape: rng.exponential(1.0, size=shape), math.log(2.0)),
    ("gamma k=2", lambda rng, shape: rng.gamma(2.0, 1.0, size=shape), 1.678346990016661),
    ("pareto a=3", lambda rng, shape: 1.0 + rng.pareto(3.0, size=shape), 2.0 ** (1 / 3)),
]


# --------------------------------------------------------------------------------------
# The median's interval: its empirical coverage is the coverage it prints
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,draw,true_median", SKEWED, ids=[d[0] for d in SKEWED])
@pytest.mark.parametrize("n", [3, 5, 6, 10, 20])
def test_median_interval_covers_as_often_as_it_prints(name, draw, true_median, n):
    rng = np.random.default_rng(1000 + n)
    samples = draw(rng, (DRAWS, n))
    printed = None
    hits = 0
    for row in samples:
        ci = stats.median_interval(row)
        assert printed is None or ci.coverage == printed   # a function of n alone
        printed = ci.coverage
        hits += ci.low <= true_median <= ci.high
    assert abs(hits / DRAWS - printed) <= TOLERANCE, (name, n, hits / DRAWS, printed)


def test_coverage_is_exact_from_the_binomial_and_below_95_percent_only_for_small_n():
    assert stats.median_interval([1, 2, 3]).coverage == 0.75
    assert stats.median_interval([1, 2, 3, 4, 5]).coverage == 0.9375
    ci10 = stats.median_interval(range(1, 11))
    assert (ci10.low, ci10.high) == (2.0, 9.0)
    assert ci10.coverage == pytest.approx(1 - 2 * 11 / 1024)
    for n in range(6, 60):
        assert stats.median_interval(range(n)).meets_target, n
    for n in range(3, 6):
        assert not stats.median_interval(range(n)).meets_target, n
    assert stats.median_interval([1.0, 2.0]) is None      # two values: a 50% interval, none


def test_interval_matches_scipy_quantile_test():
    from scipy import stats as sps
    rng = np.random.default_rng(7)
    for n in range(6, 41):
        x = rng.lognormal(size=n)
        ref = sps.quantile_test(x, q=1.0, p=0.5).confidence_interval(0.95)
        ci = stats.median_interval(x)
        assert (ci.low, ci.high) == (ref.low, ref.high)


def test_interval_does_not_depend_on_record_order():
    values = [5.31, 4.87, 5.02, 6.40, 4.95, 5.11, 5.77, 5.2, 4.99, 5.05]
    ci = stats.median_interval(values)
    for seed in range(5):
        shuffled = list(values)
        random.Random(seed).shuffle(shuffled)
        assert stats.median_interval(shuffled) == ci
        assert stats.ratio(shuffled, values) == stats.ratio(values, values)


def test_identical_values_give_a_zero_width_interval_and_are_stable():
    s = summarize([7.25] * 6)
    assert (s.ci.low, s.ci.high) == (7.25, 7.25)
    assert s.half_width_pct == 0.0 and s.unstable is False


def test_one_process_has_no_interval():
    s = summarize([5.0])
    assert s.ci is None and s.unstable is None and s.half_width_pct is None
    assert describe_interval(s) == "n=1, no interval"
    assert summarize([]) is None


def test_small_n_prints_its_true_coverage_and_no_stability():
    s = summarize([4.9, 5.0, 5.1, 5.3, 5.6])
    assert (s.ci.low, s.ci.high) == (4.9, 5.6)
    assert stats.interval_text(s.ci) == "[4.9, 5.6] 93.75%"
    assert s.unstable is None and stats.stability_label(s) == "not assessed (n<6)"
    assert "93.75%" in stats.median_with_interval(s)
    big = summarize([5.0 + 0.01 * i for i in range(10)])
    assert stats.interval_text(big.ci) == f"[{big.ci.low:.4g}, {big.ci.high:.4g}]"


def test_instability_rule_is_half_width_over_five_percent():
    tight = Summary(median=10.0, n=10, min=9.0, max=11.0, rel_iqr=0.0,
                    ci=Interval(9.6, 10.4, 0.978))
    wide = Summary(median=10.0, n=10, min=9.0, max=11.0, rel_iqr=0.0,
                   ci=Interval(9.4, 10.6, 0.978))
    assert tight.unstable is False and wide.unstable is True
    assert stats.median_with_interval(wide).endswith("UNSTABLE")


# --------------------------------------------------------------------------------------
# Two configurations: the Mann-Whitney distribution and the Moses interval
# --------------------------------------------------------------------------------------
def _brute_u_counts(m, n):
    counts = {}
    for xs in itertools.combinations(range(m + n), m):
        chosen, u, ys = set(xs), 0, 0
        for pos in range(m + n):
            if pos in chosen:
                u += ys
            else:
                ys += 1
        counts[u] = counts.get(u, 0) + 1
    return counts, math.comb(m + n, m)


@pytest.mark.parametrize("m,n", [(3, 3), (3, 5), (5, 4), (6, 6)])
def test_u_cdf_is_the_exact_null_distribution(m, n):
    counts, total = _brute_u_counts(m, n)
    for u in range(-1, m * n + 2):
        want = sum(c for k, c in counts.items() if k <= u) / total
        assert stats.u_cdf(u, m, n) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("m,n", [(3, 3), (5, 5), (10, 10), (10, 5), (20, 20)])
def test_ratio_interval_covers_as_often_as_it_prints(m, n):
    rng = np.random.default_rng(m * 100 + n)
    factor = 1.07
    base = rng.lognormal(0.0, 0.3, size=(DRAWS, m))
    new = factor * rng.lognormal(0.0, 0.3, size=(DRAWS, n))
    hits, printed = 0, None
    for b, x in zip(base, new):
        est, ci = stats.ratio_interval(b, x)
        assert printed is None or ci.coverage == printed
        printed = ci.coverage
        hits += ci.low <= factor <= ci.high
    assert abs(hits / DRAWS - printed) <= TOLERANCE, (m, n, hits / DRAWS, printed)


def test_shift_interval_covers_as_often_as_it_prints_on_skewed_data():
    rng = np.random.default_rng(3)
    delta = 0.4
    base = rng.exponential(1.0, size=(DRAWS, 10))
    new = delta + rng.exponential(1.0, size=(DRAWS, 12))
    hits, printed = 0, None
    for b, x in zip(base, new):
        _, ci = stats.shift_interval(b, x)
        printed = ci.coverage
        hits += ci.low <= delta <= ci.high
    assert printed >= 0.95
    assert abs(hits / DRAWS - printed) <= TOLERANCE


def test_ratio_estimate_and_interval_on_known_values():
    base = [10.0, 10.1, 10.2, 9.9, 10.05, 10.15, 9.95, 10.03, 10.12, 10.02]
    new = [v * 1.5 for v in base]
    e = stats.ratio(base, new)
    assert e.estimate == pytest.approx(1.5, rel=0.02)
    assert e.ci.low < 1.5 < e.ci.high and e.ci.coverage >= 0.95
    assert e.p == pytest.approx(stats.min_attainable_p(10, 10))


def test_small_samples_say_the_coverage_they_reach():
    e = stats.ratio([1.0, 1.1, 1.2], [2.0, 2.1, 2.2])
    assert e.ci.coverage == pytest.approx(1 - 2 / math.comb(6, 3))   # 0.9: no 95% exists
    assert not e.ci.meets_target


# --------------------------------------------------------------------------------------
# Holm over a family, and ranks from tests
# --------------------------------------------------------------------------------------
def test_holm_adjustment():
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([]) == []
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0]
    assert stats.holm([0.2, 0.3]) == pytest.approx([0.4, 0.4])


def _family(rng, planted, slowdown=1.05, configs=20, n=10, noise=0.01):
    """Base and new per-process values of `configs` configurations; `planted` is slower."""
    out = []
    for c in range(configs):
        level = 3.0 + c
        base = level * rng.lognormal(0.0, noise, size=n)
        new = level * rng.lognormal(0.0, noise, size=n) * (slowdown if c == planted else 1.0)
        out.append((base, new))
    return out


def _flagged(family):
    effects = [stats.ratio(b, n) for b, n in family]
    adjusted = stats.holm([e.p for e in effects])
    return {i for i, (e, p) in enumerate(zip(effects, adjusted)) if p < stats.ALPHA}


def test_holm_finds_a_planted_five_percent_slowdown_and_only_it():
    rng = np.random.default_rng(20261127)
    assert _flagged(_family(rng, planted=7)) == {7}


def test_holm_keeps_the_family_wise_error_and_the_power_over_many_families():
    rng = np.random.default_rng(11)
    found = false = 0
    for _ in range(100):
        flagged = _flagged(_family(rng, planted=13))
        found += 13 in flagged
        false += bool(flagged - {13})
    assert found == 100
    assert false <= 10      # expected <= 5 of 100 at a 5% family-wise rate


def test_unadjusted_tests_would_flag_more_than_holm():
    rng = np.random.default_rng(5)
    family = _family(rng, planted=-1, configs=200, n=10, noise=0.02)
    raw = sum(stats.ratio(b, n).p < stats.ALPHA for b, n in family)
    assert raw >= 3 and _flagged(family) == set()


def test_ranks_come_from_tests_not_from_chained_intervals():
    rng = np.random.default_rng(2)
    a = list(5.0 * rng.lognormal(0, 0.005, 10))
    b = list(5.0 * rng.lognormal(0, 0.005, 10))      # same as a
    c = list(7.0 * rng.lognormal(0, 0.005, 10))      # clearly slower
    d = list(10.0 * rng.lognormal(0, 0.005, 10))     # slower still
    ranked = stats.rank_by_tests(["d", "c", "b", "a", "lone"],
                                 {"a": a, "b": b, "c": c, "d": d, "lone": [1.0]}.get)
    ranks = {r.item: r.rank for r in ranked}
    assert ranks == {"a": 1, "b": 1, "c": 3, "d": 4, "lone": None}
    assert [r.item for r in ranked][-1] == "lone"


def test_too_few_processes_can_never_be_ordered():
    assert stats.min_attainable_p(3, 3) == pytest.approx(0.1)
    ranked = stats.rank_by_tests(["x", "y"], {"x": [1.0, 1.1, 1.2], "y": [9.0, 9.1, 9.2]}.get)
    assert [r.rank for r in ranked] == [1, 1]


def test_a_family_of_five_process_configurations_can_never_be_ordered():
    # 2 / C(10, 5) = 0.0079: one pair can pass, 10 pairs (5 items) cannot after Holm
    assert stats.family_can_order([5, 5])
    assert not stats.family_can_order([5] * 5)
    assert stats.family_can_order([10] * 12)          # 66 pairs x 1.1e-5
    assert not stats.family_can_order([10, 1])


def test_the_exact_p_from_u_alone_is_scipys_p_on_the_data():
    from scipy import stats as sps
    rng = np.random.default_rng(9)
    for m, n in ((3, 3), (5, 7), (10, 10), (12, 9)):
        for _ in range(25):
            x, y = rng.lognormal(size=m), 1.1 * rng.lognormal(size=n)
            want = sps.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue
            assert stats.mann_whitney_p(x, y) == pytest.approx(want, rel=1e-12)
