"""experiments/matrix/run_matrix.py: expansion, restart-skip, crash safety, parallel, Slurm."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"

SMALL = """
name = "small"
[axes]
strategy = ["pinned", "double-buffer", "um"]
scenario = "static"
batch = [256, 1024]
epochs = 2
"""


def write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def records(out):
    path = Path(out) / "records.jsonl"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def run(args, env_extra=None, **kw):
    env = dict(os.environ)
    env.pop("FAKE_MEMSTRAT_SLEEP", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120, **kw)


def profiled(cell, describe):
    """Whether memstrat runs the cell with the profiler: a cell holds None for the option's
    default (the runner then passes no flag), which describe states."""
    (opt,) = [o for o in describe["train_options"] if o["name"] == "--profile"]
    return opt["default"] if cell.profile is None else cell.profile


def calls(path):
    if not path.exists():
        return []
    return [l.split() for l in path.read_text().splitlines() if l.startswith("start ")]


# ---------------------------------------------------------------------------- expansion
def test_cross_product_collapse_and_exclusions(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = ["pinned", "double-buffer"]
scenario = ["static", "refresh"]
batch = [64, 256]
depth = [2, 3]
copy_streams = [1, 2]
epochs = 3
repeats = 2

[[exclude]]
strategy = "double-buffer"
depth = 3
copy_streams = 2
"""), describe)
    # per repeat: pinned 2 scenarios x 2 batches = 4 (its 4 depth/stream combos
    # collapse into one, 12 duplicates dropped); double-buffer 4 x 4 = 16, minus the 4
    # with depth 3 + 2 streams
    assert len(m.cells) == 2 * (4 + 12)
    assert m.collapsed == 2 * 12
    assert m.excluded == 2 * 4
    keys = [c.key for c in m.cells]
    assert len(set(keys)) == len(keys)
    assert "pinned_static_u8_b64_h256_e3_cublas_seed1_r0" in keys
    assert "double-buffer_refresh_u8_b256_h256_e3_cublas_d3c1_seed1_r1" in keys
    assert not any("d3c2" in k for k in keys)
    # repeats run outermost
    assert all(c.repeat == 0 for c in m.cells[:16])
    pinned = next(c for c in m.cells if c.strategy == "pinned")
    assert "--depth" not in pinned.train_args()
    db = next(c for c in m.cells if c.strategy == "double-buffer")
    assert db.train_args()[-4:] == ["--depth", "2", "--copy-streams", "1"]


def test_list_valued_exclusion_and_hidden_forms(run_matrix, describe, all_strategies, tmp_path):
    strategies = [s["name"] for s in all_strategies]
    managed = [s for s in strategies if s.startswith("um")]  # the unified-memory family
    assert len(managed) >= 2                                 # a list worth excluding
    m = run_matrix.load_matrix(write(tmp_path, f"""
[axes]
strategy = "all"
hidden = [256, "512,256"]
transfer = ["u8", "f32"]
[[exclude]]
strategy = {json.dumps(managed)}
transfer = "f32"
[[exclude]]
hidden = [[512, 256]]
strategy = "zero-copy"
"""), describe)
    hs = {c.hidden for c in m.cells}
    assert hs == {(256,), (512, 256)}
    assert not any(c.strategy.startswith("um") and c.transfer == "f32" for c in m.cells)
    assert not any(c.strategy == "zero-copy" and c.hidden == (512, 256) for c in m.cells)
    assert len(m.cells) == len(strategies) * 2 * 2 - len(managed) * 2 - 2
    assert any(c.key.endswith("h512x256_e10_cublas_d2c1_seed1_r0") for c in m.cells)


