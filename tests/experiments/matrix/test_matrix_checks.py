"""What the runner checks before any cell runs: the matrix file itself (readable, UTF-8, a safe
name, a bounded size), its extra arguments against `memstrat describe`, the results folder and
the binary. Each bad input is a one-line message and exit 2."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"
PINNED = "[axes]\nstrategy = 'pinned'\nepochs = 2\n"


def run(args, env_extra=None, **kw):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120, **kw)


def assert_usage_error(res, *needles):
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


# ---------------------------------------------------------------------------- files
def test_out_under_proc_is_a_message(tmp_path, fake_memstrat):
    m = tmp_path / "m.toml"
    m.write_text(PINNED)
    assert_usage_error(run([m, "--out", "/proc/x", "--memstrat", fake_memstrat]),
                       "--out /proc/x", "cannot create")


@pytest.mark.parametrize("extra", [[], ["--dry-run"], ["--slurm", "job.sh"]])
def test_out_that_is_a_file_is_a_message(tmp_path, fake_memstrat, extra):
    m, f = tmp_path / "m.toml", tmp_path / "afile"
    m.write_text(PINNED)
    f.write_text("not a folder")
    assert_usage_error(run([m, "--out", f, "--memstrat", fake_memstrat, *extra], cwd=tmp_path),
                       "is not a directory")


def test_a_directory_as_the_matrix_is_a_message(tmp_path, fake_memstrat):
    (tmp_path / "d.toml").mkdir()
    assert_usage_error(run([tmp_path / "d.toml", "--out", tmp_path / "o", "--memstrat",
                            fake_memstrat]), "a directory, not a matrix file")


def test_a_matrix_that_is_not_utf8_is_a_message(tmp_path, fake_memstrat):
    m = tmp_path / "m.toml"
    m.write_bytes(PINNED.encode() + b"# caf\xe9\n")
    assert_usage_error(run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat]),
                       "not UTF-8")


def test_a_relative_memstrat_is_the_file_checked_not_one_on_path(tmp_path, fake_memstrat):
    # ./memstrat in the working directory, and a decoy of the same name on $PATH
    work, decoy_dir = tmp_path / "work", tmp_path / "decoy"
    work.mkdir()
    decoy_dir.mkdir()
    marker = tmp_path / "decoy-ran"
    for d, extra in ((work, ""), (decoy_dir, f"touch {marker}\n")):
        exe = d / "memstrat"
        exe.write_text(f"#!/bin/sh\n{extra}exec {sys.executable} {fake_memstrat} \"$@\"\n")
        exe.chmod(0o755)
    (work / "m.toml").write_text(PINNED)
    env = {"PATH": f"{decoy_dir}{os.pathsep}{os.environ['PATH']}"}
    res = run(["m.toml", "--out", "o", "--memstrat", "./memstrat"], env, cwd=work)
    assert res.returncode == 0, res.stderr
    assert not marker.exists()
    (rec,) = [json.loads(l) for l in (work / "o" / "records.jsonl").read_text().splitlines()]
    assert rec["status"] == "ok"
    # a missing or non-executable ./memstrat is a message, not a run of the decoy
    (work / "memstrat").chmod(0o644)
    assert_usage_error(run(["m.toml", "--out", "o2", "--memstrat", "./memstrat"], env,
                           cwd=work), "not found or not executable")
    assert not marker.exists()


# ---------------------------------------------------------------------------- name
@pytest.mark.parametrize("name", ["quick\ntouch /tmp/PWNED #", "a b", "x;rm -rf ~", "$(id)",
                                  "", "-lead", "é"])
def test_unsafe_names_are_refused(run_matrix, describe, tmp_path, name):
    m = tmp_path / "m.toml"
    m.write_text(f"name = {json.dumps(name)}\n{PINNED}")
    with pytest.raises(run_matrix.MatrixError, match="is not a matrix name"):
        run_matrix.load_matrix(m, describe)


def test_a_file_name_that_is_not_a_safe_name_needs_a_name(run_matrix, describe, tmp_path):
    m = tmp_path / "my matrix.toml"
    m.write_text(PINNED)
    with pytest.raises(run_matrix.MatrixError, match="the file name"):
        run_matrix.load_matrix(m, describe)
    m.write_text("name = 'mine'\n" + PINNED)
    assert run_matrix.load_matrix(m, describe).name == "mine"


# ---------------------------------------------------------------------------- size
def test_cells_are_counted_before_expanding(run_matrix, describe, tmp_path):
    m = tmp_path / "m.toml"
    m.write_text("""
