"""A cell memstrat refuses to run (exit 2: a bad option or input; exit 3: no GPU, or the strategy
waived on it) is recorded once; a rerun skips it and says so, --retry-rejected runs it again.
Ordinary failures (exit 1, a crash) are still retried."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"
TWO = "[axes]\nstrategy = ['pinned', 'um']\nepochs = 2\n"


def run(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)


def records(out):
    return [json.loads(l) for l in (out / "records.jsonl").read_text().splitlines()]


def started(calls):
    return [l.split()[1] for l in calls.read_text().splitlines()
            if l.startswith("start ")] if calls.exists() else []


@pytest.mark.parametrize("code, meaning", [(2, "a bad option or input"),
                                           (3, "no GPU, or the strategy is waived")])
def test_a_rejected_cell_is_recorded_once(tmp_path, fake_memstrat, code, meaning):
    m, out, calls = tmp_path / "m.toml", tmp_path / "out", tmp_path / "calls.txt"
    m.write_text(TWO)
    base = [m, "--out", out, "--memstrat", fake_memstrat]
    env = {"FAKE_MEMSTRAT_REJECT": "um_", "FAKE_MEMSTRAT_REJECT_CODE": str(code),
           "FAKE_MEMSTRAT_CALLS": str(calls)}
    res = run(base, env)
    assert res.returncode == 1
    assert "REJECT" in res.stdout and "1 rejected by memstrat" in res.stdout
    (rejected,) = [r for r in records(out) if r["status"] == "failed"]
    assert rejected["error"].startswith(f"run_matrix: rejected by memstrat (exit {code}: "
                                        f"{meaning}")
    assert "simulated refusal" in rejected["error"]          # what memstrat said
    for _ in range(2):                                       # reruns: nothing runs again
        res = run(base, env)
        assert res.returncode == 1
        assert "1 rejected by memstrat before, not run again: --retry-rejected" in res.stdout
        assert "nothing to run" in res.stdout
    assert len(records(out)) == 2
    assert started(calls) == ["pinned_static_u8_b256_h256_e2_cublas_seed1_r0"]
    dry = run([*base, "--dry-run"], env)
    assert " skip  um_static" in dry.stdout

    res = run([*base, "--retry-rejected"], {"FAKE_MEMSTRAT_CALLS": str(calls)})
    assert res.returncode == 0, res.stderr
    assert "1 of them rejected before" in res.stdout
    assert sorted(r["status"] for r in records(out)) == ["failed", "ok", "ok"]
    assert run(base).returncode == 0


def test_a_refusal_only_memstrat_can_tell_is_recorded_once(tmp_path, fake_memstrat):
    # The kernel form with --fused single: the runner cannot tell from `memstrat describe` that
    # the single-launch step does not take hidden size 250 (not a multiple of 4); memstrat
    # refuses the run with exit 2, once
    m, out, calls = tmp_path / "m.toml", tmp_path / "out", tmp_path / "calls.txt"
    m.write_text("[axes]\nstrategy = 'resident'\nhidden = [256, 250]\nepochs = 2\n"
                 "launch_form = 'kernel'\nfused = 'single'\n")
    base = [m, "--out", out, "--memstrat", fake_memstrat]
    env = {"FAKE_MEMSTRAT_CALLS": str(calls)}
    for _ in range(3):
        assert run(base, env).returncode == 1
    failed = [r for r in records(out) if r["status"] == "failed"]
    assert len(failed) == 1 and "exit 2" in failed[0]["error"]
    assert "_h250_" in failed[0]["config"]["run_tag"]
    assert len(records(out)) == 2


def test_ordinary_failures_are_still_retried(tmp_path, fake_memstrat):
    m, out = tmp_path / "m.toml", tmp_path / "out"
    m.write_text(TWO)
    base = [m, "--out", out, "--memstrat", fake_memstrat]
    for _ in range(2):
        res = run(base, {"FAKE_MEMSTRAT_CRASH": "um_"})
        assert res.returncode == 1 and "FAILED" in res.stdout
    assert sorted(r["status"] for r in records(out)) == ["failed", "failed", "ok"]
    assert all("wrote no record" in r["error"] for r in records(out) if r["status"] != "ok")