def test_shipped_matrices(run_matrix, describe, all_strategies):
    quick = run_matrix.load_matrix(REPO / "experiments/matrix/matrices/quick.toml", describe)
    # every strategy "all" names x 2 scenarios x 2 transfers x 2 batches
    assert len(quick.cells) == len(all_strategies) * 2 * 2 * 2
    assert {c.strategy for c in quick.cells} == {s["name"] for s in all_strategies}
    assert {c.epochs for c in quick.cells} == {5}
    full = run_matrix.load_matrix(REPO / "experiments/matrix/matrices/full.toml", describe)
    # per repeat: 7 strategies x 12 (batch x transfer x scenario) + double-buffer x 6
    # (depth x streams) x 12 + resident with --epoch-launch off x 12; three unprofiled
    # repeats plus one profiled
    configs = 7 * 12 + 6 * 12 + 12
    assert len(full.cells) == 4 * configs
    assert {c.epochs for c in full.cells} == {6}
    assert {(c.depth, c.copy_streams) for c in full.cells if c.strategy == "double-buffer"} \
        == {(d, s) for d in (2, 3, 4) for s in (1, 2)}
    assert {c.strategy for c in full.cells if c.epoch_launch == "off"} == {"resident"}
    assert sum(not profiled(c, describe) for c in full.cells) == 3 * configs
    assert {c.repeat for c in full.cells if profiled(c, describe)} == {0}


@pytest.mark.parametrize("text, message", [
    ("[axes]\nstrategy = ['pinned']\nbatchsize = 3", "unknown axis"),
    ("[axes]\nstrategy = ['warp-drive']", "unknown strategy 'warp-drive'"),
    ("[axes]\nstrategy = 'pinned'\ntransfer = 'f16'", "'f16' is not one of u8, f32"),
    ("[axes]\nstrategy = 'pinned'\nbatch = 0", "positive integer"),
    ("[axes]\nstrategy = 'double-buffer'\ndepth = 1", "depth must be >= 2"),
    ("[axes]\nbatch = 3", "axes.strategy is required"),
    ("[axes]\nstrategy = 'pinned'\n[[exclude]]\ncolour = 'red'", "unknown axis 'colour'"),
    ("[axes\n", "not valid TOML"),
    ("title = 'x'\n[axes]\nstrategy = 'pinned'", "unknown top-level key 'title'"),
])
def test_matrix_errors(run_matrix, describe, tmp_path, text, message):
    with pytest.raises(run_matrix.MatrixError, match=message):
        run_matrix.load_matrix(write(tmp_path, text), describe)


# ---------------------------------------------------------------------------- dry run
def test_dry_run_lists_cells_and_writes_nothing(tmp_path, fake_memstrat):
    out = tmp_path / "out"
    res = run([write(tmp_path, SMALL), "--out", out, "--memstrat", fake_memstrat,
               "--dry-run"])
    assert res.returncode == 0, res.stderr
    assert "6 cells (0 recorded, 6 to run)" in res.stdout
    assert res.stdout.count(" todo ") == 6
    assert "--run-tag pinned_static_u8_b256_h256_e2_cublas_seed1_r0" in res.stdout
    assert not out.exists()


