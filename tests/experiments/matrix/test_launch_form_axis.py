"""The launch_form axis (memstrat --launch-form): it passes the form, keeps the keys of cells
without it, shares one option with the older epoch_launch axis, and leaves out the cells that
`memstrat describe` says cannot run (a form the strategy does not run in the scenario, a kernel
form with a step other than the single-launch one), counted and listed with the reason by
--dry-run, never run."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"
FORMS = ["per-batch", "graph", "kernel-per-chunk", "kernel"]


def write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def run(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


def forms_of(describe, strategy, scenario):
    return next(s for s in describe["strategies"]
                if s["name"] == strategy)["launch_forms"][scenario]


def load(run_matrix, describe, tmp_path, axes, extra_args=()):
    return run_matrix.load_matrix(write(tmp_path, "[axes]\n" + axes), describe,
                                  extra_args=extra_args)


# ---------------------------------------------------------------------------- the axis
def test_the_axis_passes_the_form_and_auto_keeps_the_key(run_matrix, describe, tmp_path):
    m = load(run_matrix, describe, tmp_path,
             "strategy = 'resident'\nlaunch_form = ['auto', 'graph', 'kernel-per-chunk']\n")
    by_form = {c.launch_form: c for c in m.cells}
    assert set(by_form) == {None, "graph", "kernel-per-chunk"}
    auto = by_form[None]
    # auto is memstrat's default: not passed, and the key is what it was before the axis
    assert auto.key == "resident_static_u8_b256_h256_e10_cublas_seed1_r0"
    assert "--launch-form" not in auto.train_args()
    graph = by_form["graph"]
    assert graph.key == "resident_static_u8_b256_h256_e10_cublas_launch-graph_seed1_r0"
    args = graph.train_args()
    assert args[args.index("--launch-form") + 1] == "graph"
    assert by_form["kernel-per-chunk"].key.endswith("_launch-kernel-per-chunk_seed1_r0")
    assert graph.config_stub()["launch_form"] == "graph"
    assert auto.config_stub()["launch_form"] == "auto"
    # a matrix without the axis: the same cell, the same key
    plain = run_matrix.load_matrix(write(tmp_path, "[axes]\nstrategy = 'resident'\n", "p.toml"),
                                   describe)
    assert [c.key for c in plain.cells] == [auto.key] and plain.cells == [auto]


def test_the_axis_takes_the_options_spellings_and_values(run_matrix, describe, tmp_path):
    m = load(run_matrix, describe, tmp_path, "strategy = 'resident'\nlaunch-form = 'kernel'\n")
    assert [c.launch_form for c in m.cells] == ["kernel"]
    with pytest.raises(run_matrix.MatrixError, match="'per-epoch' is not one of auto, per-batch"):
        load(run_matrix, describe, tmp_path, "strategy = 'resident'\nlaunch_form = 'per-epoch'\n")


def test_exclusions_name_forms(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = "resident"
launch_form = ["auto", "per-batch", "graph"]
[[exclude]]
launch_form = ["auto", "graph"]
"""), describe)
    assert [c.launch_form for c in m.cells] == ["per-batch"] and m.excluded == 2


@pytest.mark.parametrize("axes, extra", [
    ("epoch_launch = 'off'\nlaunch_form = 'graph'", ()),
    ("epoch_launch = ['on', 'off']\nlaunch_form = ['auto', 'per-batch']", ()),
])
def test_epoch_launch_and_launch_form_axes_are_one_option(run_matrix, describe, tmp_path,
                                                          axes, extra):
    with pytest.raises(run_matrix.MatrixError, match="both set the launch form.*keep launch_form"):
        load(run_matrix, describe, tmp_path, f"strategy = 'resident'\n{axes}\n", extra)


@pytest.mark.parametrize("axes, extra", [
    ("launch_form = 'graph'", ("--epoch-launch", "off")),
    ("launch_form = 'graph'", ("--launch-form=kernel",)),
    ("epoch_launch = 'off'", ("--launch-form", "graph")),
])
def test_an_axis_and_the_other_spelling_in_extra_args_are_refused(run_matrix, describe,
                                                                  tmp_path, axes, extra):
    with pytest.raises(run_matrix.MatrixError, match="set it in one place"):
        load(run_matrix, describe, tmp_path, f"strategy = 'resident'\n{axes}\n", extra)


def test_epoch_launch_axis_keeps_its_cells_and_keys(run_matrix, describe, tmp_path):
    m = load(run_matrix, describe, tmp_path,
             "strategy = ['resident', 'pinned']\nepoch_launch = ['on', 'off']\n")
    keys = sorted(c.key for c in m.cells)
    assert keys == ["pinned_static_u8_b256_h256_e10_cublas_elaunch-off_seed1_r0",
                    "pinned_static_u8_b256_h256_e10_cublas_seed1_r0",
                    "resident_static_u8_b256_h256_e10_cublas_elaunch-off_seed1_r0",
                    "resident_static_u8_b256_h256_e10_cublas_seed1_r0"]
    off = next(c for c in m.cells if c.epoch_launch == "off")
    assert off.asked_form == "per-batch" and "--launch-form" not in off.train_args()
    assert not m.not_runnable


