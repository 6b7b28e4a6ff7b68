"""analysis/advise.py and analysis/advise_check.py: predictions on a hand-made primitive table
(copies at exactly 10 GB/s, so every prediction is a sum by hand), device footprints and budget
refusals, the tie rule, bad input (one line, exit 2), primitives measured through memstrat, the
--json shape, the agreement check on synthetic results sets, and both on the committed H200 set."""
import copy
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import advise as A
from analysis import advise_check as AC
from analysis import cost_model as M
from analysis.primitives import Curve, Point, PrimitiveTable

from conftest import REPO

# This folder's fixtures, by path: another folder's conftest may be the `conftest` module
# imported first in a whole-suite run, and its FIXTURES is another folder.
FIXTURES = Path(__file__).resolve().parent / "fixtures"

H200 = REPO / "docs" / "results" / "nvidia-h200"
H200_PRIMITIVES = H200 / "records" / "primitives.jsonl"
RATE = 1e4            # bytes per µs: 10 GB/s
# 1000 samples of 1000 B (+ 4 B labels), batch 250: 4 batches of 250000 B images + 1000 B labels
SHAPE = A.user_shape(1000, 250, 1000, "f32")
COPY_US = (250_000 + 1_000) / RATE        # one batch's two copies: 25.1 µs
DATA_SET = 1000 * 1004


def linear_table(**rates):
    """Primitives whose time is bytes / rate exactly (a power law: log-log interpolation is
    exact), from 100 B to 1 GB; name=rate keywords, underscores for dashes."""
    def curve(name, rate):
        sizes = [100 * 10 ** k for k in range(8)]
        pts = [Point(b, b / rate, b / rate, b / rate, b / rate, b / rate, rate / 1e3, 1)
               for b in sizes]
        return Curve(name, "GPU", "ok", "cuda-events", "host-to-device", pts)
    return PrimitiveTable({n.replace("_", "-"): curve(n.replace("_", "-"), r)
                           for n, r in rates.items()})


def by_name(advice):
    return {o.strategy: o for o in advice.options}


# ---- predictions by hand ----------------------------------------------------------------------

def test_serial_and_overlap_predictions_by_hand():
    t = linear_table(pinned_h2d=RATE)
    a = A.advise(SHAPE, "static", 4.0, t)                 # step 1000 µs
    o = by_name(a)
    assert SHAPE.batches == 4 and SHAPE.image_bytes_per_sample == 1000
    # pinned: serial, C + every copy
    assert o["pinned"].predicted_ms == pytest.approx(4.0 + 4 * COPY_US / 1e3)
    assert o["pinned"].movement_ms == pytest.approx(4 * COPY_US / 1e3)
    assert o["pinned"].moved_bytes == 4 * 251_000
    # double-buffer: the first batch's copies exposed, every later one hidden behind a step
    assert o["double-buffer"].predicted_ms == pytest.approx(4.0 + COPY_US / 1e3)
    # static resident and um move nothing: C
    assert o["resident"].predicted_ms == o["um"].predicted_ms == 4.0
    # no curve, no guess
    assert o["pageable"].prediction is None and "pageable-h2d" in o["pageable"].no_model
    # copies longer than the steps set the pace (per unit: max(step, copy)), step 10 µs
    fast = by_name(A.advise(SHAPE, "refresh", 0.04, t))
    assert fast["double-buffer"].predicted_ms == pytest.approx((COPY_US + 3 * COPY_US + 10) / 1e3)
    # refresh: resident uploads the whole set before batch 0 (two copies), serially
    assert fast["resident"].predicted_ms == pytest.approx(0.04 + DATA_SET / RATE / 1e3)


def test_the_advice_at_the_kernel_form_hides_no_transfer():
    """advise(..., epoch_form="kernel"): an overlapped strategy pays every copy before the one
    launch (cost_model.at_form), so double-buffer is pinned's C + every copy there."""
    t = linear_table(pinned_h2d=RATE)
    o = by_name(A.advise(SHAPE, "static", 4.0, t, epoch_form="kernel"))
    assert o["double-buffer"].predicted_ms == pytest.approx(4.0 + 4 * COPY_US / 1e3)
    assert o["double-buffer"].predicted_ms == o["pinned"].predicted_ms


