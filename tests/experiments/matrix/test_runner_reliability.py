"""The runner under kill -9 and beside other runners, with a fake memstrat (no GPU): a killed
runner's cell dies with it (its whole process group), a runner does not start cells beside a
running one, --only runners take the folder's lock too, and a matrix run through 20 kills at
random points and then concurrent runners ends with exactly one ok record per cell, no torn
line, no two cells at once and no process left behind."""
import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"

# 5 strategies x 2 batches x 2 transfers x 2 repeats = 40 cells
FORTY = """
name = "reliability"
[axes]
strategy = ["resident", "pageable", "pinned", "um", "zero-copy"]
batch = [64, 128]
transfer = ["u8", "f32"]
epochs = 2
repeats = 2
"""
TWO = "[axes]\nstrategy = ['pinned', 'um']\nepochs = 2\n"


def runner(matrix, out, fake, *extra):
    return [sys.executable, str(RUNNER), str(matrix), "--out", str(out), "--memstrat",
            str(fake), *map(str, extra)]


def fake_env(tmp_path, **values):
    env = dict(os.environ, FAKE_MEMSTRAT_CALLS=str(tmp_path / "calls.txt"),
               FAKE_MEMSTRAT_EXCLUSIVE=str(tmp_path / "gpu.lock"))
    for k in ("FAKE_MEMSTRAT_SLEEP", "FAKE_MEMSTRAT_SLEEP_MAX", "FAKE_MEMSTRAT_CHILD"):
        env.pop(k, None)
    env.update({f"FAKE_MEMSTRAT_{k.upper()}": str(v) for k, v in values.items()})
    return env


def events(tmp_path, kind):
    """[(tag, pid)] of the fake's calls lines of this kind (start, wrap, done, overlap)."""
    path = tmp_path / "calls.txt"
    if not path.exists():
        return []
    return [(f[1], int(f[2])) for f in (l.split() for l in path.read_text().splitlines())
            if len(f) >= 3 and f[0] == kind]


def alive(pid):
    """Whether `pid` runs (a zombie, dead but not reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def cell_pids(tmp_path):
    return {pid for kind in ("start", "wrap") for _, pid in events(tmp_path, kind)}


@pytest.fixture
def reaper(tmp_path):
    """Kills whatever fake process a failing test leaves running."""
    yield
    for pid in cell_pids(tmp_path):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def ok_tags(out):
    path = out / "records.jsonl"
    if not path.exists():
        return []
    return [json.loads(l)["config"]["run_tag"] for l in path.read_text().splitlines()
            if json.loads(l)["status"] == "ok"]


# ---------------------------------------------------------------------------- kill -9
def test_kill_9_of_the_runner_stops_its_cell_and_the_cells_children(tmp_path, fake_memstrat,
                                                                    reaper):
    m, out = tmp_path / "m.toml", tmp_path / "out"
    m.write_text(TWO)
    proc = subprocess.Popen(runner(m, out, fake_memstrat), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            env=fake_env(tmp_path, sleep=60, child=1))
    assert wait_until(lambda: events(tmp_path, "start"), 30)
    proc.kill()
    proc.wait()
    (wrapper,), (cell,) = [pid for _, pid in events(tmp_path, "wrap")], \
        [pid for _, pid in events(tmp_path, "start")]
    # the wrapper (as nsys_run) and the training it started (as memstrat) both stop
    assert wait_until(lambda: not alive(wrapper) and not alive(cell), 10), \
        "the cell outlived its runner"
    res = subprocess.run(runner(m, out, fake_memstrat), capture_output=True, text=True,
                         timeout=120, env=fake_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert sorted(ok_tags(out)) == sorted(t for t, _ in events(tmp_path, "done"))
    assert len(ok_tags(out)) == 2 and not events(tmp_path, "overlap")


def _hold_lock(out, pid):
    """Take the folder's lock as a runner `pid` of this host would."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / ".run_matrix.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.write(fd, f"{pid} {socket.gethostname()}\n".encode())
    return fd


def test_a_runner_refuses_to_start_beside_another(tmp_path, fake_memstrat, reaper):
    m, out = tmp_path / "m.toml", tmp_path / "out"
    m.write_text(TWO)
    fd = _hold_lock(out, os.getpid())                # a live runner holds the folder
    try:
        res = subprocess.run(runner(m, out, fake_memstrat), capture_output=True, text=True,
                             timeout=60, env=fake_env(tmp_path))
        assert res.returncode == 2
        assert f"another run_matrix.py (pid {os.getpid()}) is running on {out}" in res.stderr
        # an --only runner (a Slurm task) waits for the lock instead, then runs its cell
        key = "pinned_static_u8_b256_h256_e2_cublas_seed1_r0"
        task = subprocess.Popen(runner(m, out, fake_memstrat, "--only", key),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=fake_env(tmp_path))
        time.sleep(1.5)
        assert task.poll() is None and not events(tmp_path, "start")
    finally:
        os.close(fd)
    stdout, stderr = task.communicate(timeout=60)
    assert task.returncode == 0, stderr
    assert "waiting for the lock" in stderr
    assert ok_tags(out) == [key]