# ---------------------------------------------------------------------------- not runnable
def test_forms_a_strategy_does_not_run_are_left_out(run_matrix, describe, all_strategies,
                                                   tmp_path):
    m = load(run_matrix, describe, tmp_path,
             "strategy = 'all'\nscenario = ['static', 'refresh']\n"
             f"launch_form = {json.dumps(['auto', *FORMS])}\n")
    ran = {(c.strategy, c.scenario, c.launch_form) for c in m.cells}
    expected = set()
    for s in all_strategies:
        for scenario in ("static", "refresh"):
            expected.add((s["name"], scenario, None))                      # auto, always
            expected |= {(s["name"], scenario, f) for f in forms_of(describe, s["name"], scenario)
                         if not (s["batch_in_host_memory"] and f.startswith("kernel"))}
    assert ran == expected
    assert len(m.cells) + len(m.not_runnable) == len(all_strategies) * 2 * 5
    assert m.excluded == 0
    why = dict((c.key, reason) for c, reason in m.not_runnable)
    assert why["pageable_static_u8_b256_h256_e10_cublas_launch-graph_seed1_r0"] == \
        "pageable runs only per-batch in the static scenario"
    assert why["pinned_refresh_u8_b256_h256_e10_cublas_launch-kernel_seed1_r0"] == \
        "pinned runs only per-batch, graph in the refresh scenario"
    # zero-copy's batches are in host memory: --fused on takes the layer-by-layer step
    assert why["zero-copy_static_u8_b256_h256_e10_cublas_launch-kernel_seed1_r0"].startswith(
        "kernel-per-chunk and kernel need the single-launch step: zero-copy reads its batches "
        "in place from host memory")


def test_a_strategy_without_forms_in_a_scenario_is_left_out_even_at_auto(run_matrix, describe,
                                                                        tmp_path):
    assert forms_of(describe, "zero-copy-staged", "stream") == []
    m = load(run_matrix, describe, tmp_path,
             "strategy = ['zero-copy-staged', 'pinned']\nscenario = ['static', 'stream']\n")
    assert {(c.strategy, c.scenario) for c in m.cells} == {
        ("zero-copy-staged", "static"), ("pinned", "static"), ("pinned", "stream")}
    ((cell, why),) = m.not_runnable
    assert (cell.strategy, cell.scenario) == ("zero-copy-staged", "stream")
    assert why == "zero-copy-staged runs no launch form in the stream scenario"


@pytest.mark.parametrize("axes, extra, kept", [
    # the step --fused picks: single-launch up to batch x hidden = 262144 with --fused on
    ("batch = [256, 1024, 2048]", (), {256, 1024}),
    ("batch = [256, 1024, 2048]\nfused = 'single'", (), {256, 1024, 2048}),
    ("batch = [256, 2048]\nfused = ['lt', 'off']", (), set()),
    ("batch = 256\nhidden = ['512,256']", (), set()),
    ("batch = 256\ngemm = 'tiled'", (), set()),
    ("batch = 256", ("--tf32",), set()),
    ("batch = 256", ("--fused", "off"), set()),
    ("batch = 256", ("--fused=single", "--tf32"), set()),
    # the step only memstrat can judge: the single-launch step's shapes (hidden 250 is not a
    # multiple of 4) are memstrat's to refuse when it runs
    ("batch = 256\nhidden = 250\nfused = 'single'", (), {256}),
])
def test_kernel_forms_need_the_single_launch_step(run_matrix, describe, tmp_path, axes, extra,
                                                  kept):
    needing = {f["name"] for f in describe["launch_forms"] if f["needs_step"] == "single-launch"}
    assert needing == {"kernel-per-chunk", "kernel"}
    m = load(run_matrix, describe, tmp_path,
             f"strategy = 'um'\nlaunch_form = ['kernel', 'kernel-per-chunk', 'graph']\n{axes}\n",
             extra)
    assert {c.batch for c in m.cells if c.launch_form != "graph"} == kept
    assert {c.launch_form for c in m.cells if c.batch == 256} >= {"graph"}
    for cell, why in m.not_runnable:
        assert cell.launch_form in needing
        assert why.startswith("kernel-per-chunk and kernel need the single-launch step: ")


def test_zero_copy_takes_the_kernel_forms_with_fused_single(run_matrix, describe, tmp_path):
    m = load(run_matrix, describe, tmp_path,
             "strategy = 'zero-copy'\nlaunch_form = ['kernel', 'per-batch']\n"
             "fused = ['on', 'single']\n")
    assert {(c.launch_form, c.fused) for c in m.cells} == {
        ("kernel", "single"), ("per-batch", None), ("per-batch", "single")}
    ((cell, _),) = m.not_runnable
    assert (cell.launch_form, cell.fused) == ("kernel", None)


