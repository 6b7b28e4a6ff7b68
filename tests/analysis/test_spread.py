"""analysis/spread.py: where an unstable configuration's spread lies, on planted cases."""
import numpy as np
import pytest

from analysis import spread


def steady(level, n=20, noise=0.01, rng=None):
    rng = rng or np.random.default_rng(0)
    return list(level * (1 + noise * rng.standard_normal(n)))


def test_processes_at_two_levels_are_between_processes_without_shifts():
    rng = np.random.default_rng(1)
    runs = [steady(7.0, rng=rng) for _ in range(5)] + [steady(13.0, rng=rng) for _ in range(5)]
    d = spread.diagnose(runs)
    assert d.between and d.shifted == 0 and d.tested == 10
    assert d.where == "between processes"
    assert d.process_min == pytest.approx(7.0, rel=0.02)
    assert d.process_max == pytest.approx(13.0, rel=0.02)
    assert d.within_iqr < 0.03


def test_a_process_that_changes_level_mid_run_is_found_and_only_it():
    rng = np.random.default_rng(2)
    runs = [steady(10.0, rng=rng) for _ in range(9)]
    runs.append(steady(10.0, n=10, rng=rng) + steady(11.0, n=10, rng=rng))  # +10% at the middle
    d = spread.diagnose(runs)
    assert d.shifted == 1
    assert not d.between  # the medians span less than 10%
    assert d.where == "within processes"


def test_one_distribution_is_not_located():
    rng = np.random.default_rng(3)
    d = spread.diagnose([steady(10.0, rng=rng) for _ in range(10)])
    assert not d.between and d.shifted == 0 and d.where == "not located"


def test_a_shift_below_the_threshold_is_not_a_level_shift():
    rng = np.random.default_rng(4)
    # +3% at the middle with 0.1% noise: significant, but not more than 5% apart
    runs = [steady(10.0, n=10, noise=0.001, rng=rng) + steady(10.3, n=10, noise=0.001, rng=rng)
            for _ in range(4)]
    p, step = spread.level_shift_p(runs[0])
    assert p < 0.01 and step == pytest.approx(0.03, abs=0.005)
    assert spread.diagnose(runs).shifted == 0


def test_short_processes_are_not_tested_and_too_few_processes_give_nothing():
    assert spread.level_shift_p([1.0] * 7) is None      # 3 epochs a half
    assert spread.level_shift_p([1.0] * 8) == (1.0, 0.0)
    d = spread.diagnose([[1.0] * 7, [2.0] * 7, [1.5] * 7])
    assert d.tested == 0 and d.shifted == 0 and d.between
    assert spread.diagnose([[1.0, 2.0]]) is None
    assert spread.diagnose([[1.0], [2.0]]) is None       # one value per process


def test_steady_values_leave_epoch_one_and_nulls_out():
    rec = {"epochs": [{"wall_ms": 50.0}, {"wall_ms": 7.0}, {"wall_ms": None}, {"wall_ms": 8.0}]}
    assert spread.steady_values(rec) == [7.0, 8.0]


def record(copy, compute, stall=None, n=20):
    """A process's record: epoch 1 then n steady epochs with these parts."""
    eps = [{"copy_ms": 99.0, "compute_ms": 99.0, "stall_ms": 99.0, "host_ms": None}]
    eps += [{"copy_ms": copy, "compute_ms": compute, "stall_ms": stall, "host_ms": None}] * n
    return {"epochs": eps}


def test_the_part_that_carries_the_spread_comes_first():
    # um-prefetch's case: the prefetch stream's time moves, the step stays
    recs = [record(6.1, 5.7, 0.8), record(6.3, 5.8, 0.9), record(17.6, 5.7, 12.3)]
    parts = spread.part_spreads(recs)
    assert [p.label for p in parts] == ["copy", "stall", "compute"]   # host is never timed here
    assert (parts[0].low, parts[0].high) == (6.1, 17.6)
    assert parts[2].span == pytest.approx(0.1)
    assert spread.format_parts(parts) == "copy 6.1-17.6; stall 0.8-12.3; compute 5.7-5.8"


def test_a_part_some_process_does_not_time_is_left_out():
    recs = [record(6.1, 5.7, 0.8), record(6.3, 5.8, None)]
    assert [p.label for p in spread.part_spreads(recs)] == ["copy", "compute"]
    assert spread.part_spreads([record(6.1, 5.7)]) == []                # one process: no range
    assert spread.format_parts([]) == "not timed"


def test_a_part_that_is_nothing_in_every_process_says_so():
    parts = [spread.PartSpread("host", 0.00024, 0.00077), spread.PartSpread("copy", 6.1, 12.3)]
    assert spread.format_parts(parts) == "host <0.01; copy 6.1-12.3"
