"""experiments/baselines/process_runs.py and process_stats.py: the one seeded shuffled order of
all runs, the plan record and what a table reads back from records, and the statistics over
processes on hand values (no GPU, no torch)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fake_runs  # noqa: E402
import process_runs as pr  # noqa: E402
import process_stats as ps  # noqa: E402


def specs(configs=("a", "b", "c", "d", "e", "f"), repeats=3):
    return [s for c in configs for s in pr.repeated("t", "memstrat" if c < "d" else "pytorch",
                                                    (c,), c, c, repeats)]


def test_shuffled_order_is_deterministic_and_interleaves():
    plan = specs()
    one, again, other = pr.shuffled(plan, 1), pr.shuffled(plan, 1), pr.shuffled(plan, 2)
    assert one == again and one != other
    assert sorted(s.tag for s in one) == sorted(s.tag for s in plan)   # every run once
    assert one != plan                                                 # not as expanded
    # every configuration's first process before any second one, and so on
    assert [s.repeat for s in one] == [0] * 6 + [1] * 6 + [2] * 6
    # configurations (and the two sides) are mixed, and each block has its own order
    blocks = [[s.config for s in one[i:i + 6]] for i in (0, 6, 12)]
    assert all(sorted(b) == [(c,) for c in "abcdef"] for b in blocks)
    assert len({tuple(b) for b in blocks}) > 1
    sides = [s.side for s in one]
    assert sum(x != y for x, y in zip(sides, sides[1:])) >= 4
    with pytest.raises(ValueError, match="share a run tag"):
        pr.shuffled(plan + plan[:1], 1)


def test_plan_record_and_missing_runs():
    order = pr.shuffled(specs(("a", "b"), 2), 7)
    plan = pr.plan_record("bench.py", "python3 bench.py --x", 7, 2, order, 95.4, ["left out: z"])
    assert plan["record"] == pr.PLAN_KIND and plan["order"] == [s.tag for s in order]
    assert (plan["shuffle_seed"], plan["repeats"], plan["estimate_s"]) == (7, 2, 95)
    recs = [plan]
    for s in order[:-2]:
        recs.append(fake_runs.memstrat_record("pinned", "f32", 64, 256, 3, s.tag, 1.0))
    failed = fake_runs.memstrat_record("pinned", "f32", 64, 256, 3, order[-2].tag, 1.0)
    failed.update(status="failed", error="out of memory")
    recs.append(failed)
    assert pr.missing_runs(recs) == [f"{order[-2].tag}: out of memory",
                                     f"{order[-1].tag}: no record written"]
    line = pr.provenance_line(recs)
    assert line == ("GPU NVIDIA H200, driver 580.159.04, commit 4f3a9c1e2b7d, command "
                    "`python3 bench.py --x`")
    lines = pr.order_lines(recs)
    assert "--shuffle-seed 7" in lines[0] and f"1. `{order[0].tag}`" in lines
    # without a plan record the table says the command is not known
    assert pr.provenance_line(recs[1:]).endswith("command not recorded (no plan record)")


def test_read_records_names_a_bad_line(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"a": 1}\n\n{not json\n')
    with pytest.raises(ValueError, match=r"r.jsonl:3: not a JSON line"):
        pr.read_records([f])


def test_read_records_counts_a_run_read_twice_once(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"run_id": "a", "x": 1}\n{"run_id": "b"}\n')
    assert pr.read_records([f, f]) == [{"run_id": "a", "x": 1}, {"run_id": "b"}]
    f.write_text('{"run_id": "a", "x": 1}\n{"run_id": "a", "x": 2}\n')
    with pytest.raises(ValueError, match=r"r.jsonl:2: run_id 'a' also names a different "
                                         r"record at .*r.jsonl:1"):
        pr.read_records([f])


def test_apply_preset_refuses_other_values():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    preset = {"epochs": 4}
    a = p.parse_args([])
    pr.apply_preset(a, p, preset, ["epochs", "quick"])
    assert a.epochs == 4
    a = p.parse_args(["--epochs", "4"])   # the preset's own value is no conflict
    pr.apply_preset(a, p, preset, ["epochs", "quick"])
    for bad in (["--epochs", "3"], ["--quick"]):
        with pytest.raises(ValueError, match="--reproduce fixes the plan; drop --"):
            pr.apply_preset(p.parse_args(bad), p, preset, ["epochs", "quick"])


# ---------------------------------------------------------------------------------------------
# statistics over processes, on hand values. With 3 processes the bootstrap interval of the
# median is the range of the values (each extreme is the resampled median in 7/27 of the
# resamples, far more than 2.5%), and the ratio's interval runs from min(other) / max(memstrat)
# to max(other) / min(memstrat).

def test_side_by_side_apart():
    p = ps.side_by_side([10.0, 11.0, 12.0], [500.0, 520.0, 540.0])
    assert (p.memstrat.median, p.memstrat.ci.low, p.memstrat.ci.high) == (11.0, 10.0, 12.0)
    assert (p.other.median, p.other.ci.low, p.other.ci.high) == (520.0, 500.0, 540.0)
    assert p.ratio == pytest.approx(520 / 11)
    assert (p.ratio_ci.low, p.ratio_ci.high) == pytest.approx((500 / 12, 540 / 10))
    assert p.order == ps.MEMSTRAT_FASTER
    # half-width 9% of the median: marked unstable (analysis/stats.py)
    assert ps.ms_cell(p.memstrat) == "11.00 [10.00-12.00] n=3 UNSTABLE"
    assert ps.ms_cell(p.other) == "520.00 [500.00-540.00] n=3"
    assert ps.ratio_cell(p) == "47.27x [41.67-54.00]"
    assert ps.overlap_cell(p, "PyTorch") == "apart: memstrat faster"
    # the other way round
    q = ps.side_by_side([500.0, 520.0, 540.0], [10.0, 11.0, 12.0])
    assert q.order == ps.OTHER_FASTER and ps.overlap_cell(q, "PyTorch") == "apart: PyTorch faster"


def test_side_by_side_overlap_is_not_ordered():
    p = ps.side_by_side([100.0, 110.0, 120.0], [105.0, 115.0, 125.0])
    assert p.order == ps.OVERLAP and ps.overlap_cell(p, "PyTorch") == "overlap: not ordered"
    assert ps.ratio_cell(p) == "1.05x [0.88-1.25]"
    # touching ends overlap (closed intervals)
    assert ps.side_by_side([1.0, 2.0, 3.0], [3.0, 4.0, 5.0]).order == ps.OVERLAP


def test_side_by_side_without_interval():
    p = ps.side_by_side([700.0, 720.0], [600.0, 610.0, 620.0])
    assert p.memstrat.ci is None and p.order == ps.NOT_JUDGED
    assert ps.ms_cell(p.memstrat) == "710.00 (n=2)"
    assert ps.ratio_cell(p) == f"{610 / 710:.2f}x (no interval)"
    assert ps.overlap_cell(p, "PyTorch") == "no interval (n<3)"
    gone = ps.side_by_side([], [1.0, 2.0, 3.0])
    assert gone.ratio is None and ps.ratio_cell(gone) == "-" and ps.overlap_cell(gone, "x") == "-"
    assert ps.ms_cell(gone.memstrat) == "not run"


def test_tally_counts_only_separated_intervals():
    pairs = [ps.side_by_side([10.0, 11.0, 12.0], [500.0, 520.0, 540.0]),
             ps.side_by_side([100.0, 110.0, 120.0], [105.0, 115.0, 125.0]),
             ps.side_by_side([700.0, 720.0], [600.0, 610.0, 620.0])]
    text = ps.tally(pairs, "PyTorch")
    assert text.startswith("memstrat faster (intervals apart) in 1 of 3; intervals overlap "
                           "(not ordered) in 1 of 3; not judged (a side missing or n<3) in 1 "
                           "of 3; PyTorch / memstrat of the medians 0.86x to 47.27x")


def test_process_values_use_the_steady_epochs():
    r = fake_runs.memstrat_record("pinned", "f32", 64, 256, 4, "t", 7.0)
    r["epochs"][2]["wall_ms"] = 9.0           # steady epochs 7, 9, 7: median 7; epoch 1 is 21
    assert ps.process_values([r]) == [7.0]
    assert ps.fastest_tier([("x", ps.side_by_side([1.0, 2.0, 3.0], [])),
                            ("y", ps.side_by_side([2.5, 3.0, 4.0], [])),
                            ("z", ps.side_by_side([9.0, 9.5, 10.0], []))],
                           lambda i: i[1].memstrat) == [
        ("x", ps.side_by_side([1.0, 2.0, 3.0], [])), ("y", ps.side_by_side([2.5, 3.0, 4.0], []))]
