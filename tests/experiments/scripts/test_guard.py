"""experiments/scripts/guard.sh with stand-ins for memstrat (tests/experiments/matrix/
fake_memstrat.py): against another build, the two builds run the guard matrix in alternating
halves and compare.py judges them; without a committed set for the GPU, or without a GPU, it
says so."""
import os
import subprocess
import sys

from script_support import REPO

FAKE = REPO / "tests" / "experiments" / "matrix" / "fake_memstrat.py"
GUARD = REPO / "experiments" / "scripts" / "guard.sh"
MATRIX = """name = "tiny-guard"
[axes]
strategy = ["resident", "pinned"]
scenario = "static"
transfer = "u8"
batch = 256
hidden = 256
epochs = 3
profile = false
repeats = 7
seed = 1
"""


def build(tmp_path, side, info_ok=True):
    """An executable that notes its side in calls.txt and runs the fake memstrat."""
    exe = tmp_path / side
    info = "" if info_ok else 'if [ "$1" = info ]; then echo "no GPU" >&2; exit 1; fi\n'
    exe.write_text("#!/bin/bash\n" + info
                   + f'[ "$1" = train ] && echo {side} >> "{tmp_path}/calls.txt"\n'
                   + f'exec "{sys.executable}" "{FAKE}" "$@"\n')
    exe.chmod(0o755)
    return exe


def guard(tmp_path, *args):
    (tmp_path / "m.toml").write_text(MATRIX)
    return subprocess.run(["bash", str(GUARD), "--matrix", str(tmp_path / "m.toml"),
                           "--out", str(tmp_path / "out"), *map(str, args)],
                          cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))


def test_against_another_build_the_two_alternate_by_halves(tmp_path):
    res = guard(tmp_path, "--memstrat", build(tmp_path, "new"),
                "--base-memstrat", build(tmp_path, "base"))
    assert res.returncode == 0, res.stdout + res.stderr
    sides = (tmp_path / "calls.txt").read_text().split()
    assert sides == ["base"] * 7 + ["new"] * 7 + ["base"] * 7 + ["new"] * 7
    for side in ("base", "new"):
        lines = (tmp_path / "out" / side / "records.jsonl").read_text().splitlines()
        assert len(lines) == 14
    assert "2 configurations compared: 0 regressions" in res.stdout


def test_without_a_committed_set_for_this_gpu_it_asks_for_a_base_build(tmp_path):
    env_gpu = "NVIDIA Nowhere 9000"
    exe = build(tmp_path, "new")
    (tmp_path / "m.toml").write_text(MATRIX)
    res = subprocess.run(["bash", str(GUARD), "--matrix", str(tmp_path / "m.toml"),
                          "--out", str(tmp_path / "out"), "--memstrat", str(exe)],
                         cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, FAKE_MEMSTRAT_GPU=env_gpu))
    assert res.returncode == 2
    assert "no committed results set for NVIDIA Nowhere 9000" in res.stderr
    assert "--base-memstrat" in res.stderr
    assert not (tmp_path / "calls.txt").exists()          # nothing ran


def test_without_a_gpu_it_exits_3_and_bad_arguments_exit_2(tmp_path):
    res = guard(tmp_path, "--memstrat", build(tmp_path, "new", info_ok=False))
    assert res.returncode == 3 and "no usable GPU" in res.stderr
    assert guard(tmp_path, "--memstrat", tmp_path / "missing").returncode == 2
    assert guard(tmp_path, "--bogus").returncode == 2
