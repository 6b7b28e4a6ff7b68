"""experiments/baselines/benchmark_stream.py without a GPU or torch: its options and plan, the
--reproduce preset and its estimate, the table built from records (memstrat's stream record as
the writer makes it, tests/experiments/fixtures/run_record_stream.json, and DataLoader records
of the same shape as pytorch_dataloader.py writes), usage errors before any run, and a whole run
with stand-ins (fake_runs.py) whose table --from-records rebuilds unchanged."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmark_stream as bs  # noqa: E402
from analysis import stats  # noqa: E402
import fake_runs  # noqa: E402
import process_runs as pr  # noqa: E402
from sittings import Sitting  # noqa: E402


def rec(strategy, augment, workers, values, wait=0.0, status="ok"):
    out = []
    for i, ms in enumerate(values):
        r = fake_runs.stream_record(strategy, augment, workers,
                                    f"vs-dataloader-{strategy}-{augment}-w{workers}-r{i}", ms,
                                    wait=wait * ms)
        r["status"] = status
        out.append(r)
    return out


def dl(augment, workers, values, pin=True, wait=0.0):
    return [fake_runs.dataloader_record(augment, workers, f"vs-dataloader-torch-{augment}-w"
                                        f"{workers}-pin{'on' if pin else 'off'}-batch-r{i}", ms,
                                        pin=pin, wait=wait * ms)
            for i, ms in enumerate(values)]


def six(centre, step):
    """Six processes around `centre`: enough for the Holm-corrected test to separate two sets."""
    return [centre + k * step for k in (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)]


@pytest.fixture
def records():
    return [
        # light: 1 worker, memstrat starves half of the time (wait = 0.5 of the epoch)
        *rec("pinned", "light", 1, six(31.0, 0.4), wait=0.5),
        *rec("double-buffer", "light", 1, six(29.0, 0.4), wait=0.5),
        *dl("light", 0, [900.0, 910.0, 920.0], wait=0.6),
        *dl("light", 1, six(710.0, 4.0), wait=0.5),
        *dl("light", 1, six(660.0, 4.0), pin=False),
        # heavy: two processes of pinned (no interval), a failed run that must not count, and
        # the DataLoader only at 4 workers
        *rec("pinned", "heavy", 4, [100.0, 110.0]),
        *rec("pinned", "heavy", 4, [1.0], status="failed"),
        *rec("double-buffer", "heavy", 4, six(100.0, 2.0)),
        *rec("double-buffer", "heavy", 1, six(410.0, 4.0)),
        *dl("heavy", 4, six(2100.0, 40.0)),
        # another scenario is not part of the comparison
        dict(rec("pinned", "light", 1, [5.0])[0],
             config=dict(fake_runs.STREAM["config"], scenario="static")),
    ]


def table(md: str, augment: str) -> list[list[str]]:
    part = md.split(f"### --augment {augment}")[1].split("###")[0]
    return [[c.strip() for c in ln.strip().strip("|").split("|")]
            for ln in part.splitlines() if re.match(r"\| \d", ln)]


def test_entries_are_one_per_configuration(records):
    es = {(e.side, e.augment, e.workers, e.setting): e for e in bs.entries(records)}
    assert len(es) == 2 + 3 + 3 + 1
    heavy = es[("memstrat", "heavy", 4, "pinned")]
    assert heavy.wall == [100.0, 110.0] and heavy.ms.median == 105.0 and heavy.ms.ci is None
    assert es[("memstrat", "heavy", 4, "double-buffer")].ms.n == 6
    light = es[("memstrat", "light", 1, "pinned")]
    # starvation leaves the first batch's wait out: 0.5 of every epoch
    assert light.starving.median == pytest.approx(0.5)
    assert es[("dataloader", "light", 1, "pin_memory off, fetch batch")].ms.median == 660.0


def test_table_pairs_every_strategy_with_every_setting(records):
    md = bs.ratio_markdown(bs.entries(records))
    light = table(md, "light")
    # 0 workers: the DataLoader alone; 1 worker: 2 strategies x 2 DataLoader settings
    assert [r[0] for r in light] == ["0", "1", "1", "1", "1"]
    assert light[0][1:3] == ["-", "-"] and light[0][4] == "pin_memory on, fetch batch"
    # three processes: the range, with its 75% coverage printed
    assert light[0][5] == "910.00 [900.00-920.00] 75% n=3" and light[0][7:] == ["-", "-"]
    row = next(r for r in light if r[1] == "double-buffer" and r[4].startswith("pin_memory off"))
    assert row[2:4] == ["29.00 [28.00-30.00] n=6", "50.0% [50.0%-50.0%] n=6"]
    assert row[5:7] == ["660.00 [650.00-670.00] n=6", "0.0% [0.0%-0.0%] n=6"]
    e = stats.ratio(six(29.0, 0.4), six(660.0, 4.0))
    assert row[7] == f"{e.estimate:.2f}x [{e.ci.low:.2f}, {e.ci.high:.2f}]"
    assert row[8].startswith("memstrat faster (p=")      # Holm over the 4 pairs: 4 x 0.0022
    heavy = table(md, "heavy")
    # memstrat at 1 worker has no DataLoader partner; pinned at 4 has 2 processes
    assert heavy[0][1] == "double-buffer" and heavy[0][4:6] == ["-", "not run"]
    pinned4 = next(r for r in heavy if r[1] == "pinned")
    assert pinned4[2] == "105.00 (n=2)" and pinned4[8] == "too few processes (n<3)"
    # the fastest: double-buffer 4 workers against the DataLoader at 4 workers
    assert "- memstrat's fastest: double-buffer, 4 workers: 100.00 [95.00-105.00] n=6" in md
    e = stats.ratio(six(100.0, 2.0), six(2100.0, 40.0))
    assert ("- DataLoader / memstrat, the lowest medians of the fastest (pin_memory on, fetch "
            f"batch, 4 workers / double-buffer, 4 workers): {e.estimate:.2f}x") in md


def test_the_fastest_are_not_ordered_among_themselves_without_a_test():
    es = bs.entries([*rec("pinned", "light", 4, six(11.0, 0.4)),
                     *rec("double-buffer", "light", 4, six(11.2, 0.4)),
                     *rec("pinned", "light", 8, six(21.0, 0.4))])
    md = bs.ratio_markdown(es)
    assert ("- memstrat's fastest: pinned, 4 workers: 11.00 [10.00-12.00] n=6 UNSTABLE; "
            "double-buffer, 4 workers: 11.20 [10.20-12.20] n=6 UNSTABLE (not separated by the "
            "Holm-corrected tests: not ordered among them)") in md
    assert "- DataLoader's fastest: no configuration with 3 processes or more" in md


def test_strategies_are_those_the_registry_lets_run_host_produced_batches():
    """memory_strategies/registry.cpp refuses the stream scenario with host augmentation for the
    entries whose scenario check is not_in_stream, stream_needs_gather or static_only (the
    peer-fanout forms); every other strategy runs it (tests/cpu/test_registry.cpp), and the
    benchmark runs them all but a data path across GPUs that is another strategy's on one GPU
    (one_gpu_as: host-shared is pinned there, um-shared um)."""
    src = (REPO / "memory_strategies" / "registry.cpp").read_text()
    entries = re.findall(r'^\s*\{"([a-z-]+)", "(.*)$', src, flags=re.M)
    assert len(entries) >= 12
    refused = {n for n, rest in entries
               if "not_in_stream" in rest or "stream_needs_gather" in rest or "static_only" in rest}
    assert refused == {"resident", "zero-copy-staged", "pinned-graph", "double-buffer-graph",
                       "peer-fanout", "peer-fanout-ring", "host-shared-ring"}
    same = {n for n, rest in entries if re.search(r'one_gpu_as=\*/"[a-z-]+"', rest)}
    assert same == {"peer-fanout", "peer-fanout-ring", "host-shared", "host-shared-ring",
                    "um-shared", "um-shared-host", "um-shared-prefetch", "um-shared-read-mostly"}
    assert set(bs.STRATEGIES) == {n for n, _ in entries} - refused - same
    assert set(bs.REPRODUCE["strategies"]) <= set(bs.STRATEGIES)


def test_plan_and_options(capsys, data):
    a = bs.build_parser().parse_args([])
    plan = bs.make_plan(a)
    assert plan.workers == [0, 1, 2, 4, 8] and plan.augments == ["light", "heavy"]
    assert a.repeats == 3 and len(plan.strategies) == 8
    # memstrat has no "0 workers"; the DataLoader runs every worker count, pin on and off
    assert len(plan.memstrat_runs()) == 8 * 4 * 2 and len(plan.dataloader_runs()) == 5 * 2 * 2
    assert len(plan.specs(3)) == 3 * (64 + 20)
    assert bs.main(["--dry-run", "--quick", "--data", str(data)]) == bs.EXIT_OK
    assert "12 memstrat + 6 DataLoader runs" in capsys.readouterr().out


def test_reproduce_plan_and_estimate(capsys, data):
    p = bs.build_parser()
    a = p.parse_args(["--reproduce"])
    pr.apply_preset(a, p, bs.REPRODUCE, [*bs.REPRODUCE, "quick"])
    plan = bs.make_plan(a)
    assert (plan.strategies, plan.pins, plan.fetches, plan.batch, plan.epochs, a.repeats,
            plan.steady_s) == (["pinned", "double-buffer"], ["on"], ["batch"], 256, 21, 10, 1.0)
    # memstrat: 2 strategies x workers 1,2,4,8 x 2 augments; the DataLoader: light at 0..8,
    # heavy at 2,4,8
    assert len(plan.memstrat_runs()) == 16 and len(plan.dataloader_runs()) == 5 + 3
    assert ("heavy", 0, "on", "batch") not in plan.dataloader_runs()
    assert len(plan.specs(10)) == 10 * 24 == 240
    est = bs.estimate_seconds(plan, 10)
    assert 600 < est <= bs.REPRODUCE_TARGET_S
    plan.skip = []                            # the trim is what keeps it under the target
    assert bs.estimate_seconds(plan, 10) > bs.REPRODUCE_TARGET_S
    assert bs.main(["--reproduce", "--dry-run", "--data", str(data)]) == bs.EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"plan: estimated {est / 60:.1f} min ({est:.0f} s)")
    assert "160 memstrat + 80 DataLoader runs of 3-21 epochs" in out
    assert "DataLoader with --augment heavy and 0, 1 workers: not run (--reproduce" in out
    assert "epochs per configuration (--steady-s 1): the fewest, 3 to 21" in out


def test_steady_s_gives_a_slow_configuration_fewer_epochs_and_enough_steady_work():
    p = bs.build_parser()
    a = p.parse_args(["--epochs", "21", "--steady-s", "1"])
    plan = bs.make_plan(a)
    for side, runs in (("memstrat", plan.memstrat_runs()), ("dataloader", plan.dataloader_runs())):
        for c in runs:
            e = plan.epochs_for(side, c)
            assert bs.MIN_EPOCHS <= e <= 21
            steady = (e - 1) * bs.epoch_seconds(plan, side, c)
            # enough steady work by the estimate, or all 20 steady epochs
            assert e == 21 or steady >= bs.STEADY_SAFETY * 1.0
            # and no more epochs than that needs
            assert e == bs.MIN_EPOCHS or (e - 2) * bs.epoch_seconds(plan, side, c) < 2.0
    assert plan.epochs_for("memstrat", ("pinned", "light", 8)) == 21          # ~12 ms epochs
    assert plan.epochs_for("dataloader", ("heavy", 2, "on", "batch")) == 3    # ~3.3 s epochs
    # without --steady-s every run makes --epochs
    fixed = bs.make_plan(p.parse_args(["--epochs", "7"]))
    assert {fixed.epochs_for("dataloader", c) for c in fixed.dataloader_runs()} == {7}

    class Runner:  # what run_spec asks for, run nothing
        def memstrat(self, tag, label, args):
            return args

        def script(self, script, tag, label, args):
            return args
    for spec in plan.specs(1):
        args = bs.run_spec(Runner(), plan, spec)
        assert args[args.index("--epochs") + 1] == str(plan.epochs_for(spec.side, spec.config))


BAD = [["--workers", "1,-2"], ["--augments", "medium"], ["--strategies", "resident"],
       ["--strategies", "zero-copy-staged"], ["--pin-memory", "maybe"], ["--repeats", "0"],
       ["--epochs", "1"], ["--batch", "0"], ["--dataloader-skip", "heavy"],
       ["--reproduce", "--quick"], ["--reproduce", "--workers", "1,2"],
       ["--reproduce", "--pin-memory", "on,off"], ["--reproduce", "--steady-s", "2"],
       ["--steady-s", "0"], ["--steady-s", "-1"], ["--steady-s", "nan"],
       ["--steady-s", "1", "--epochs", "2"], ["--from-records", "/nonexistent.jsonl"],
       ["--data", "/nonexistent"], ["--memstrat", "/nonexistent/memstrat"]]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(b) for b in BAD])
def test_bad_options_exit_2_before_any_run(argv, tmp_path, data, no_processes):
    out = tmp_path / "out"
    assert no_processes(bs.main, ["--data", str(data), "--out-dir", str(out), *argv]) == \
        bs.EXIT_USAGE
    assert not out.exists()


def test_whole_run_and_from_records_round_trip(tmp_path, data):
    memstrat, python = fake_runs.install(tmp_path / "bin")
    out = tmp_path / "out"
    argv = ["--memstrat", str(memstrat), "--python", str(python), "--data", str(data),
            "--reproduce", "--out-dir", str(out)]
    assert bs.main(argv) == bs.EXIT_OK
    md = (out / "benchmark_stream.md").read_text()
    recs = pr.read_records([out / "records.jsonl"])
    plan, = pr.plans(recs)
    assert [pr.tag_of(r) for r in pr.run_records(recs)] == plan["order"]
    assert len(plan["order"]) == 240 and plan["repeats"] == 10 and plan["shuffle_seed"] == 1
    assert md.splitlines()[2] == ("GPU Fake GPU, driver 999.1, commit 0123456789ab, command "
                                  "`python3 experiments/baselines/benchmark_stream.py "
                                  + " ".join(argv) + "`")
    assert len(table(md, "light")) == 1 + 4 * 2 and len(table(md, "heavy")) == 4 * 2
    assert "heavy and 0, 1 workers: not run" in md and "Runs without an ok record" not in md
    rebuilt = tmp_path / "rebuilt.md"
    assert bs.main(["--from-records", str(out / "records.jsonl"), "--out-md", str(rebuilt)]) \
        == bs.EXIT_OK
    assert rebuilt.read_text() == md


def test_the_pipeline_measure_runs_no_step_on_either_side_and_is_tabled_apart(records, data,
                                                                               no_processes,
                                                                               capsys):
    # the plan: -pipeline tags, so both measures can share a records file
    assert no_processes(bs.main, ["--dry-run", "--quick", "--measure", "pipeline",
                                  "--data", str(data)]) == 0
    tags = [ln.split(". ", 1)[1] for ln in capsys.readouterr().out.splitlines()
            if ". vs-dataloader-" in ln]
    assert tags and all(t.rsplit("-r", 1)[0].endswith("-pipeline") for t in tags)

    class Runner:  # what run_spec asks for, run nothing
        def memstrat(self, tag, label, args):
            return ("memstrat", args)

        def script(self, script, tag, label, args):
            return (Path(script).name, args)

    plan = bs.Plan(["pinned"], [2], ["light"], ["on"], ["batch"], 256, 3, measure="pipeline")
    specs = plan.specs(1)
    got = {s.side: bs.run_spec(Runner(), plan, s) for s in specs}
    assert got["memstrat"][1][-2:] == ["--consumer", "none"]
    assert got["dataloader"][0] == "pytorch_prefetch_graph.py"
    assert got["dataloader"][1][-2:] == ["--measure", "pipeline"]
    epoch_plan = bs.Plan(["pinned"], [2], ["light"], ["on"], ["batch"], 256, 3)
    got = {s.side: bs.run_spec(Runner(), epoch_plan, s) for s in epoch_plan.specs(1)}
    assert "--consumer" not in got["memstrat"][1]
    assert got["dataloader"][0] == "pytorch_dataloader.py"

    # the table: a memstrat run without a consumer and a prefetch-graph DataLoader run with the
    # pipeline measure are a table of their own, beside the end-to-end one
    piped = []
    for r in rec("pinned", "light", 1, six(13.58, 0.01)):
        r["config"] = dict(r["config"], consumer="none")
        piped.append(r)
    for r in dl("light", 1, six(246.81, 0.01)):
        r["config"] = dict(r["config"], strategy=bs.PREFETCH_NAME, measure="pipeline")
        piped.append(r)
    md = bs.report(records + piped)
    assert "### pipeline throughput, --augment light, batch 256" in md
    part = md.split("### pipeline throughput, --augment light")[1].split("###")[0]
    rows = [ln for ln in part.splitlines() if ln.startswith("| 1 |")]
    assert len(rows) == 1 and "13.58" in rows[0] and "246.81" in rows[0]
    end_to_end = md.split("### --augment light")[1].split("###")[0]
    assert "13.58" not in end_to_end and "246.81" not in end_to_end


# ---------------------------------------------------------------------------------------------
# --resume


def outcome(path: Path) -> list:
    """Every run record's tag, status and value, sorted: what a plan leaves, less what differs
    from process to process (ids, times)."""
    return sorted((pr.tag_of(r), r["status"], r["summary"]["wall_ms_median"])
                  for r in pr.run_records(pr.read_records([path])))


def test_resume_runs_exactly_the_missing_processes_of_each_measure(tmp_path, data, monkeypatch):
    # the stand-in python plays pytorch_dataloader.py; here it plays the prefetch script too
    monkeypatch.setattr(bs, "PREFETCH", bs.DATALOADER)
    memstrat, python = fake_runs.install(tmp_path / "bin")

    def argv(out: str, measure: str) -> list[str]:
        return ["--memstrat", str(memstrat), "--python", str(python), "--data", str(data),
                "--strategies", "pinned,double-buffer", "--workers", "0,1,2", "--augments",
                "light", "--pin-memory", "on", "--epochs", "3", "--repeats", "2",
                "--shuffle-seed", "4", "--train-samples", "2048", "--measure", measure,
                "--out-dir", str(tmp_path / out)]

    # uninterrupted: end to end, then the pipeline measure into the same file
    whole = {}
    for measure in bs.MEASURES:
        whole[measure] = Sitting(monkeypatch).tags
        assert bs.main(argv("whole", measure) + (["--resume"] if measure != "epoch" else [])) \
            == bs.EXIT_OK
    epoch, pipeline = whole["epoch"], whole["pipeline"]
    assert len(epoch) == len(pipeline) == 2 * (2 * 2 + 3)
    assert all(t.endswith(("-r0", "-r1")) and "-pipeline-" in t for t in pipeline)

    # the same, stopped once in each measure and resumed, as reproduce.sh runs it
    out = tmp_path / "split" / "records.jsonl"
    first = Sitting(monkeypatch, stop_at=4)
    with pytest.raises(KeyboardInterrupt):
        bs.main(argv("split", "epoch") + ["--resume"])
    assert first.tags == epoch[:5]
    # the interrupted run wrote its own record, but none reached the records file
    assert [pr.tag_of(r) for r in pr.run_records(pr.read_records([out]))] == epoch[:4]
    rest = Sitting(monkeypatch)
    assert bs.main(argv("split", "epoch") + ["--resume"]) == bs.EXIT_OK
    assert rest.tags == epoch[4:]                 # the missing ones, in the plan's order
    piped = Sitting(monkeypatch, stop_at=9)
    with pytest.raises(KeyboardInterrupt):
        bs.main(argv("split", "pipeline") + ["--resume"])
    assert piped.tags == pipeline[:10]
    rest = Sitting(monkeypatch)
    assert bs.main(argv("split", "pipeline") + ["--resume"]) == bs.EXIT_OK
    assert rest.tags == pipeline[9:]
    for measure in bs.MEASURES:                   # nothing left: nothing runs
        assert bs.main(argv("split", measure) + ["--resume"]) == bs.EXIT_OK
    assert rest.tags == pipeline[9:]

    assert outcome(out) == outcome(tmp_path / "whole" / "records.jsonl")
    recs = pr.read_records([out])
    assert [p["order"] for p in pr.plans(recs)] == [epoch, epoch[4:], pipeline, pipeline[9:]]
    md = (tmp_path / "split" / "benchmark_stream.md").read_text()
    assert "Runs without an ok record" not in md
    table_md = bs.ratio_markdown(bs.entries(recs))
    assert table_md == bs.ratio_markdown(bs.entries(
        pr.read_records([tmp_path / "whole" / "records.jsonl"]))) and table_md in md


def test_a_records_file_of_another_plan_is_refused(tmp_path, data, no_processes, capsys):
    out = tmp_path / "out"
    argv = ["--data", str(data), "--out-dir", str(out), "--strategies", "pinned", "--workers",
            "0,2", "--augments", "light", "--pin-memory", "on", "--epochs", "3"]
    a = bs.build_parser().parse_args(argv)
    order = pr.shuffled(bs.make_plan(a).specs(3), 1)
    cmd = "python3 experiments/baselines/benchmark_stream.py"
    plan = pr.plan_record(bs.PROG, cmd, 1, 3, order, 60.0, [])
    run = fake_runs.stream_record("pinned", "light", 2, order[0].tag, 5.0, epochs=3)

    def holding(*recs) -> None:
        out.mkdir(exist_ok=True)
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))

    holding(plan, run)
    # the same plan resumes: the run with an ok record is left out
    assert no_processes(bs.main, ["--dry-run", "--resume", *argv]) == bs.EXIT_OK
    listed = capsys.readouterr().out
    assert f"resuming: 1 of {len(order)} runs" in listed and order[0].tag not in listed
    # so does it beside the other measure's runs of the same options (one file for both)
    piped = pr.shuffled(bs.make_plan(bs.build_parser().parse_args(
        [*argv, "--measure", "pipeline"])).specs(3), 1)
    holding(plan, run, pr.plan_record(bs.PROG, cmd, 1, 3, piped, 60.0, []),
            fake_runs.stream_record("pinned", "light", 2, piped[0].tag, 5.0, epochs=3))
    assert no_processes(bs.main, ["--dry-run", "--resume", *argv]) == bs.EXIT_OK
    assert f"resuming: 1 of {len(order)} runs" in capsys.readouterr().out
    # without --resume a file that holds runs is refused: a second plan would mix into it
    assert no_processes(bs.main, ["--dry-run", *argv]) == bs.EXIT_USAGE
    assert "--resume continues that plan" in capsys.readouterr().err
    other = [["--shuffle-seed", "2"],            # another order of the same runs
             ["--repeats", "5"],                 # more processes of each configuration
             ["--workers", "1,2"],               # runs this plan does not have
             ["--batch", "128"],                 # the same run tags, another batch ...
             ["--epochs", "4"]]                  # ... or other epochs
    for options in other:
        assert no_processes(bs.main, ["--dry-run", "--resume", *argv, *options]) == \
            bs.EXIT_USAGE, options
        err = capsys.readouterr().err
        assert "holds records of another plan" in err and "--resume continues only" in err
    assert no_processes(bs.main, ["--dry-run", "--resume", *argv, "--batch", "128"]) == 2
    assert f"run {order[0].tag} with batch 256 (this plan: 128)" in capsys.readouterr().err
    # another benchmark's plan record
    holding(dict(plan, benchmark="benchmark_pipelines.py"), run)
    assert no_processes(bs.main, ["--dry-run", "--resume", *argv]) == bs.EXIT_USAGE
    assert "a plan record of benchmark_pipelines.py" in capsys.readouterr().err