# ---------------------------------------------------------------------------- running
def test_run_then_restart_skips_and_retries_failed(tmp_path, fake_memstrat):
    out, log = tmp_path / "out", tmp_path / "calls.txt"
    matrix = write(tmp_path, SMALL)
    base = [matrix, "--out", out, "--memstrat", fake_memstrat]
    env = {"FAKE_MEMSTRAT_CALLS": str(log), "FAKE_MEMSTRAT_FAIL": "um_static_u8_b1024",
           "FAKE_MEMSTRAT_CRASH": "pinned_static_u8_b1024"}
    res = run(base, env)
    assert res.returncode == 1                      # two cells failed
    assert "[6/6]" in res.stdout and "ETA" in res.stdout and "elapsed" in res.stdout
    recs = records(out)
    assert len(recs) == 6
    by_status = {r["config"]["run_tag"]: r["status"] for r in recs}
    assert by_status["um_static_u8_b1024_h256_e2_cublas_seed1_r0"] == "failed"
    crashed = next(r for r in recs if r["config"]["run_tag"].startswith("pinned_static_u8_b1024"))
    assert crashed["status"] == "failed" and "wrote no record" in crashed["error"]
    assert (out / "logs" / "pinned_static_u8_b1024_h256_e2_cublas_seed1_r0.log").exists()
    assert list((out / "tmp").iterdir()) == []      # per-cell temp files cleaned up
    assert len(calls(log)) == 6

    # Restart with the failures gone: only the two failed cells run again.
    log.unlink()
    res = run(base, {"FAKE_MEMSTRAT_CALLS": str(log)})
    assert res.returncode == 0, res.stderr
    assert "6 cells (4 recorded, 2 to run, 2 of them failed before)" in res.stdout
    assert sorted(c[1] for c in calls(log)) == [
        "pinned_static_u8_b1024_h256_e2_cublas_seed1_r0",
        "um_static_u8_b1024_h256_e2_cublas_seed1_r0"]
    recs = records(out)
    assert len(recs) == 8                           # failed records are kept
    ok = [r["config"]["run_tag"] for r in recs if r["status"] == "ok"]
    assert len(ok) == len(set(ok)) == 6

    # Third run: nothing left.
    log.unlink()
    res = run(base, {"FAKE_MEMSTRAT_CALLS": str(log)})
    assert res.returncode == 0 and "nothing to run" in res.stdout
    assert calls(log) == []

    # The records are valid input for the analysis.
    from analysis.records import load_records
    assert len(load_records(out)) == 8


