"""The Slurm job script carries nothing a shell could run: the matrix name is a safe word,
every value is on one line (no newline can get in, even into a comment) and every shell word
is quoted."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"
PINNED = "[axes]\nstrategy = ['pinned', 'um']\nepochs = 2\n"


def run(args, **kw):
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kw)


def test_a_name_that_breaks_the_line_is_refused(tmp_path, fake_memstrat):
    marker = tmp_path / "PWNED"
    m = tmp_path / "inj.toml"
    m.write_text(f'name = "quick\\ntouch {marker} #"\n[axes]\nstrategy = "resident"\n')
    script = tmp_path / "inj.sh"
    res = run([m, "--out", tmp_path / "o", "--memstrat", fake_memstrat, "--slurm", script])
    assert res.returncode == 2 and "is not a matrix name" in res.stderr
    assert "Traceback" not in res.stderr
    assert not script.exists() and not marker.exists()


@pytest.mark.parametrize("where", ["matrix", "out", "partition", "extra", "sbatch"])
def test_a_value_with_a_newline_is_refused(tmp_path, fake_memstrat, where):
    marker = tmp_path / "PWNED"
    evil = "x\ntouch PWNED\n#"                        # relative: a file in tmp_path
    folder = tmp_path / (evil if where == "matrix" else "plain")
    folder.mkdir()
    m = folder / "m.toml"
    m.write_text(PINNED)
    args = [m, "--out", tmp_path / (evil if where == "out" else "o"),
            "--memstrat", fake_memstrat, "--slurm", tmp_path / "job.sh"]
    args += {"matrix": [], "out": [], "partition": ["--slurm-partition", evil],
             "extra": [f"--extra-args=--data='{evil}'"], "sbatch": [f"--slurm-sbatch={evil}"]}[where]
    res = run(args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "not printable" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "job.sh").exists() and not marker.exists()


def test_paths_with_shell_characters_are_quoted(tmp_path, fake_memstrat):
    marker = tmp_path / "PWNED"
    odd = tmp_path / "dir with 'quotes' $(touch PWNED); `touch PWNED` & \"more\" \\ end"
    odd.mkdir()
    m = odd / "m.toml"
    m.write_text(PINNED)
    out, script = odd / "out $(x)", odd / "job $(x).sh"
    res = run([m, "--out", out, "--memstrat", fake_memstrat, "--slurm", script,
               "--extra-args=--data='/a b/$(touch PWNED)'"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    text = script.read_text()
    assert all(line.isprintable() for line in text.splitlines())
    assert "ONE AT A TIME" in text                   # the lock's effect on the tasks, stated
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="0", PYTHON=sys.executable)
    task = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert task.returncode == 0, task.stderr
    assert not marker.exists()
    (rec,) = [json.loads(l) for l in (out / "records.jsonl").read_text().splitlines()]
    assert "--data=/a b/$(touch PWNED)" in rec["argv"]
