"""experiments/baselines/benchmark_vs_pytorch.py without a GPU or torch: the speed table from
records built by hand, the --reproduce plan and its estimate, usage errors before any run, and
a whole run with stand-ins for memstrat and python (tests/experiments/baselines/fake_runs.py)
whose report --from-records rebuilds unchanged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmark_vs_pytorch as bench  # noqa: E402
from analysis import stats  # noqa: E402
import comparison  # noqa: E402
import fake_runs  # noqa: E402
import process_runs as pr  # noqa: E402
from sittings import Sitting  # noqa: E402


def mem(strategy, transfer, values, batch=64):
    return [fake_runs.memstrat_record(strategy, transfer, batch, 256, 4,
                                      f"vs-pytorch-{strategy}-{transfer}-b{batch}-h256-e4-r{i}", v)
            for i, v in enumerate(values)]


def torch_side(mode, values, batch=64):
    return [fake_runs.pytorch_record(mode, batch, 256, 4,
                                     f"vs-pytorch-pytorch-{mode}-b{batch}-h256-e4-r{i}", v)
            for i, v in enumerate(values)]


def six(centre, step):
    """Six processes around `centre`: enough for the Holm-corrected test to separate two sets."""
    return [centre + k * step for k in (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)]


@pytest.fixture
def records():
    return [*mem("resident", "f32", six(11.0, 0.4)), *mem("resident", "u8", six(9.0, 0.4)),
            *mem("pinned", "f32", six(110.0, 4.0)),
            *mem("double-buffer", "f32", six(31.0, 0.4)),
            *mem("pageable", "f32", [700.0, 720.0]),             # a process missing: n=2
            *torch_side("resident", six(520.0, 8.0)),
            *torch_side("pinned", six(112.0, 4.0)),
            *torch_side("pageable", [600.0, 610.0, 620.0]),
            # neither a failed run nor the curve check's runs are speed runs
            dict(mem("resident", "f32", [1.0])[0], status="failed"),
            fake_runs.memstrat_record("resident", "f32", 64, 256, 4,
                                      "vs-pytorch-curve-memstrat-h256", 0.5)]


def cells(md: str) -> dict[tuple[str, str], list[str]]:
    out = {}
    for line in md.splitlines()[2:]:
        c = [x.strip() for x in line.strip("|").split("|")]
        out[(c[3], c[4])] = c
    return out


def test_speed_table_on_hand_values(records):
    rows = comparison.build_rows(records)
    t = cells(comparison.speed_markdown(rows))
    # memstrat resident f32 around 11 against PyTorch resident around 520: separated
    e = stats.ratio(six(11.0, 0.4), six(520.0, 8.0))
    assert t[("resident", "f32")][5:9] == ["11.00 [10.00-12.00] n=6 UNSTABLE", "resident",
                                           "520.00 [500.00-540.00] n=6",
                                           f"{e.estimate:.2f}x [{e.ci.low:.2f}, {e.ci.high:.2f}]"]
    assert t[("resident", "f32")][9].startswith("memstrat faster (p=")
    assert t[("resident", "u8")][5] == "9.00 [8.00-10.00] n=6 UNSTABLE"
    # pinned around 110 against 112: not separated, nothing is ordered
    assert t[("pinned", "f32")][9].startswith("not separated (p=")
    # double-buffer is compared with PyTorch pinned
    assert t[("double-buffer", "f32")][6:8] == ["pinned", "112.00 [102.00-122.00] n=6 UNSTABLE"]
    assert t[("double-buffer", "f32")][9].startswith("memstrat faster")
    # 2 processes: a median, no interval, not judged
    assert t[("pageable", "f32")][5] == "710.00 (n=2)"
    assert t[("pageable", "f32")][8:] == [f"{610 / 710:.2f}x (medians; too few processes)",
                                          "too few processes (n<3)"]
    # rows exist only where a side ran: no u8 runs of pinned, double-buffer, pageable
    assert ("pinned", "u8") in t and t[("pinned", "u8")][5] == "not run"
    lines, all_faster = comparison.speed_verdict(rows)
    assert not all_faster
    assert lines[0].startswith("memstrat --transfer f32 against PyTorch's nearest equivalent: "
                               "memstrat faster (Holm-corrected test) in 2 of 4; not separated by "
                               "the test (not ordered) in 1 of 4; not judged")


def test_all_faster_needs_separate_intervals(records):
    fast = [r for r in records if r["config"]["strategy"] not in ("pinned", "pageable",
                                                                  "pytorch-pageable")]
    fast += mem("pinned", "f32", six(51.0, 0.4))
    _, all_faster = comparison.speed_verdict(comparison.build_rows(fast))
    assert all_faster


def test_report_names_gpu_driver_commit_command_and_keeps_the_curve_check(records):
    order = pr.shuffled([pr.RunSpec("memstrat", (), 0, "vs-pytorch-x-r0", "x")], 1)
    plan = pr.plan_record(bench.PROG, "python3 experiments/baselines/benchmark_vs_pytorch.py "
                          "--reproduce", 1, 3, order, 170.0, ["left out: y"])
    c = comparison.compare_curves({(1, 0): 2.3, (1, 1): 2.0}, {(1, 0): 2.3, (1, 1): 2.00001})
    tol = comparison.Tolerance()
    curve = comparison.curve_record(256, 256, c, "", "97.10% / 97.08%", tol)
    failed_curve = comparison.curve_record(1024, 256, None, "pytorch: exit 1", "", tol)
    text, rows_ok, curves_ok = bench.report([plan, *records, curve, failed_curve])
    head = text.splitlines()
    assert head[0] == "# memstrat vs PyTorch eager"
    assert head[2] == ("GPU NVIDIA H200, driver 580.159.04, commit 4f3a9c1e2b7d, command "
                       "`python3 experiments/baselines/benchmark_vs_pytorch.py --reproduce`")
    assert "- left out: y" in text
    assert "| 256 | 2 | 2.300000 |" in text and "97.10% / 97.08% | agree |" in text
    assert "| 1024 | - |" in text and "FAILED: pytorch: exit 1" in text
    assert not curves_ok and not rows_ok
    # the run the plan lists has no record
    assert "- vs-pytorch-x-r0: no record written" in text
    # the curve record keeps the comparison exactly
    (batch, tol2, results), = comparison.curve_sections([json.loads(json.dumps(curve))])
    assert (batch, tol2) == (256, tol) and results[0][1] == c


def test_reproduce_plan_and_estimate(capsys, data):
    p = bench.build_parser()
    a = p.parse_args(["--reproduce"])
    pr.apply_preset(a, p, bench.REPRODUCE, bench.PRESET_OPTIONS)
    plan = bench.make_plan(a)
    # every published row: 10 processes of 20 steady epochs (docs/methodology.md)
    assert plan.configs == [(64, 256, 21), (256, 256, 21), (1024, 256, 21)]
    assert plan.curve_hiddens == [256] and a.curve_batch == 256 and a.repeats == 10
    # 3 batches x 4 strategies x f32,u8 memstrat, x 3 PyTorch modes
    assert len(plan.memstrat_runs()) == 3 * 8 and len(plan.pytorch_runs()) == 3 * 3
    specs = plan.specs(a.repeats)
    assert len(specs) == 10 * 3 * (8 + 3) == 330
    assert sum(s.side == "memstrat" for s in specs) == 240
    est = bench.estimate_seconds(plan, a.repeats)
    assert 900 < est <= bench.REPRODUCE_TARGET_S
    assert plan.notes() == []
    assert bench.main(["--reproduce", "--dry-run", "--data", str(data)]) == bench.EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"plan: estimated {est / 60:.1f} min ({est:.0f} s) on an H200")
    assert "240 memstrat + 90 PyTorch processes" in out and "(+2 processes)" in out
    assert len([ln for ln in out.splitlines() if ln.strip()[:1].isdigit()]) == 330


BAD = [["--repeats", "0"], ["--shuffle-seed", "-1"], ["--reproduce", "--quick"],
       ["--reproduce", "--batches", "64"], ["--reproduce", "--repeats", "5"], ["--epochs", "1"],
       ["--batches", "0"], ["--transfers", "f16"], ["--leave-out", "resident:f16"],
       ["--skip", "8"], ["--from-records", "/nonexistent.jsonl"], ["--data", "/nonexistent"],
       ["--memstrat", "/nonexistent/memstrat"], ["--curve-batch", "0"]]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(b) for b in BAD])
def test_bad_options_exit_2_before_any_run(argv, tmp_path, data, no_processes):
    out = tmp_path / "out"
    assert no_processes(bench.main, ["--data", str(data), "--out-dir", str(out), *argv]) == \
        bench.EXIT_USAGE
    assert not out.exists()


def test_whole_run_and_from_records_round_trip(tmp_path, data):
    memstrat, python = fake_runs.install(tmp_path / "bin")
    out = tmp_path / "out"
    argv = ["--memstrat", str(memstrat), "--python", str(python), "--data", str(data),
            "--batches", "64,256", "--hiddens", "256", "--epochs", "3", "--curve-hiddens",
            "256", "--train-samples", "2048", "--shuffle-seed", "5", "--out-dir", str(out)]
    assert bench.main(argv) == bench.EXIT_OK
    md = (out / "benchmark.md").read_text()
    recs = pr.read_records([out / "records.jsonl"])
    plan, = pr.plans(recs)
    assert recs[0] is not None and recs[0]["record"] == pr.PLAN_KIND
    # 2 configurations x (8 memstrat + 3 PyTorch) x 3 processes, in the plan's order
    runs = pr.run_records(recs)
    assert len(plan["order"]) == 66 and [pr.tag_of(r) for r in runs[:66]] == plan["order"]
    assert [pr.tag_of(r) for r in runs[66:]] == ["vs-pytorch-curve-memstrat-h256",
                                                 "vs-pytorch-curve-pytorch-h256"]
    assert recs[-1]["record"] == comparison.CURVE_KIND and recs[-1]["status"] == "ok"
    assert plan["command"] == "python3 experiments/baselines/benchmark_vs_pytorch.py " + \
        " ".join(argv)
    assert md.splitlines()[2].startswith("GPU Fake GPU, driver 999.1, commit 0123456789ab, "
                                         "command `python3 experiments/baselines/")
    assert md.count("n=3") == 2 * 16 and "--shuffle-seed 5" in md and "| agree |" in md
    rebuilt = tmp_path / "rebuilt.md"
    assert bench.main(["--from-records", str(out / "records.jsonl"), "--out-md",
                       str(rebuilt)]) == bench.EXIT_OK
    assert rebuilt.read_text() == md


# ---------------------------------------------------------------------------------------------
# --resume


def outcome(path: Path) -> tuple[list, list]:
    """(every run record's tag, status and value; every curve check's result), sorted: what a
    run leaves, less what differs from process to process (ids, times)."""
    recs = pr.read_records([path])
    runs = sorted((pr.tag_of(r), r["status"], r["summary"]["wall_ms_median"])
                  for r in pr.run_records(recs))
    checks = sorted(json.dumps([r["hidden"], r["batch"], r["status"], r["comparison"]])
                    for r in recs if r.get("record") == comparison.CURVE_KIND)
    return runs, checks


def small_plan(tmp_path, data, out) -> list[str]:
    memstrat, python = fake_runs.install(tmp_path / "bin")
    return ["--memstrat", str(memstrat), "--python", str(python), "--data", str(data),
            "--batches", "64,256", "--hiddens", "256", "--epochs", "3", "--transfers", "f32",
            "--curve-hiddens", "256", "--train-samples", "2048", "--repeats", "2",
            "--shuffle-seed", "3", "--out-dir", str(out)]


def test_resume_runs_exactly_the_missing_processes_in_the_plan_s_order(tmp_path, data,
                                                                       monkeypatch):
    whole = Sitting(monkeypatch)
    assert bench.main(small_plan(tmp_path, data, tmp_path / "whole")) == bench.EXIT_OK
    curve = ["vs-pytorch-curve-memstrat-h256", "vs-pytorch-curve-pytorch-h256"]
    order = whole.tags[:-2]
    assert whole.tags[-2:] == curve and len(order) == 2 * 2 * (4 + 3)

    argv = small_plan(tmp_path, data, tmp_path / "split") + ["--resume"]
    out = tmp_path / "split" / "records.jsonl"
    k = 5
    first = Sitting(monkeypatch, stop_at=k)
    with pytest.raises(KeyboardInterrupt):
        bench.main(argv)
    assert first.tags == order[:k + 1]
    # the interrupted run wrote its own record, but none reached the records file
    assert [pr.tag_of(r) for r in pr.run_records(pr.read_records([out]))] == order[:k]
    # the rest, in the same order; this sitting stops in the curve check's second process
    second = Sitting(monkeypatch, stop_at=len(order) - k + 1)
    with pytest.raises(KeyboardInterrupt):
        bench.main(argv)
    assert second.tags == order[k:] + curve
    third = Sitting(monkeypatch)
    assert bench.main(argv) == bench.EXIT_OK
    assert third.tags == curve                    # the check again, both of its processes
    assert bench.main(argv) == bench.EXIT_OK      # nothing left: nothing runs
    assert len(third.tags) == 2

    runs, checks = outcome(out)
    whole_runs, whole_checks = outcome(tmp_path / "whole" / "records.jsonl")
    # the same records as the uninterrupted run, and the first curve process of the check that
    # was stopped (its record had been appended before the stop)
    assert checks == whole_checks and len(checks) == 1
    extra = next(r for r in runs if r[0] == curve[0])
    runs.remove(extra)
    assert runs == whole_runs
    recs = pr.read_records([out])
    assert [p["order"] for p in pr.plans(recs)] == [order, order[k:]]
    md = (tmp_path / "split" / "benchmark.md").read_text()
    assert "Runs without an ok record" not in md and "| agree |" in md
    speed = comparison.speed_markdown(comparison.build_rows(recs))
    assert speed == comparison.speed_markdown(comparison.build_rows(
        pr.read_records([tmp_path / "whole" / "records.jsonl"])))
    assert speed in md


def test_a_records_file_of_another_plan_is_refused(tmp_path, data, no_processes, capsys):
    out = tmp_path / "out"
    argv = ["--data", str(data), "--out-dir", str(out), "--batches", "64", "--hiddens", "256",
            "--transfers", "f32", "--epochs", "3", "--curve-hiddens", "256", "--repeats", "3"]
    a = bench.build_parser().parse_args(argv)
    order = pr.shuffled(bench.make_plan(a).specs(3), 1)
    plan = pr.plan_record(bench.PROG, "python3 experiments/baselines/benchmark_vs_pytorch.py",
                          1, 3, order, 60.0, [])
    run = fake_runs.memstrat_record("pinned", "f32", 64, 256, 3, order[0].tag, 5.0)
    tol = comparison.Tolerance()

    def holding(*recs) -> None:
        out.mkdir(exist_ok=True)
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))

    holding(plan, run)
    # the same plan resumes: the run with an ok record is left out
    assert no_processes(bench.main, ["--dry-run", "--resume", *argv]) == bench.EXIT_OK
    listed = capsys.readouterr().out
    assert "resuming: 1 of 21 runs" in listed and order[0].tag not in listed
    assert order[1].tag in listed
    # without --resume a file that holds runs is refused: a second plan would mix into it
    assert no_processes(bench.main, ["--dry-run", *argv]) == bench.EXIT_USAGE
    assert "--resume continues that plan" in capsys.readouterr().err
    other = [["--shuffle-seed", "2"],            # another order of the same runs
             ["--repeats", "5"],                 # more processes of each configuration
             ["--batches", "256"],               # runs this plan does not have
             ["--epochs", "4"]]
    for options in other:
        assert no_processes(bench.main, ["--dry-run", "--resume", *argv, *options]) == \
            bench.EXIT_USAGE, options
        err = capsys.readouterr().err
        assert "holds records of another plan" in err and "--resume continues only" in err
    # a curve check of another tolerance, or a run no plan record lists
    c = comparison.compare_curves({(1, 0): 2.3}, {(1, 0): 2.3})
    holding(plan, run, comparison.curve_record(256, 256, c, "", "", tol))
    assert no_processes(bench.main, ["--dry-run", "--resume", *argv]) == bench.EXIT_OK
    assert no_processes(bench.main, ["--dry-run", "--resume", *argv, "--curve-atol",
                                     "1e-2"]) == bench.EXIT_USAGE
    assert "a loss-curve check at hidden 256" in capsys.readouterr().err
    holding(plan, fake_runs.memstrat_record("pinned", "f32", 64, 256, 3, "vs-pytorch-x-r0", 5.0))
    assert no_processes(bench.main, ["--dry-run", "--resume", *argv]) == bench.EXIT_USAGE
    assert "run vs-pytorch-x-r0, which this plan does not have" in capsys.readouterr().err


def test_a_curve_check_run_again_replaces_the_one_that_failed():
    tol = comparison.Tolerance()
    failed = comparison.curve_record(256, 256, None, "pytorch: exit 1", "", tol)
    c = comparison.compare_curves({(1, 0): 2.3, (1, 1): 2.0}, {(1, 0): 2.3, (1, 1): 2.0})
    ok = comparison.curve_record(256, 256, c, "", "97.10% / 97.08%", tol)
    plan = bench.make_plan(bench.build_parser().parse_args(["--curve-hiddens", "256,1024"]))
    assert bench.curves_to_run([failed], plan) == [256, 1024]    # --resume runs it again
    assert bench.curves_to_run([failed, ok], plan) == [1024]
    text, _, curves_ok = bench.report([failed, ok])
    assert curves_ok and "FAILED" not in text and "| agree |" in text
    text, _, curves_ok = bench.report([failed])
    assert not curves_ok and "FAILED: pytorch: exit 1" in text