def test_kill_mid_run_loses_nothing_and_duplicates_nothing(tmp_path, fake_memstrat):
    out, log = tmp_path / "out", tmp_path / "calls.txt"
    matrix = write(tmp_path, SMALL)
    base = [sys.executable, str(RUNNER), str(matrix), "--out", str(out),
            "--memstrat", str(fake_memstrat)]
    env = dict(os.environ, FAKE_MEMSTRAT_SLEEP="0.4", FAKE_MEMSTRAT_CALLS=str(log))
    proc = subprocess.Popen(base, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(records(out)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.15)                               # land inside the next cell's run
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = records(out)
    assert 2 <= len(done_before) < 6

    env.pop("FAKE_MEMSTRAT_SLEEP")
    res = subprocess.run(base, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = (out / "records.jsonl").read_text().splitlines()
    recs = [json.loads(l) for l in lines]          # every line is complete JSON
    tags = [r["config"]["run_tag"] for r in recs]
    assert len(tags) == len(set(tags)) == 6        # all cells, none twice
    assert recs[:len(done_before)] == done_before  # nothing recorded was lost
    # the cell killed mid-run did run again
    assert len(calls(log)) >= 6


def test_gpus_run_one_worker_per_gpu(tmp_path, fake_memstrat):
    out, log = tmp_path / "out", tmp_path / "calls.txt"
    res = run([write(tmp_path, SMALL), "--out", out, "--memstrat", fake_memstrat,
               "--gpus", "0,1"], {"FAKE_MEMSTRAT_CALLS": str(log),
                                  "FAKE_MEMSTRAT_SLEEP": "0.2"})
    assert res.returncode == 0, res.stderr
    seen = calls(log)
    assert len(seen) == 6
    assert {c[3] for c in seen} == {"0", "1"}      # CUDA_VISIBLE_DEVICES per worker
    tags = [r["config"]["run_tag"] for r in records(out)]
    assert len(tags) == len(set(tags)) == 6


def test_timeout_records_a_failure(tmp_path, fake_memstrat):
    out = tmp_path / "out"
    matrix = write(tmp_path, "[axes]\nstrategy = 'pinned'\nepochs = 2\n")
    res = run([matrix, "--out", out, "--memstrat", fake_memstrat, "--timeout", "0.5"],
              {"FAKE_MEMSTRAT_SLEEP": "30"})
    assert res.returncode == 1
    (rec,) = records(out)
    assert rec["status"] == "failed" and "timed out after 0.5 s" in rec["error"]


@pytest.mark.parametrize("extra", [[], ["--dry-run"]])
def test_missing_binary_is_a_clear_error(tmp_path, extra):
    res = run([write(tmp_path, SMALL), "--out", tmp_path / "o", "--memstrat",
               tmp_path / "nope", *extra])
    assert res.returncode == 2
    assert "not found" in res.stderr and "--memstrat" in res.stderr


def test_a_binary_without_describe_is_a_clear_error(tmp_path):
    old = tmp_path / "memstrat"
    old.write_text("#!/bin/sh\necho 'unknown subcommand' >&2\nexit 2\n")
    old.chmod(0o755)
    res = run([write(tmp_path, SMALL), "--out", tmp_path / "o", "--memstrat", old, "--dry-run"])
    assert res.returncode == 2
    assert "describe --json" in res.stderr and "unknown subcommand" in res.stderr


def test_axes_take_their_defaults_and_ranges_from_describe(run_matrix, describe, tmp_path):
    d = json.loads(json.dumps(describe))
    (batch,) = [o for o in d["train_options"] if o["name"] == "--batch"]
    batch["default"], batch["max"] = 512, 1024
    m = run_matrix.load_matrix(write(tmp_path, "[axes]\nstrategy = 'pinned'\n"), d)
    assert {c.batch for c in m.cells} == {512}
    with pytest.raises(run_matrix.MatrixError, match=r"batch must be <= 1024 \(--batch\)"):
        run_matrix.load_matrix(write(tmp_path, "[axes]\nstrategy = 'pinned'\nbatch = 2048\n"), d)


def test_records_follow_the_schema(tmp_path, fake_memstrat, record_errors):
    # the fake's records (the writer's examples) and the runner's own for a crashed cell
    out = tmp_path / "out"
    res = run([write(tmp_path, SMALL), "--out", out, "--memstrat", fake_memstrat],
              {"FAKE_MEMSTRAT_CRASH": "pinned_static_u8_b1024", "FAKE_MEMSTRAT_FAIL": "um_"})
    assert res.returncode == 1
    recs = records(out)
    synthesized = [r for r in recs if "-runner-" in r["run_id"]]
    assert len(synthesized) == 1 and synthesized[0]["env"] is None
    assert {r["status"] for r in recs} == {"ok", "failed"}
    for r in recs:
        assert record_errors(r) == [], r["run_id"]


def test_extra_args_change_identity(run_matrix, describe, tmp_path):
    m1 = run_matrix.load_matrix(write(tmp_path, SMALL), describe)
    m2 = run_matrix.load_matrix(write(tmp_path, SMALL), describe, extra_args=("--no-profile",))
    assert m2.cells[0].train_args()[-1] == "--no-profile"
    assert m1.cells[0].key != m2.cells[0].key
    m3 = run_matrix.load_matrix(write(tmp_path, SMALL), describe, nsys=True)
    assert m3.cells[0].key.endswith("_nsys")


def test_nsys_wraps_command(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, SMALL), describe, nsys=True)
    r = run_matrix.Runner(m, tmp_path, Path("/x/memstrat"), None, True, [None])
    cmd = r.command(m.cells[0], tmp_path / "t.jsonl")
    assert cmd[0].endswith("experiments/scripts/nsys_run")
    assert cmd[1:4] == ["-o", str(tmp_path / "nsys" / m.cells[0].key), "--"]
    assert cmd[4:6] == ["/x/memstrat", "train"]


def test_append_is_whole_lines(run_matrix, describe, tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"partial": ')                   # a foreign, unterminated line
    run_matrix.append_lines(f, ['{"a": 1}', '{"b": 2}\n'])
    assert f.read_text().splitlines()[1:] == ['{"a": 1}', '{"b": 2}']


# ---------------------------------------------------------------------------- slurm
def test_slurm_script(tmp_path, fake_memstrat):
    out, script = tmp_path / "out", tmp_path / "job.sh"
    matrix = write(tmp_path, SMALL)
    res = run([matrix, "--out", out, "--memstrat", fake_memstrat, "--slurm", script,
               "--slurm-partition", "gpu", "--slurm-max-parallel", "4",
               "--slurm-sbatch=--constraint=h200", "--extra-args=--no-profile"])
    assert res.returncode == 0, res.stderr
    text = script.read_text()
    assert "#SBATCH --array=0-5%4" in text
    assert "#SBATCH --gres=gpu:1" in text
    assert "#SBATCH --partition=gpu" in text and "#SBATCH --constraint=h200" in text
    assert "pinned_static_u8_b256_h256_e2_cublas_seed1_r0" in text
    assert '--only "$KEY"' in text and "--extra-args=--no-profile" in text
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert records(out) == []                      # nothing ran

    # One array task runs exactly its cell.
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="1", PYTHON=sys.executable)
    task = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert task.returncode == 0, task.stderr
    (rec,) = records(out)
    keys = [l.strip() for l in text.split("CELLS=(")[1].split(")")[0].split()]
    assert rec["config"]["run_tag"] == keys[1]

    assert rec["argv"][-1] == "--no-profile" or "--no-profile" in rec["argv"]

    # Regenerating leaves the recorded cell out of the array.
    res = run([matrix, "--out", out, "--memstrat", fake_memstrat, "--slurm", script,
               "--extra-args=--no-profile"])
    assert "#SBATCH --array=0-4%1\n" in script.read_text()   # one task at a time by default
    assert keys[1] not in script.read_text()


# ---------------------------------------------------------------------------- order
ORDERED = """
[axes]
strategy = ["resident", "pinned", "double-buffer", "um"]
batch = [256, 1024]
transfer = ["u8", "f32"]
repeats = 3
seed = 7
"""


def test_shuffled_order_is_deterministic_and_covers_every_repeat_once(run_matrix, describe,
                                                                      tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, ORDERED), describe)
    assert len(m.cells) == 3 * 16 and m.seed == 7
    a = run_matrix.run_order(m.cells, "shuffled", 7)
    assert a == run_matrix.run_order(m.cells, "shuffled", 7)          # same seed, same order
    assert a != run_matrix.run_order(m.cells, "shuffled", 8)          # the seed matters
    assert sorted(c.key for c in a) == sorted(c.key for c in m.cells)  # each exactly once
    assert len({c.key for c in a}) == len(a)
    # repeat by repeat: every configuration runs once before any runs twice ...
    assert [c.repeat for c in a] == sorted(c.repeat for c in a)
    # ... in an order that interleaves configurations, different in each block
    assert a[:16] != m.cells[:16]
    blocks = [[c.key.rsplit("_r", 1)[0] for c in a[r * 16:(r + 1) * 16]] for r in range(3)]
    assert blocks[0] != blocks[1] != blocks[2]
    assert all(sorted(b) == sorted(blocks[0]) for b in blocks)
    assert run_matrix.run_order(m.cells, "sequential", 7) == m.cells
    with pytest.raises(ValueError):
        run_matrix.run_order(m.cells, "random", 7)


