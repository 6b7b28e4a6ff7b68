"""`memstrat train --gpus 2 --processes per-gpu`: one process per GPU, as a launcher starts them
(torchrun's environment contract: RANK, WORLD_SIZE, LOCAL_RANK; NCCL's bootstrap at
NCCL_COMM_ID), against the same run in one process (a host thread per GPU).

Both give the same training bit for bit: the same loss curve, the same per-epoch train loss,
test loss and accuracy, and the same bytes moved. Rank 0 writes the one record and the curve;
rank 1 prints nothing and writes nothing. Needs the memstrat binary (MEMSTRAT_BIN or
build/memstrat), 2 GPUs and MNIST (MEMSTRAT_DATA); skipped with the reason otherwise.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

ARGS = ["train", "--gpus", "2", "--epochs", "3", "--train-samples", "6000", "--no-profile"]


@pytest.fixture
def two_gpus(memstrat_binary, mnist_dir) -> tuple[Path, Path]:
    binary = memstrat_binary
    info = subprocess.run([str(binary), "info"], capture_output=True, text=True, timeout=60)
    # `info` describes one device: "device 0 of N: <name>"
    count = re.search(r"^device \d+ of (\d+):", info.stdout, re.M)
    shown = int(count.group(1)) if info.returncode == 0 and count else 0
    if shown < 2:
        pytest.skip(f"needs 2 GPUs; `memstrat info` shows {shown}")
    return binary, mnist_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**more: str) -> dict:
    e = {k: v for k, v in os.environ.items()
         if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NCCL_COMM_ID")}
    e["NCCL_NVLS_ENABLE"] = "0"
    e.update(more)
    return e


def test_per_gpu_processes_train_as_one_process_does(two_gpus, tmp_path):
    binary, data = two_gpus
    one = [str(binary), *ARGS, "--data", str(data), "--json", str(tmp_path / "one.jsonl"),
           "--loss-curve", str(tmp_path / "one.csv")]
    r = subprocess.run(one, capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr

    comm = f"127.0.0.1:{free_port()}"
    per = [str(binary), *ARGS, "--processes", "per-gpu", "--data", str(data),
           "--json", str(tmp_path / "per.jsonl"), "--loss-curve", str(tmp_path / "per.csv")]
    procs = [subprocess.Popen(per, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                      NCCL_COMM_ID=comm))
             for r in (0, 1)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=300))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a process of --processes per-gpu did not end in 300 s")
    for rank, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank}: {out}{err}"
    assert "summary: resident" in outs[0][0]
    assert outs[1][0] == "", "rank 1 prints nothing"

    a = [json.loads(x) for x in (tmp_path / "one.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "per.jsonl").read_text().splitlines()]
    assert len(a) == 1 and len(b) == 1, "one record: rank 0's"
    a, b = a[0], b[0]
    assert a["config"]["processes"] == "one" and b["config"]["processes"] == "per-gpu"
    assert (tmp_path / "per.csv").read_text() == (tmp_path / "one.csv").read_text()
    assert len(a["epochs"]) == len(b["epochs"]) == 3
    for ea, eb in zip(a["epochs"], b["epochs"]):
        for k in ("train_loss", "train_acc", "test_loss", "test_acc", "h2d_bytes", "peer_bytes"):
            assert ea[k] == eb[k], (k, ea[k], eb[k])


def test_started_alone_memstrat_starts_the_ranks_and_trains_as_one_process(two_gpus, tmp_path):
    """No launcher: `--processes per-gpu` starts its 2 ranks itself (rank_spawn.h), and the run
    is the one-process run's, bit for bit, with one record (rank 0's)."""
    binary, data = two_gpus
    one = [str(binary), *ARGS, "--data", str(data), "--json", str(tmp_path / "one.jsonl"),
           "--loss-curve", str(tmp_path / "one.csv")]
    r = subprocess.run(one, capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    alone = [str(binary), *ARGS, "--processes", "per-gpu", "--data", str(data),
             "--json", str(tmp_path / "alone.jsonl"), "--loss-curve", str(tmp_path / "alone.csv")]
    r = subprocess.run(alone, capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("summary: resident") == 1, "rank 0 alone prints"
    assert (tmp_path / "alone.csv").read_text() == (tmp_path / "one.csv").read_text()
    b = [json.loads(x) for x in (tmp_path / "alone.jsonl").read_text().splitlines()]
    assert len(b) == 1 and b[0]["config"]["processes"] == "per-gpu"