def test_a_form_in_extra_args_is_judged_too(run_matrix, describe, tmp_path):
    m = load(run_matrix, describe, tmp_path, "strategy = ['resident', 'pinned', 'um']\n",
             ("--launch-form", "kernel"))
    assert {c.strategy for c in m.cells} == {"resident", "um"}
    m = load(run_matrix, describe, tmp_path, "strategy = ['resident', 'zero-copy-staged']\n"
             "scenario = 'refresh'\n", ("--epoch-launch=off",))
    assert {c.strategy for c in m.cells} == {"resident", "zero-copy-staged"}   # per-batch: both


def test_a_memstrat_without_launch_forms_refuses_nothing(run_matrix, describe, tmp_path):
    older = json.loads(json.dumps(describe))
    del older["launch_forms"]
    for s in older["strategies"]:
        del s["launch_forms"]
    older["train_options"] = [o for o in older["train_options"] if o["name"] != "--launch-form"]
    m = load(run_matrix, older, tmp_path, "strategy = 'all'\nscenario = 'stream'\n")
    in_all = [s for s in older["strategies"] if not s.get("one_gpu_as")]
    assert len(m.cells) == len(in_all) and not m.not_runnable
    with pytest.raises(run_matrix.MatrixError, match="declares no --launch-form"):
        load(run_matrix, older, tmp_path, "strategy = 'pinned'\nlaunch_form = 'graph'\n")


def test_the_step_rule_is_memstrats(matrix_module):
    """The work limit of --fused on is the binary's constant, and describe's --fused help
    states it."""
    mf = matrix_module("matrix_file")
    header = (REPO / "experiments/core/mlp_config.h").read_text()
    (limit,) = re.findall(r"kSingleLaunchMaxWork\s*=\s*(\d+)", header)
    assert mf.SINGLE_LAUNCH_MAX_WORK == int(limit)
    fused = next(o for o in json.loads((REPO / "tests/experiments/fixtures/describe.json")
                                       .read_text())["train_options"] if o["name"] == "--fused")
    assert f"batch x hidden <= {limit}" in fused["help"]


# ---------------------------------------------------------------------------- running
ALL_FORMS = f"""
name = "forms"
[axes]
strategy = ["resident", "pageable", "pinned", "zero-copy", "um-prefetch", "double-buffer-graph"]
launch_form = {json.dumps(['auto', *FORMS])}
fused = ["on", "single"]
epochs = 2
[[exclude]]
fused = "single"
strategy = ["resident", "pageable", "pinned", "um-prefetch", "double-buffer-graph"]
"""


def test_dry_run_counts_and_explains_what_is_not_run(tmp_path, fake_memstrat):
    res = run([write(tmp_path, ALL_FORMS), "--out", tmp_path / "out", "--memstrat",
               fake_memstrat, "--dry-run"])
    assert res.returncode == 0, res.stderr
    summary, *lines = res.stdout.splitlines()
    # resident 5, pageable 2, pinned 3, zero-copy 3 (on) + 5 (single), um-prefetch 4,
    # double-buffer-graph 4 cells run; the other 6 x 5 + 5 - 26 = 9 are not runnable
    assert summary.startswith("matrix forms: 26 cells")
    assert "5 excluded" in summary and "9 not runnable" in summary
    assert lines[0] == "not runnable, never run: 9 cells (by `memstrat describe`)"
    reasons = {l.split(": ", 1)[1]: l for l in lines[1:] if re.match(r"\s+\d+ cells \(", l)}
    assert sum(int(l.split()[0]) for l in reasons.values()) == 9
    assert re.match(r"\s+3 cells \(3 configurations\)",
                    reasons["pageable runs only per-batch in the static scenario"])
    assert "pinned runs only per-batch, graph in the static scenario" in reasons
    assert "um-prefetch runs only per-batch, kernel-per-chunk, kernel in the static scenario" \
        in reasons
    assert "double-buffer-graph runs only per-batch, graph, kernel-per-chunk in the static " \
           "scenario" in reasons
    assert any(r.startswith("kernel-per-chunk and kernel need the single-launch step: "
                            "zero-copy") for r in reasons)
    listed = [l for l in lines if l.startswith("[")]
    assert len(listed) == 26 and not any("pageable" in l and "launch-graph" in l
                                         for l in listed)


def test_no_cell_it_runs_is_refused_and_every_form_runs(tmp_path, fake_memstrat):
    out, calls = tmp_path / "out", tmp_path / "calls.txt"
    res = run([write(tmp_path, ALL_FORMS), "--out", out, "--memstrat", fake_memstrat],
              {"FAKE_MEMSTRAT_CALLS": str(calls)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "9 not runnable" in res.stdout
    records = [json.loads(l) for l in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 26 and {r["status"] for r in records} == {"ok"}
    ran = {(r["config"]["strategy"], r["config"]["launch_form"], r["config"]["epoch_form"])
           for r in records}
    for strategy in ("resident", "pinned", "um-prefetch", "double-buffer-graph"):
        for form in forms_of(json.loads((REPO / "tests/experiments/fixtures/describe.json")
                                        .read_text()), strategy, "static"):
            assert (strategy, form, form) in ran
    assert ("resident", "auto", "kernel") in ran and ("pageable", "auto", "per-batch") in ran
    assert ("zero-copy", "kernel", "kernel") in ran
