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
from analysis import scaling_model as SM
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


# ---- several GPUs (--gpus G >= 2: analysis/scaling_model.py's terms) ---------------------------

MULTI_RATE = 1e4      # h2d-all's slower GPU: 10 GB/s = 1e4 B/µs
BUCKET = 1 << 20      # floats of one full ring bucket (4 MiB)
PARAMS = BUCKET + 24  # one full bucket and one of 24 floats (96 B: below the curves' first size)
X_US = 500.0


def multi_record(pattern, points, gpus=2, gpu_name="NVIDIA H200"):
    """A `memstrat primitives --gpus N` record as scaling_model.curves reads it (points: (bytes,
    median_us) or (bytes, median_us, per_gpu_gbps))."""
    return {"record": "multi-gpu-primitive", "status": "ok", "implementation": "memstrat",
            "started_at": "2026-11-27T00:00:00Z", "env": {"gpu_name": gpu_name},
            "config": {"pattern": pattern, "gpus": gpus},
            "results": [dict(bytes=b, median_us=u, per_gpu_gbps=per[0] if per else None)
                        for b, u, *per in points]}


# Two points each, all power laws of slope 1 (log-log interpolation is exact): h2d-all at the
# slower GPU's 10 GB/s; all-reduce at 1e4 B/µs, all-gather at 2e4 B/µs, each from 1000 B up,
# below which its first time is the floor.
H2D_ALL = multi_record("h2d-all", [(100_000, 0.0, [20.0, 10.0]), (1_000_000, 0.0, [20.0, 10.0])])
ALL_REDUCE = multi_record("nccl-all-reduce", [(1000, 0.1), (100_000_000, 10_000.0)])
ALL_GATHER = multi_record("nccl-all-gather", [(1000, 0.05), (100_000_000, 5_000.0)])
# ring: the 4 MiB bucket on the curve, the 96 B one at the floor; exact: 2 x PARAMS floats
RING_US = 4 * BUCKET / 1e4 + 0.1                  # 419.5304 µs
EXACT_US = 4 * 2 * PARAMS / 2e4                   # 419.44 µs
PINNED_US = 251_000 / MULTI_RATE                  # one batch of 250 x 1004 B: 25.1 µs
STEPS = 2                                         # ⌈1000 / (2 x 250)⌉


