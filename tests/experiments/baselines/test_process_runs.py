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
from analysis import stats  # noqa: E402


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
    # a baseline that names another commit than memstrat's records is said so, not hidden
    other = json.loads(json.dumps(recs[1]))
    other["config"]["framework"] = "pytorch"
    other["env"].update(git_sha="0123456789ab", git_dirty=True)
    assert ("commit 4f3a9c1e2b7d (the other frameworks' records name 0123456789ab (dirty))"
            in pr.provenance_line(recs + [other]))


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
# statistics over processes, on hand values. Six processes a side: the order-statistic interval
# of the median is then [min, max] with 96.9% coverage, and two sets that do not overlap at all
# give the exact Mann-Whitney test's smallest p, 2 / C(12, 6) = 0.0022.

SIX = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)


def six(centre, step):
    return [centre + k * step for k in SIX]


def test_side_by_side_apart():
    p = ps.side_by_side(six(11.0, 0.5), six(512.5, 5.0))
    assert (p.memstrat.median, p.memstrat.ci.low, p.memstrat.ci.high) == (11.0, 9.75, 12.25)
    assert p.memstrat.ci.coverage == pytest.approx(1 - 2 / 64)
    e = stats.ratio(six(11.0, 0.5), six(512.5, 5.0))
    assert p.ratio == e.estimate and p.effect.ci == e.ci
    assert p.p == pytest.approx(2 / 924) and p.order == ps.MEMSTRAT_FASTER
    # half-width 11% of the median: marked unstable (analysis/stats.py)
    assert ps.ms_cell(p.memstrat) == "11.00 [9.75-12.25] n=6 UNSTABLE"
    assert ps.ratio_cell(p) == f"{e.estimate:.2f}x [{e.ci.low:.2f}, {e.ci.high:.2f}]"
    assert ps.overlap_cell(p, "PyTorch") == "memstrat faster (p=0.0022)"
    # the other way round
    q = ps.side_by_side(six(512.5, 5.0), six(11.0, 0.5))
    assert q.order == ps.OTHER_FASTER and ps.overlap_cell(q, "PyTorch").startswith(
        "PyTorch faster")


def test_side_by_side_not_separated_is_not_ordered():
    p = ps.side_by_side(six(110.0, 4.0), six(112.0, 4.0))
    assert p.order == ps.NOT_SEPARATED
    assert ps.overlap_cell(p, "PyTorch").startswith("not separated (p=")
    # three processes a side can never be separated: the smallest p is 0.1
    assert ps.side_by_side([1.0, 2.0, 3.0], [30.0, 40.0, 50.0]).order == ps.NOT_SEPARATED


def test_holm_over_a_table_can_undo_a_single_pair_verdict():
    pairs = [ps.side_by_side(six(10.0, 0.1), six(10.0 + 0.05 * k, 0.1)) for k in range(8)]
    single = [p.order for p in pairs]
    ps.judge(pairs)
    assert [p.p_holm >= p.effect.p for p in pairs] == [True] * 8
    assert sum(o == ps.MEMSTRAT_FASTER for o in single) >= \
        sum(p.order == ps.MEMSTRAT_FASTER for p in pairs)


def test_side_by_side_without_interval():
    p = ps.side_by_side([700.0, 720.0], [600.0, 610.0, 620.0])
    assert p.memstrat.ci is None and p.order == ps.NOT_JUDGED
    assert ps.ms_cell(p.memstrat) == "710.00 (n=2)"
    assert ps.ratio_cell(p) == f"{610 / 710:.2f}x (medians; too few processes)"
    assert ps.overlap_cell(p, "PyTorch") == "too few processes (n<3)"
    gone = ps.side_by_side([], [1.0, 2.0, 3.0])
    assert gone.ratio is None and ps.ratio_cell(gone) == "-" and ps.overlap_cell(gone, "x") == "-"
    assert ps.ms_cell(gone.memstrat) == "not run"


def test_tally_counts_only_what_the_test_separates():
    pairs = list(ps.judge([ps.side_by_side(six(11.0, 0.5), six(512.5, 5.0)),
                           ps.side_by_side(six(110.0, 4.0), six(112.0, 4.0)),
                           ps.side_by_side([700.0, 720.0], [600.0, 610.0, 620.0])]))
    text = ps.tally(pairs, "PyTorch")
    assert text.startswith("memstrat faster (Holm-corrected test) in 1 of 3; not separated by "
                           "the test (not ordered) in 1 of 3; not judged (a side missing or "
                           "n<3) in 1 of 3; PyTorch / memstrat (Hodges-Lehmann)")


def test_process_values_use_the_steady_epochs():
    r = fake_runs.memstrat_record("pinned", "f32", 64, 256, 4, "t", 7.0)
    r["epochs"][2]["wall_ms"] = 9.0           # steady epochs 7, 9, 7: median 7; epoch 1 is 21
    assert ps.process_values([r]) == [7.0]
    values = {"x": six(2.0, 0.5), "y": six(2.5, 0.5), "z": six(9.5, 0.2)}
    assert ps.fastest(["z", "y", "x"], values.get) == ["x", "y"]   # x, y not separated