def test_run_in_shuffled_order_with_manifest(tmp_path, fake_memstrat):
    out, log = tmp_path / "out", tmp_path / "calls.txt"
    matrix = write(tmp_path, ORDERED)
    res = run([matrix, "--out", out, "--memstrat", fake_memstrat],
              {"FAKE_MEMSTRAT_CALLS": str(log)})
    assert res.returncode == 0, res.stderr
    assert "order shuffled, seed 7" in res.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["order"] == "shuffled" and manifest["shuffle_seed"] == 7
    assert manifest["matrix"] == str(matrix.resolve())
    ran = [c[1] for c in calls(log)]
    assert ran == manifest["cells"] == manifest["invocations"][0]["cells"]
    assert len(ran) == len(set(ran)) == 48
    assert [r["config"]["run_tag"] for r in records(out)] == ran

    # a rerun, in any order, runs nothing twice
    res = run([matrix, "--out", out, "--memstrat", fake_memstrat, "--order", "sequential"])
    assert res.returncode == 0 and "nothing to run" in res.stdout

    # a resumed run keeps the order for what is left and records what it ran
    out2 = tmp_path / "out2"
    res = run([matrix, "--out", out2, "--memstrat", fake_memstrat],
              {"FAKE_MEMSTRAT_FAIL": "pinned_static_u8"})
    assert res.returncode == 1
    res = run([matrix, "--out", out2, "--memstrat", fake_memstrat])
    assert res.returncode == 0, res.stderr
    inv = json.loads((out2 / "manifest.json").read_text())["invocations"]
    assert len(inv) == 2 and inv[0]["cells"] == ran
    assert inv[1]["cells"] == [k for k in ran if k.startswith("pinned_static_u8")]

    # --shuffle-seed changes the order; the dry run prints it
    dry = run([matrix, "--out", tmp_path / "o2", "--memstrat", fake_memstrat, "--dry-run",
               "--shuffle-seed", "3"])
    listed = [l.split("] ", 1)[1].split()[1] for l in dry.stdout.splitlines()
              if l.startswith("[")]
    assert "order shuffled, seed 3" in dry.stdout
    assert sorted(listed) == sorted(ran) and listed != ran