def test_u8_and_f32_set_zero_copys_reads_per_step():
    t = linear_table(sm_copy_mapped=RATE)
    reads = {}
    for kind in ("u8", "f32"):
        o = by_name(A.advise(A.user_shape(1000, 250, 1000, kind), "static", 4.0, t))["zero-copy"]
        reads[kind] = o.moved_bytes
    assert reads["u8"] == 4 * (250_000 * M.X_READS[(A.USER_STEP, "u8")] + 1000)
    assert reads["f32"] == 4 * (250_000 * 2 + 1000)


def test_footprints_by_hand():
    assert A.data_set(SHAPE) == DATA_SET
    assert A.one_batch(SHAPE) == 251_000
    assert A.FOOTPRINTS["double-buffer"].nbytes(SHAPE) == 2 * 251_000
    assert A.FOOTPRINTS["zero-copy"].nbytes(SHAPE) == 0
    # a block of 250 rows is 251000 B, stride 251008; 8 MiB holds the epoch: one chunk of 4
    # blocks, so one slot though the depth is 2 (SlotRing allocates min(depth, chunks))
    assert A.chunk_slot(SHAPE) == 3 * 251_008 + 251_000
    assert A.FOOTPRINTS["double-buffer-graph"].nbytes(SHAPE) == A.chunk_slot(SHAPE)
    # 3000 B samples: a 751000 B block, only one per 1 MiB chunk: 4 chunks, 2 slots of a block
    two = A.user_shape(1000, 250, 3000, "f32", copy_chunk_mib=1)
    assert len(two.units(M.COPY_CHUNKS)) == 4 and A.chunk_ring(two) == 2 * 751_000
    # a batch larger than the set: one batch of every sample
    big = A.user_shape(1000, 5000, 1000, "f32")
    assert big.batches == 1 and A.one_batch(big) == DATA_SET


def test_every_modelled_strategy_has_a_footprint_and_a_place_in_the_simplicity_order():
    assert set(A.FOOTPRINTS) == set(M.MODELS)
    assert [n for n, _ in A.SIMPLICITY] and set(A.SIMPLICITY_RANK) == set(M.MODELS)
    assert len(A.SIMPLICITY) == len(A.SIMPLICITY_RANK)


# ---- budget and ties --------------------------------------------------------------------------

def test_the_whole_set_strategies_do_not_fit_a_budget_below_the_data_set():
    t = linear_table(pinned_h2d=RATE)
    a = A.advise(SHAPE, "static", 4.0, t, budget_bytes=DATA_SET - 1)
    o = by_name(a)
    for name in ("resident", "um", "um-prefetch", "um-advise", "um-prefetch-coarse"):
        assert not o[name].fits and o[name].device_bytes == DATA_SET
    assert o["pinned"].fits and o["double-buffer"].fits
    assert a.recommended.strategy not in ("resident", "um")
    assert all(by_name(A.advise(SHAPE, "static", 4.0, t, DATA_SET))[n].fits
               for n in ("resident", "um"))
    text = "\n".join(A.text_lines(a, "GPU"))
    assert "resident             does not fit: needs 1.0 MiB (the data set" in text
    # nothing with a prediction fits
    none = A.advise(SHAPE, "static", 4.0, PrimitiveTable({}), budget_bytes=1)
    assert none.recommended is None and none.tied == ()
    assert "no recommendation" in "\n".join(A.text_lines(none, "GPU"))


def test_a_tie_goes_to_the_simpler_strategy_and_names_both():
    t = linear_table(pinned_h2d=RATE)
    budget = 600_000                                      # not the data set: no resident, no um
    a = A.advise(SHAPE, "static", 4.0, t, budget)
    # double-buffer 4.0251 ms is fastest; pinned 4.1004 ms is within 5% and simpler
    assert by_name(a)["pinned"].predicted_ms <= \
        by_name(a)["double-buffer"].predicted_ms * (1 + A.TIE_TOLERANCE)
    assert a.is_tie and a.recommended.strategy == "pinned"
    assert [o.strategy for o in a.tied] == ["double-buffer", "pinned"]
    text = "\n".join(A.text_lines(a, "GPU"))
    assert "tie: pinned and double-buffer are predicted within 5%" in text
    # a 10 µs step: the copies set the pace, pinned is 27% slower, no tie
    b = A.advise(SHAPE, "static", 0.04, t, budget)
    assert not b.is_tie and b.recommended.strategy == "double-buffer"
    assert "why: transfers of 1.0 MB/epoch (pinned-h2d) take 0.100 ms, overlapped with " \
           "0.040 ms of compute" in "\n".join(A.text_lines(b, "GPU"))