def write_records(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def curves_x2(*records):
    return SM.curves(records or (H2D_ALL, ALL_REDUCE, ALL_GATHER), 2)


def test_parameters_become_ring_buckets_of_at_most_4_mib_as_one_layer():
    assert A.parameter_buckets(PARAMS) == [BUCKET, 24]
    assert A.parameter_buckets(3 * BUCKET) == [BUCKET] * 3
    assert A.parameter_buckets(1000) == [1000]
    assert sum(A.parameter_buckets(203_530)) == 203_530
    with pytest.raises(ValueError):
        A.parameter_layers(1)
    # the trainer's steps: ShardPlan::global_batches
    assert A.global_steps(1000, 250, 2) == 2 and A.global_steps(1001, 250, 2) == 3
    assert A.global_steps(1000, 250, 1) == SHAPE.batches


def test_two_gpu_predictions_by_hand():
    a = A.advise_gpus(SHAPE, "static", X_US, 2, PARAMS, "ring", curves_x2())
    o = {x.strategy: x for x in a.options}
    assert a.steps == STEPS and a.compute_ms == pytest.approx(STEPS * X_US / 1e3)
    res, pin = o["resident"].terms, o["pinned"].terms
    assert res["transfer_us"] == 0 and res["combine_us"] == pytest.approx(RING_US)
    assert res["step_n_us"] == pytest.approx(X_US + RING_US)
    assert o["resident"].epoch_ms == pytest.approx(STEPS * (X_US + RING_US) / 1e3)  # 1.8391
    assert res["efficiency"] == pytest.approx(X_US / (X_US + RING_US))
    assert pin["transfer_us"] == pytest.approx(PINNED_US)
    assert o["pinned"].epoch_ms == pytest.approx(STEPS * (X_US + PINNED_US + RING_US) / 1e3)
    # the footprints per GPU: resident the whole set on every GPU, pinned one batch
    assert o["resident"].device_bytes == DATA_SET and o["pinned"].device_bytes == 251_000
    # every other strategy: no number
    others = [x for x in a.options if x.strategy not in ("resident", "pinned")]
    assert len(others) == len(M.MODELS) - 2
    assert all(x.terms is None and x.epoch_ms is None and not x.usable for x in others)
    # --reduce exact: one all-gather of 2 x PARAMS floats
    ex = {x.strategy: x for x in A.advise_gpus(SHAPE, "static", X_US, 2, PARAMS, "exact",
                                               curves_x2()).options}
    assert ex["resident"].terms["combine_us"] == pytest.approx(EXACT_US)
    assert ex["pinned"].epoch_ms == pytest.approx(STEPS * (X_US + PINNED_US + EXACT_US) / 1e3)


def test_two_gpu_recommendation_follows_the_one_gpu_rule():
    c = curves_x2()
    # pinned is 2.7% slower: a tie, resident the simplest
    a = A.advise_gpus(SHAPE, "static", X_US, 2, PARAMS, "ring", c)
    assert a.recommended.strategy == "resident" and a.is_tie
    assert [o.strategy for o in a.tied] == ["resident", "pinned"]
    # a 10 µs step and 1000 parameters (one bucket at 0.4 µs): pinned 3.5x slower, no tie
    b = A.advise_gpus(SHAPE, "static", 10.0, 2, 1000, "ring", c)
    assert b.recommended.strategy == "resident" and not b.is_tie
    # the whole set does not fit one GPU's budget: pinned
    small = A.advise_gpus(SHAPE, "static", X_US, 2, PARAMS, "ring", c, budget_bytes=DATA_SET - 1)
    o = {x.strategy: x for x in small.options}
    assert not o["resident"].fits and o["resident"].terms is not None
    assert small.recommended.strategy == "pinned" and not small.is_tie
    text = "\n".join(A.gpus_text_lines(small, "GPU x2"))
    assert "resident             does not fit: needs 1.0 MiB (the data set (resident.cpp), on " \
           "every GPU)" in text
    assert "recommended: pinned (1.889 ms per epoch)" in text
    # refresh: scaling_model has no transfer for resident re-uploading its set
    r = A.advise_gpus(SHAPE, "refresh", X_US, 2, PARAMS, "ring", c)
    assert {x.strategy: x for x in r.options}["resident"].terms is None
    assert r.recommended.strategy == "pinned"
    # nothing with a prediction fits
    none = A.advise_gpus(SHAPE, "static", X_US, 2, PARAMS, "ring", c, budget_bytes=1)
    assert none.recommended is None and none.tied == ()


GOOD_X2 = ["--step-us", X_US, "--bytes-per-sample", 1000, "--samples", 1000, "--batch", 250,
           "--budget-gib", 1, "--gpus", 2, "--parameters", PARAMS]


def test_two_gpu_command_prints_the_terms_and_no_model_for_the_others(tmp_path, capsys):
    f = write_records(tmp_path / "x2.jsonl", H2D_ALL, ALL_REDUCE, ALL_GATHER)
    assert A.main([str(a) for a in GOOD_X2] + ["--primitives", str(f)]) == 0
    out = capsys.readouterr().out
    assert "over 2 GPUs, batch 250 per GPU (2 steps)" in out
    assert "primitives of NVIDIA H200 x2" in out
    assert "resident                    1.839       919.5           0       419.5  0.544" in out
    assert "pinned                      1.889       944.6        25.1       419.5  0.529" in out
    assert "double-buffer        no several-GPU model: " in out
    assert "recommended: resident (1.839 ms per epoch)" in out
    assert "tie: resident and pinned are predicted within 5%" in out


def test_two_gpu_json_has_the_several_gpu_fields(tmp_path, capsys):
    f = write_records(tmp_path / "x2.jsonl", H2D_ALL, ALL_REDUCE, ALL_GATHER)
    args = [str(a) for a in GOOD_X2] + ["--primitives", str(f), "--json", "--reduce", "exact"]
    assert A.main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["gpus"], doc["parameters"], doc["reduce"]) == (2, PARAMS, "exact")
    assert doc["inputs"]["gpus"] == 2 and doc["buckets"] == [BUCKET, 24]
    assert doc["batches"] == STEPS and doc["compute_ms"] == pytest.approx(1.0)
    rows = {s["strategy"]: s for s in doc["strategies"]}
    assert set(rows) == set(M.MODELS)
    res = rows["resident"]
    assert res["combine_us"] == pytest.approx(EXACT_US) and res["transfer_us"] == 0
    assert res["step_n_us"] == pytest.approx(X_US + EXACT_US)
    assert res["efficiency"] == pytest.approx(X_US / (X_US + EXACT_US))
    assert res["predicted_ms"] == pytest.approx(STEPS * (X_US + EXACT_US) / 1e3)
    assert rows["pinned"]["transfer_us"] == pytest.approx(PINNED_US)
    assert rows["um"]["predicted_ms"] is None and rows["um"]["step_n_us"] is None
    assert "scaling_model" in rows["um"]["no_model"]
    assert doc["recommendation"]["strategy"] == "resident"
    assert doc["recommendation"]["tie"] == ["resident", "pinned"]