[axes]
strategy = ["pinned", "double-buffer", "resident"]
scenario = ["static", "stream"]
depth = [2, 3]
copy_streams = [1, 2]
workers = [1, 2, 4]
batch = [64, 256]
repeats = 3
[[exclude]]
strategy = "resident"
""")
    full = run_matrix.load_matrix(m, describe)
    # static: pinned 2 batches, double-buffer 2x2x2, resident 2; stream: x3 workers
    assert len(full.cells) + full.excluded == 3 * (2 + 8 + 2) * (1 + 3)
    limit = len(full.cells) + full.excluded
    assert run_matrix.load_matrix(m, describe, max_cells=limit).cells == full.cells
    with pytest.raises(run_matrix.MatrixError, match=f"{limit:,} cells.*--allow-large"):
        run_matrix.load_matrix(m, describe, max_cells=limit - 1)
    assert run_matrix.load_matrix(m, describe, max_cells=None).cells == full.cells


def test_a_huge_matrix_is_refused_at_once(tmp_path, fake_memstrat):
    m = tmp_path / "m.toml"
    m.write_text("""
[axes]
strategy = "all"
batch = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
repeats = 1000000
""")
    t0 = time.monotonic()
    res = run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat, "--dry-run"])
    elapsed = time.monotonic() - t0
    assert_usage_error(res, "240,000,000 cells", "limit of 100,000", "--allow-large")
    assert elapsed < 5          # the Python start and `describe` included; expansion took minutes


def test_allow_large_lifts_the_limit(tmp_path, fake_memstrat):
    m = tmp_path / "m.toml"
    m.write_text("[axes]\nstrategy = 'pinned'\nrepeats = 100001\n")
    assert_usage_error(run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat, "-n"]),
                       "100,001 cells")
    res = run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat, "--allow-large",
               "--slurm", tmp_path / "job.sh"])
    assert res.returncode == 0, res.stderr
    assert "100001 cells" in res.stdout and "--allow-large" in (tmp_path / "job.sh").read_text()


# ---------------------------------------------------------------------------- extra arguments
@pytest.mark.parametrize("extra, message", [
    ("--bogus-flag", "unknown option --bogus-flag"),
    ("-Z 3", "unknown option -Z"),
    ("stray", "is not an option"),
    ("--lr nan", "--lr nan: not a finite number"),
    ("--lr=0", "--lr 0: must be > 0"),
    ("--lr -1", "must be > 0"),
    ("--momentum 1.5", "--momentum 1.5: must be <= 0.999"),
    ("--train-samples -1", "must be >= 0"),
    ("--device x", "--device x: not an integer"),
    ("--graphs maybe", "not one of on, off"),
    ("--advise fast", "unknown fast"),
    ("--prefetch-chunk 0", "must be >= 1"),
    ("--lr", "--lr needs a value"),
    ("--tf32=yes", "--tf32 takes no value"),
    ("--no-profile --profile", "--profile is given twice"),
    ("--batch 64", "use axes.batch"),
    ("-b64", "use axes.batch"),
    ("--depth 3", "use axes.depth"),
    ("--seed 2", "use axes.seed"),
    ("--json x.jsonl", "the runner writes each cell's record"),
    ("--run-tag=x", "the runner tags each record"),
])
def test_extra_arguments_are_checked_against_describe(run_matrix, describe, tmp_path, extra,
                                                      message):
    m = tmp_path / "m.toml"
    m.write_text(f"extra_args = {json.dumps(extra)}\n{PINNED}")
    with pytest.raises(run_matrix.MatrixError, match="extra_args: .*" + _re(message)):
        run_matrix.load_matrix(m, describe)
    m.write_text(PINNED)
    with pytest.raises(run_matrix.MatrixError, match="^--extra-args: .*" + _re(message)):
        run_matrix.load_matrix(m, describe, extra_args=tuple(extra.split()))


def _re(text):
    import re
    return re.escape(text)


@pytest.mark.parametrize("extra", ["--data=/data/mnist", "--data /x --no-profile", "--tf32",
                                   "--lr 0.1 --momentum 0", "--advise none",
                                   "--advise read-mostly,accessed-by", "-q", "--graphs off",
                                   "--train-samples 1000 --test-samples=500"])
def test_good_extra_arguments_pass(run_matrix, describe, tmp_path, extra):
    m = tmp_path / "m.toml"
    m.write_text(PINNED)
    cells = run_matrix.load_matrix(m, describe, extra_args=tuple(extra.split())).cells
    assert cells[0].train_args()[-len(extra.split()):] == extra.split()


def test_an_option_in_both_places_is_refused(run_matrix, describe, tmp_path):
    m = tmp_path / "m.toml"
    m.write_text(f"extra_args = '--lr 0.1'\n{PINNED}")
    with pytest.raises(run_matrix.MatrixError, match="--lr is also in .*extra_args"):
        run_matrix.load_matrix(m, describe, extra_args=("--lr=0.2",))


@pytest.mark.parametrize("where", ["file", "command line"])
def test_an_unclosed_quote_is_a_message(tmp_path, fake_memstrat, where):
    m = tmp_path / "m.toml"
    m.write_text(("extra_args = \"--data='/x\"\n" if where == "file" else "") + PINNED)
    extra = ["--extra-args=--data='/x"] if where == "command line" else []
    assert_usage_error(run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat, *extra]),
                       "extra", "No closing quotation")


def test_a_bad_flag_runs_no_cell(tmp_path, fake_memstrat):
    m, calls = tmp_path / "m.toml", tmp_path / "calls.txt"
    m.write_text("[axes]\nstrategy = ['pinned', 'um']\nepochs = 2\n")
    res = run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat,
               "--extra-args=--bogus-flag"], {"FAKE_MEMSTRAT_CALLS": str(calls)})
    assert_usage_error(res, "--extra-args: unknown option --bogus-flag")
    assert not calls.exists() and not (tmp_path / "o" / "records.jsonl").exists()


def test_hidden_sizes_follow_the_range_describe_declares(run_matrix, describe, tmp_path):
    d = json.loads(json.dumps(describe))
    (hidden,) = [o for o in d["train_options"] if o["name"] == "--hidden"]
    hidden.update(min=1, max=65536)
    m = tmp_path / "m.toml"
    m.write_text("[axes]\nstrategy = 'pinned'\nhidden = [256, 100000]\n")
    with pytest.raises(run_matrix.MatrixError, match=r"hidden sizes must be in 1..65536"):
        run_matrix.load_matrix(m, d)
    m.write_text(f"extra_args = '--lr 0.1'\n{PINNED}")
    assert run_matrix.load_matrix(m, d).cells


def test_memstrat_declares_the_hidden_range_so_a_bad_size_runs_no_cell(run_matrix, describe,
                                                                       tmp_path):
    (hidden,) = [o for o in describe["train_options"] if o["name"] == "--hidden"]
    assert (hidden["min"], hidden["max"]) == (1, 65536)      # the fixture = memstrat describe
    m = tmp_path / "m.toml"
    m.write_text("[axes]\nstrategy = 'pinned'\nhidden = 100000\n")
    with pytest.raises(run_matrix.MatrixError, match=r"hidden sizes must be in 1..65536"):
        run_matrix.load_matrix(m, describe)