def test_the_tie_rule_on_its_own():
    def opt(name, ms):
        p = M.Prediction(ms, 1.0, 0.0, M.NOTHING_MOVES)
        return A.Option(name, p, None, 0, "", True, 0)
    rec, tied = A.choose([opt("double-buffer", 10.0), opt("pinned", 10.49), opt("um", 10.6)])
    assert rec.strategy == "pinned" and [o.strategy for o in tied] == ["double-buffer", "pinned"]
    rec, tied = A.choose([opt("double-buffer", 10.0), opt("pinned", 10.51)])
    assert rec.strategy == "double-buffer" and len(tied) == 1
    assert A.choose([]) == (None, ())


# ---- the command line -------------------------------------------------------------------------

def run(*args, **kw):
    return subprocess.run([sys.executable, str(REPO / "analysis" / "advise.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=kw.get("cwd", REPO))


GOOD = ["--step-us", "26", "--bytes-per-sample", "784", "--samples", "60000",
        "--budget-gib", "4", "--primitives", FIXTURES / "primitives.jsonl"]


@pytest.mark.parametrize("flag, value", [
    ("--step-us", "0"), ("--step-us", "-3"), ("--step-us", "nan"), ("--step-us", "inf"),
    ("--samples", "0"), ("--samples", "1.5"), ("--batch", "0"), ("--bytes-per-sample", "abc"),
    ("--budget-gib", "-1"), ("--budget-gib", "inf"), ("--scenario", "stream"),
    ("--input", "f16")])
def test_bad_values_are_one_line_and_exit_2(flag, value, capsys):
    args = [str(a) for a in GOOD]
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    with pytest.raises(SystemExit) as exc:
        A.main(args)
    out = capsys.readouterr()
    assert exc.value.code == 2 and not out.out
    assert len(out.err.strip().splitlines()) == 1 and flag in out.err


def test_bad_input_as_a_script_is_one_line_without_a_traceback():
    res = run("--step-us", "nan", *GOOD[2:])
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "advise.py: error: argument --step-us: nan must be a finite number > 0"]


def test_missing_inputs_and_primitives_of_several_gpus_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        A.main(["--step-us", "26"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "--samples" in err and "--budget-gib" in err
    other = tmp_path / "other.jsonl"
    lines = []
    for line in (FIXTURES / "primitives.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["env"]["gpu_name"] = "NVIDIA A100"
        rec["run_id"] += "-a100"
        lines.append(json.dumps(rec))
    other.write_text("\n".join(lines) + "\n")
    assert A.main([str(a) for a in GOOD] + ["--primitives", str(other)]) == 2
    err = capsys.readouterr().err
    assert "several GPUs" in err and len(err.strip().splitlines()) == 1
    assert A.main([str(a) for a in GOOD[:-2]] + ["--primitives", str(tmp_path / "no.jsonl")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def fake_memstrat(tmp_path, body):
    path = tmp_path / "memstrat"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_without_primitives_memstrat_measures_them_or_the_message_says_how(
        tmp_path, capsys, monkeypatch):
    no_gpu = fake_memstrat(tmp_path, 'echo "error: primitives needs an NVIDIA GPU" >&2; exit 2')
    assert A.main([str(a) for a in GOOD[:-2]] + ["--memstrat", str(no_gpu)]) == 2
    err = capsys.readouterr().err
    assert "needs an NVIDIA GPU" in err and "--primitives FILE" in err
    assert "docs/results/nvidia-h200/records/primitives.jsonl" in err
    assert H200_PRIMITIVES.is_file()           # the file the message names exists
    # memstrat primitives --json FILE: the file it writes is what the advice uses
    (tmp_path / "p").mkdir()
    works = fake_memstrat(tmp_path / "p", f'cp "{FIXTURES / "primitives.jsonl"}" "$3"')
    assert A.main([str(a) for a in GOOD[:-2]] + ["--memstrat", str(works), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H200"
    # none given, none built, none on PATH; then the one on PATH
    monkeypatch.setattr(A, "REPO", tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(A.AdviceError, match="no memstrat found"):
        A.find_memstrat(None)
    monkeypatch.setenv("PATH", str(tmp_path / "p"))
    assert A.find_memstrat(None) == str(works)


def test_json_shape(capsys):
    assert A.main([str(a) for a in GOOD] + ["--json", "--scenario", "refresh"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"inputs", "gpu", "compute_ms", "batches", "tie_tolerance", "strategies",
                        "recommendation", "simplicity_order", "not_modelled"}
    assert doc["compute_ms"] == pytest.approx(26 * 235 / 1e3) and doc["batches"] == 235
    assert doc["inputs"]["scenario"] == "refresh" and doc["inputs"]["samples"] == 60000
    assert {s["strategy"] for s in doc["strategies"]} == set(M.MODELS)
    row = doc["strategies"][0]
    assert set(row) >= {"strategy", "predicted_ms", "data_movement_ms", "data_movement_of_c",
                        "fits", "device_bytes", "footprint", "no_model", "form"}
    fitting = [s["predicted_ms"] for s in doc["strategies"] if s["fits"] and s["predicted_ms"]]
    assert fitting == sorted(fitting)
    rec = doc["recommendation"]
    assert set(rec) == {"strategy", "predicted_ms", "tie", "why"}
    assert rec["predicted_ms"] == pytest.approx(min(fitting))   # or tied with the fastest
    assert "launch" in doc["not_modelled"]


def test_help_has_an_example_and_says_what_is_not_modelled():
    res = run("--help")
    assert res.returncode == 0 and "example:\n  analysis/advise.py --step-us" in res.stdout
    assert "outside it" in res.stdout


def test_runs_on_the_committed_h200_primitives():
    res = run("--step-us", "26.5", "--bytes-per-sample", "3136", "--samples", "60000",
              "--budget-gib", "4", "--primitives", H200_PRIMITIVES)
    assert res.returncode == 0, res.stderr
    assert "primitives of NVIDIA H200" in res.stdout and "recommended: " in res.stdout


# ---- the agreement check ----------------------------------------------------------------------

TEMPLATE = json.loads((REPO / "tests/experiments/fixtures/run_record_ok.json").read_text())


def run_record(strategy, batch, gpu_ms, process, form="per-batch"):
    rec = copy.deepcopy(TEMPLATE)
    rec["run_id"] = f"{strategy}-b{batch}-{form}-{process}"
    cfg = rec["config"]
    cfg.update(strategy=strategy, batch=batch, epoch_form=form, run_tag=rec["run_id"],
               epoch_launch=form != "per-batch")
    if strategy == "double-buffer":
        cfg.update(depth=2, streams=1)
    for e in rec["epochs"]:
        e["gpu_ms"] = gpu_ms * (1 + 0.001 * process)
    return rec


def results_set(tmp_path, times, processes, other_forms=()):
    """A results set: records/results.jsonl of `times` {batch: {strategy: gpu ms}} at one
    launch per batch, `other_forms` (batch, strategy, gpu ms, form) beside them, and the
    fixture primitives."""
    (tmp_path / "records").mkdir()
    runs = [(b, s, ms, "per-batch") for b, strategies in times.items()
            for s, ms in strategies.items()] + list(other_forms)
    with open(tmp_path / "records" / "results.jsonl", "w") as fh:
        for batch, strategy, ms, form in runs:
            for p in range(processes):
                fh.write(json.dumps(run_record(strategy, batch, ms, p, form)) + "\n")
    shutil.copy(FIXTURES / "primitives.jsonl", tmp_path / "records" / "primitives.jsonl")
    return tmp_path


# batch 256: as the model says (resident = C, pinned pays its copies). batch 1024: pinned
# measured faster than resident, which the model cannot predict: a disagreement.
TIMES = {256: {"resident": 6.0, "pinned": 12.0, "pageable": 30.0},
         1024: {"resident": 3.0, "pinned": 2.0, "pageable": 20.0}}


def test_check_agrees_where_the_measurement_agrees_and_names_the_family_where_not(tmp_path):
    checks = {c.label: c for c in AC.check(results_set(tmp_path, TIMES, 10))}
    ok = checks["NVIDIA H200 static/u8/b256 per-batch"]
    bad = checks["NVIDIA H200 static/u8/b1024 per-batch"]
    assert ok.advice.compute_ms == pytest.approx(6.0 * 1.0045, rel=1e-3)  # resident's median
    assert ok.recommended == "resident" and ok.winner == "resident" and ok.can_order
    assert ok.agrees and ok.agrees_by_median and ok.ranks["pinned"] == 2
    assert bad.recommended == "resident" and bad.winner == "pinned" and bad.ranks["resident"] == 2
    assert bad.agrees is False and bad.agrees_by_median is False
    assert AC.share(checks.values(), "agrees") == (1, 2)
    text = "\n".join(AC.text_lines(list(checks.values()), "set"))
    assert "agreement: 1/2 (50%)" in text
    assert "disagrees: NVIDIA H200 static/u8/b1024 per-batch: advice resident (predicted 3.013, " \
           "measured 3.013 ms); measured winner pinned" in text


def test_the_advice_check_block_lists_each_family_where_the_advice_is_not_the_winner(tmp_path):
    """docs_blocks' advice-check block: the agreement, and a row naming the family where the
    advice is not the winner, both strategies predicted and measured."""
    from analysis.block_generators import render
    from analysis.results_set import load_results_set
    import analysis.block_generators_advice  # noqa: F401  (registers the block)
    (tmp_path / "mixed").mkdir()
    src = results_set(tmp_path / "mixed", TIMES, 10)
    text = render("advice-check", [], load_results_set(src, "set"))
    assert "**1 of 2** families (50%)" in text
    assert ("| NVIDIA H200 static/u8/b1024 per-batch | tests: a slower rank | resident: 3.013 / "
            "3.013 | pinned: ") in text
    assert "b256" not in text.split("Where it is not:")[1]
    (tmp_path / "agree").mkdir()
    agreeing = results_set(tmp_path / "agree", {256: TIMES[256]}, 10)
    text = render("advice-check", [], load_results_set(agreeing, "set"))
    assert "**1 of 1**" in text and "the advice is the winner or tied with it" in text


def test_check_with_too_few_processes_says_the_tests_cannot_disagree(tmp_path, capsys):
    src = results_set(tmp_path, TIMES, 3)
    assert AC.main([str(src), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checked"] == 2 and doc["agreeing"] == 2 and doc["agreeing_by_median"] == 1
    assert not any(f["can_order"] for f in doc["families"])
    assert AC.main([str(src)]) == 0
    assert "2 of them have too few processes" in capsys.readouterr().out


def test_check_without_a_reference_or_primitives_says_why(tmp_path, capsys):
    src = results_set(tmp_path, {256: {"pinned": 12.0, "pageable": 30.0}}, 3)
    (c,) = AC.check(src)
    assert c.reason and "compute-only reference" in c.reason and c.agrees is None
    assert AC.main([str(tmp_path / "nothing")]) == 2
    assert "no such results set" in capsys.readouterr().err


def test_check_holds_the_advice_only_against_the_same_launch_form(tmp_path):
    # pinned at one graph per epoch beats resident per batch, a launch saving the model leaves
    # out: without resident at that form the graph family has no C and is not checked, and the
    # per-batch family does not see the graph run
    graph = [(256, "pinned", 4.0, "graph"), (256, "pageable", 25.0, "graph")]
    checks = {c.label: c for c in AC.check(results_set(tmp_path, TIMES, 10, graph))}
    per_batch = checks["NVIDIA H200 static/u8/b256 per-batch"]
    assert per_batch.agrees and per_batch.measured["pinned"].key.epoch_form == "per-batch"
    assert "compute-only reference" in checks["NVIDIA H200 static/u8/b256 graph"].reason
    # with resident at that form too, the graph family is checked against its own C
    (tmp_path / "with_ref").mkdir()
    graph.append((256, "resident", 3.5, "graph"))
    checks = {c.label: c for c in AC.check(results_set(tmp_path / "with_ref", TIMES, 10, graph))}
    g = checks["NVIDIA H200 static/u8/b256 graph"]
    assert g.reason is None and g.advice.compute_ms == pytest.approx(3.5 * 1.0045, rel=1e-3)
    assert g.recommended == "resident" and g.winner == "resident" and g.agrees
    assert set(g.measured) == {"resident", "pinned", "pageable"}


def test_check_runs_on_the_committed_h200_set(capsys):
    assert AC.main([str(H200), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    per_batch = [f for f in doc["families"] if f["family"].endswith(" per-batch")]
    assert per_batch and all(f["reason"] is None and f["recommended"] for f in per_batch)
    assert all(f["reason"] for f in doc["families"] if f not in per_batch)
    assert {f["family"].split()[-2].split("/")[0] for f in doc["families"]} == \
        {"static", "refresh"}
    assert doc["checked"] == len(per_batch)