def test_epoch_launch_and_profile_axes(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = ["resident", "pinned"]
epoch_launch = ["on", "off"]
profile = [false, true]
[[exclude]]
strategy = "pinned"
epoch_launch = "off"
[[exclude]]
profile = true
repeat = [1]
repeats = 2
""".replace("repeats = 2\n", "").replace("[axes]\n", "[axes]\nrepeats = 2\n")), describe)
    keys = {c.key: c for c in m.cells}
    # defaults leave the key (and so restart-skip of existing results) unchanged
    assert "resident_static_u8_b256_h256_e10_cublas_seed1_r0" in keys
    assert "pinned_static_u8_b256_h256_e10_cublas_seed1_r0" in keys
    off = keys["resident_static_u8_b256_h256_e10_cublas_elaunch-off_noprofile_seed1_r1"]
    assert off.train_args()[-3:] == ["--epoch-launch", "off", "--no-profile"]
    default = keys["resident_static_u8_b256_h256_e10_cublas_seed1_r0"]
    assert "--epoch-launch" not in default.train_args()
    assert not {"--profile", "--no-profile"} & set(default.train_args())
    # pinned: 1 launch form x (2 unprofiled + 1 profiled); resident: 2 x 3
    assert len(m.cells) == 3 + 6
    assert not any(profiled(c, describe) and c.repeat == 1 for c in m.cells)
    assert sum(profiled(c, describe) for c in m.cells) == 1 + 2  # repeat 0 of each config


@pytest.mark.parametrize("axes, extra, ok", [
    ("profile = false", ("--no-profile",), False),
    ("epoch_launch = 'off'", ("--epoch-launch=off",), False),
    ("epoch_launch = 'off'", ("--no-profile",), True),
    ("", ("--no-profile",), True),
])
def test_axis_flags_set_in_one_place(run_matrix, describe, tmp_path, axes, extra, ok):
    path = write(tmp_path, f"[axes]\nstrategy = 'resident'\n{axes}\n")
    if ok:
        run_matrix.load_matrix(path, describe, extra_args=extra)
    else:
        with pytest.raises(run_matrix.MatrixError, match="set it in one place"):
            run_matrix.load_matrix(path, describe, extra_args=extra)


@pytest.mark.parametrize("text, message", [
    ("[axes]\nstrategy = 'pinned'\nprofile = 'no'", "expected true or false"),
    ("[axes]\nstrategy = 'pinned'\nepoch_launch = 'maybe'", "is not one of on, off"),
    ("[axes]\nstrategy = 'pinned'\n[[exclude]]\nrepeat = -1", "repeat indices"),
])
def test_new_axis_errors(run_matrix, describe, tmp_path, text, message):
    with pytest.raises(run_matrix.MatrixError, match=message):
        run_matrix.load_matrix(write(tmp_path, text), describe)


def test_unprofiled_records_are_timed_by_the_analysis(tmp_path, fake_memstrat):
    out = tmp_path / "out"
    res = run([write(tmp_path, """
[axes]
strategy = ["resident", "pinned"]
epoch_launch = ["on", "off"]
profile = [false, true]
repeats = 3
epochs = 3
"""), "--out", out, "--memstrat", fake_memstrat])
    assert res.returncode == 0, res.stderr
    from analysis.aggregate import aggregate
    from analysis.records import load_records
    groups = aggregate(load_records(out))
    resident = {g.key.epoch_launch: g for g in groups if g.key.strategy == "resident"}
    assert set(resident) == {True, False}
    (pinned,) = [g for g in groups if g.key.strategy == "pinned"]   # one launch form
    assert pinned.runs == 12 and pinned.n_processes == 6 and not pinned.timing_profiled
    assert pinned.stat("wall_ms").ci is not None


def test_fused_and_cpus_axes(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = "resident"
fused = ["on", "off"]
cpus = ["all", "0", "2-3,5"]
"""), describe)
    assert len(m.cells) == 6
    default = next(c for c in m.cells if c.fused is None and c.cpus is None)
    assert "--fused" not in default.train_args() and "fused" not in default.key
    off = next(c for c in m.cells if c.fused == "off" and c.cpus == "0")
    assert off.train_args()[-2:] == ["--fused", "off"]
    assert off.key.endswith("_fused-off_cpus0_seed1_r0")
    runner = run_matrix.Runner(m, tmp_path / "out", Path("/bin/true"), 10.0, False, [None])
    cmd = runner.command(off, tmp_path / "x.jsonl")
    assert cmd[:3] == ["taskset", "-c", "0"] and cmd[3] == "/bin/true"
    assert runner.command(default, tmp_path / "x.jsonl")[0] == "/bin/true"
    odd = next(c for c in m.cells if c.cpus == "2-3,5")
    assert "_cpus2-3+5_" in odd.key  # file-name safe