def test_gpus_without_parameters_exits_2(capsys):
    args = [str(a) for a in GOOD_X2[:-2]] + ["--primitives", "unused.jsonl"]
    with pytest.raises(SystemExit) as exc:
        A.main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "--gpus 2 needs --parameters P" in err
    with pytest.raises(SystemExit) as exc:
        A.main(args + ["--parameters", "1"])
    assert exc.value.code == 2 and "--parameters: 1 must be >= 2" in capsys.readouterr().err


@pytest.mark.parametrize("records, missing", [
    ((ALL_REDUCE, ALL_GATHER), "h2d-all"),
    ((H2D_ALL, ALL_GATHER), "nccl-all-reduce"),
    ((H2D_ALL, ALL_REDUCE, multi_record("nccl-all-reduce", [(1000, 0.1)], gpus=4)),
     None)])
def test_primitives_without_what_the_model_needs_exit_2_with_its_message(
        tmp_path, capsys, records, missing):
    f = write_records(tmp_path / "x2.jsonl", *records)
    rc = A.main([str(a) for a in GOOD_X2] + ["--primitives", str(f)])
    err = capsys.readouterr().err
    if missing is None:        # all there: a record at another GPU count changes nothing
        assert rc == 0 and not err
        return
    assert rc == 2 and len(err.strip().splitlines()) == 1
    with pytest.raises(KeyError) as want:
        SM.need({}, missing)
    assert err.strip() == f"advise.py: error: {want.value.args[0]}"
    assert f"no ok memstrat '{missing}' record" in err


def test_gpus_primitives_of_several_gpu_models_or_one_gpu_records_exit_2(tmp_path, capsys):
    other = multi_record("nccl-all-reduce", [(1000, 0.1)], gpu_name="NVIDIA A100")
    f = write_records(tmp_path / "x2.jsonl", H2D_ALL, ALL_REDUCE, other)
    assert A.main([str(a) for a in GOOD_X2] + ["--primitives", str(f)]) == 2
    assert "several GPUs (NVIDIA A100, NVIDIA H200)" in capsys.readouterr().err
    # the one-GPU primitives hold no --gpus 2 record
    assert A.main([str(a) for a in GOOD_X2] + ["--primitives", str(FIXTURES /
                                                                   "primitives.jsonl")]) == 2
    assert "no ok memstrat" in capsys.readouterr().err


def test_without_primitives_memstrat_measures_them_on_g_gpus(tmp_path, capsys, monkeypatch):
    f = write_records(tmp_path / "x2.jsonl", H2D_ALL, ALL_REDUCE, ALL_GATHER)
    seen = tmp_path / "argv"
    works = fake_memstrat(tmp_path, f'echo "$@ NVLS=$NCCL_NVLS_ENABLE" > "{seen}"; '
                                    f'cp "{f}" "$3"')
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    assert A.main([str(a) for a in GOOD_X2] + ["--memstrat", str(works), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H200 x2"
    argv = seen.read_text().split()
    assert argv[:2] == ["primitives", "--json"] and argv[3:] == [
        "--gpus", "2", "-p", "h2d-all,nccl-all-reduce", "NVLS=0"]
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")           # the user's setting is kept
    assert A.main([str(a) for a in GOOD_X2] + ["--memstrat", str(works), "--reduce",
                                                "exact"]) == 0
    assert seen.read_text().split()[-3:] == ["-p", "h2d-all,nccl-all-gather", "NVLS=1"]
    capsys.readouterr()
    (tmp_path / "fail").mkdir()
    fails = fake_memstrat(tmp_path / "fail",
                          'echo "error: --gpus 2: this machine has 1 GPU" >&2; exit 3')
    assert A.main([str(a) for a in GOOD_X2] + ["--memstrat", str(fails)]) == 2
    err = capsys.readouterr().err
    assert "this machine has 1 GPU" in err and "--primitives FILE" in err


@pytest.mark.parametrize("extra", [[], ["--json"], ["--scenario", "refresh", "--batch", "100"],
                                   ["--parameters", "5", "--reduce", "exact"]])
def test_one_gpu_output_is_the_same_with_and_without_gpus_1(extra):
    base = run(*GOOD, *extra)
    one = run(*GOOD, *extra, "--gpus", "1")
    assert base.returncode == one.returncode == 0, base.stderr + one.stderr
    assert base.stdout == one.stdout and base.stderr == one.stderr
    assert "several" not in base.stdout and "step(" not in base.stdout
    if "--json" in extra:
        assert "gpus" not in json.loads(base.stdout)["inputs"]
    else:
        assert "predicted ms" in base.stdout