def test_a_runner_refuses_to_start_while_an_ended_runners_cell_runs(matrix_module, tmp_path):
    folder_lock = matrix_module("folder_lock")
    out = tmp_path / "out"
    dead = subprocess.Popen(["true"])
    dead.wait()
    fd = _hold_lock(out, dead.pid)                   # held by a cell whose runner has ended
    try:
        t0 = time.monotonic()
        with pytest.raises(folder_lock.FolderBusy, match=r"a cell started by a run_matrix.py "
                                                         r"\(pid \d+\) that has ended still runs"):
            folder_lock.acquire(out, wait=False, orphan_wait_s=0.5)
        assert 0.5 <= time.monotonic() - t0 < 5     # it gave the cell time to stop first
    finally:
        os.close(fd)
    lock = folder_lock.acquire(out, wait=False, orphan_wait_s=0.5)
    assert (out / ".run_matrix.lock").read_text().split()[0] == str(os.getpid())
    os.close(lock)


# ---------------------------------------------------------------------------- --only
def test_two_only_runners_of_one_cell_run_it_once(tmp_path, fake_memstrat, reaper):
    m, out = tmp_path / "m.toml", tmp_path / "out"
    m.write_text(TWO)
    key = "um_static_u8_b256_h256_e2_cublas_seed1_r0"
    procs = [subprocess.Popen(runner(m, out, fake_memstrat, "--only", key),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=fake_env(tmp_path, sleep=1)) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert ok_tags(out) == [key]
    assert len(events(tmp_path, "start")) == 1
    assert sum("nothing to run" in o for o, _ in outputs) == 1


def test_an_only_runner_beside_a_full_runner_waits(tmp_path, fake_memstrat, reaper):
    m, out = tmp_path / "m.toml", tmp_path / "out"
    m.write_text(FORTY.replace("repeats = 2", "repeats = 1").replace(
        '"um", "zero-copy"', '"um"'))                 # 16 cells
    env = fake_env(tmp_path, sleep=0.1)
    full = subprocess.Popen(runner(m, out, fake_memstrat), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert wait_until(lambda: events(tmp_path, "start"), 30)
    keys = json.loads((out / "manifest.json").read_text())["cells"]
    task = subprocess.run(runner(m, out, fake_memstrat, "--only", keys[-1], "--only", keys[-2]),
                          capture_output=True, text=True, timeout=120, env=env)
    assert task.returncode == 0, task.stderr
    assert full.wait(timeout=120) == 0
    assert sorted(ok_tags(out)) == sorted(keys)      # each once: the --only runner ran nothing
    assert not events(tmp_path, "overlap")           # and never beside the full runner's cell


# ---------------------------------------------------------------------------- the whole
def test_forty_cells_through_twenty_kills_and_concurrent_runners(tmp_path, fake_memstrat,
                                                                 reaper):
    m, out = tmp_path / "m.toml", tmp_path / "out"
    m.write_text(FORTY)
    env = fake_env(tmp_path, sleep_max=0.5, child=1)
    rng = random.Random(32)
    mid_cell = 0
    for _ in range(20):
        starts = len(events(tmp_path, "start"))
        proc = subprocess.Popen(runner(m, out, fake_memstrat), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        if rng.random() < 0.25:       # while it starts up, reads the records, ...
            time.sleep(rng.uniform(0.05, 0.6))
        else:                         # ... or once it runs cells: inside one, or between two
            wait_until(lambda: len(events(tmp_path, "start")) > starts, 20)
            time.sleep(rng.uniform(0, 0.8))
        mid_cell += any(alive(pid) for pid in cell_pids(tmp_path))   # a cell is running
        proc.kill()
        proc.wait()
    assert mid_cell >= 3, "too few kills landed inside a cell to test anything"

    # two full runners and an --only runner at once, then one more to finish
    keys = json.loads((out / "manifest.json").read_text())["cells"]
    concurrent = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env)
                  for cmd in (runner(m, out, fake_memstrat), runner(m, out, fake_memstrat),
                              runner(m, out, fake_memstrat, "--only", keys[-1]))]
    outputs = [p.communicate(timeout=300) for p in concurrent]
    codes = [p.returncode for p in concurrent]
    assert set(codes) <= {0, 2}, outputs
    for code, (_, err) in zip(codes, outputs):
        if code == 2:
            assert "is running on" in err or "still runs" in err, err
    final = subprocess.run(runner(m, out, fake_memstrat), capture_output=True, text=True,
                           timeout=300, env=env)
    assert final.returncode == 0, final.stderr

    raw = (out / "records.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    recs = [json.loads(l) for l in raw.decode().splitlines()]     # every line whole
    tags = [r["config"]["run_tag"] for r in recs if r["status"] == "ok"]
    assert sorted(tags) == sorted(keys) and len(keys) == 40        # each cell exactly once
    assert not [r for r in recs if r["status"] != "ok"]           # a killed cell is not a failure
    assert not events(tmp_path, "overlap"), "two cells ran at once"
    assert wait_until(lambda: not any(alive(p) for p in cell_pids(tmp_path)), 10), \
        "a cell process outlived its runner"
    assert not list((out / "tmp").glob("*.jsonl"))