@pytest.mark.parametrize("value", ["none", "0-", "a", 3])
def test_cpus_axis_rejects_what_taskset_would_not_take(run_matrix, describe, tmp_path, value):
    with pytest.raises(run_matrix.MatrixError, match="cpus"):
        run_matrix.load_matrix(write(tmp_path, f"""
[axes]
strategy = "resident"
cpus = {json.dumps(value)}
"""), describe)


def test_all_leaves_out_a_data_path_that_is_another_strategys_on_one_gpu(run_matrix, describe,
                                                                           tmp_path):
    """describe's one_gpu_as (the peer-fanout forms: resident's data path on one GPU; the
    host-shared forms: pinned's and double-buffer-graph's; the um-shared forms: um's and
    um-prefetch-coarse's): "all" leaves them out, since their
    cells would repeat those strategies'; named, they run."""
    same = {s["name"] for s in describe["strategies"] if s.get("one_gpu_as")}
    assert same == {"peer-fanout", "peer-fanout-ring", "host-shared", "host-shared-ring",
                    "um-shared", "um-shared-host", "um-shared-prefetch", "um-shared-read-mostly"}
    assert {s["name"]: s["one_gpu_as"] for s in describe["strategies"] if s["name"] in same} == {
        "peer-fanout": "resident", "peer-fanout-ring": "resident", "host-shared": "pinned",
        "host-shared-ring": "double-buffer-graph", "um-shared": "um", "um-shared-host": "um",
        "um-shared-prefetch": "um-prefetch-coarse", "um-shared-read-mostly": "um-prefetch-coarse"}
    m = run_matrix.load_matrix(write(tmp_path, '[axes]\nstrategy = "all"\n'), describe)
    assert {c.strategy for c in m.cells} == {s["name"] for s in describe["strategies"]} - same
    named = run_matrix.load_matrix(write(tmp_path, '[axes]\nstrategy = ["all", "peer-fanout"]\n'),
                                   describe)
    assert {c.strategy for c in named.cells} == (
        {s["name"] for s in describe["strategies"]} - same | {"peer-fanout"})
