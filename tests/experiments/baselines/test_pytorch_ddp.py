"""The PyTorch DistributedDataParallel anchor of `memstrat train --gpus N` (experiments/baselines/
pytorch_ddp.py and its torch-free part, ddp_plan.py).

    python3 -m pytest -q tests/experiments/baselines/test_pytorch_ddp.py

Everywhere: memstrat's cut of an epoch into global batches and shards (hand cases, the last
partial global batch and empty shards), the loss weights that make DDP's gradient average the
global batch's mean, the NCCL helpers, and the exit codes and messages of bad options, which come
before torch is imported (the script runs with torch made unimportable). On 2 CUDA GPUs with
NCCL: a short run with --step graph and --step eager, their records and loss curves against each
other, a float64 reference, and memstrat's --emulate-gpus 2 curve when a memstrat binary is
found ($MEMSTRAT_BIN, else build/memstrat).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "experiments" / "baselines"
SCRIPT = BASELINES / "pytorch_ddp.py"
sys.path.insert(0, str(BASELINES))
import ddp_plan as dp  # noqa: E402
import memstrat_inputs as mi  # noqa: E402
from data_parallel_cases import BAD_OPTIONS  # noqa: E402
from test_pytorch_mlp import (export_init, make_dataset, numpy_reference_train,  # noqa: E402
                              read_curve)

# runs the script with `import torch` failing, as where torch is not installed
NO_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT")


def cli(*args: str, nvls: str | None = "0", torch: bool = False, extra_env=None,
        timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k != "NCCL_NVLS_ENABLE" and k not in TORCHRUN_VARS}
    if nvls is not None:
        env["NCCL_NVLS_ENABLE"] = nvls
    env.update(extra_env or {})
    cmd = [sys.executable, str(SCRIPT)] if torch else [sys.executable, "-c", NO_TORCH, str(SCRIPT)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


@pytest.fixture
def data(tmp_path) -> Path:
    return make_dataset(tmp_path / "mnist", n_train=40, n_test=20)


# ---------------------------------------------------------------------------------------------
# the shard arithmetic (experiments/core/shard_plan.h)

@pytest.mark.parametrize("n, B, N, rows", [
    (8, 2, 2, [4, 4]),          # exact: every global batch full
    (10, 2, 2, [4, 4, 2]),      # the last: shard 0 full, shard 1 empty
    (11, 3, 3, [9, 2]),         # the last: shard 0 partial, shards 1 and 2 empty
    (40, 16, 2, [32, 8]),       # the GPU test's: the last is shard 0 partial, shard 1 empty
    (50, 16, 2, [32, 18]),      # the last: shard 0 full, shard 1 partial
    (3, 4, 2, [3]),             # one global batch, smaller than one shard
    (0, 4, 2, []),
])
def test_global_batches_and_their_rows(n, B, N, rows):
    assert dp.global_batches(n, B, N) == len(rows)
    assert [dp.global_rows(n, B, N, g) for g in range(len(rows))] == rows
    assert dp.full_global_batches(n, B, N) == sum(r == N * B for r in rows)


@pytest.mark.parametrize("n, B, N, g, expected", [
    (10, 2, 2, 2, [(4, 8, 2), (5, 10, 0)]),
    (11, 3, 3, 1, [(3, 9, 2), (4, 12, 0), (5, 15, 0)]),
    (50, 16, 2, 1, [(2, 32, 16), (3, 48, 2)]),
    (40, 16, 2, 0, [(0, 0, 16), (1, 16, 16)]),
    (40, 16, 2, 1, [(2, 32, 8), (3, 48, 0)]),
    (3, 4, 2, 0, [(0, 0, 3), (1, 4, 0)]),
])
def test_shards_by_hand(n, B, N, g, expected):
    assert [tuple(dp.shard(n, B, N, g, r)) for r in range(N)] == expected


@pytest.mark.parametrize("n, B, N", [(n, B, N) for n in (1, 7, 31, 32, 33, 100)
                                     for B in (1, 3, 8) for N in (2, 3, 4, 8)])
def test_shards_are_the_single_gpu_batches_in_order(n, B, N):
    """Shard r of global batch g is the single-GPU batch g*N + r: rows [(gN+r)B, +B) clipped to
    the epoch; all shards together cover the epoch once, in order."""
    covered = []
    for g in range(dp.global_batches(n, B, N)):
        for r in range(N):
            s = dp.shard(n, B, N, g, r)
            assert s.batch == g * N + r and s.first == s.batch * B
            assert s.rows == max(0, min(B, n - s.first))
            covered += range(s.first, s.first + s.rows)
    assert covered == list(range(n))


def test_shard_plan_refusals():
    with pytest.raises(ValueError):
        dp.global_batches(10, 0, 2)
    with pytest.raises(ValueError):
        dp.global_batches(10, 2, 0)
    with pytest.raises(IndexError):
        dp.global_rows(10, 2, 2, 3)
    with pytest.raises(IndexError):
        dp.shard(10, 2, 2, 0, 2)


@pytest.mark.parametrize("n, B, N", [(10, 2, 2), (11, 3, 3), (50, 16, 2), (40, 16, 2), (3, 4, 2),
                                     (8, 2, 2), (29, 4, 4)])
def test_ddp_average_of_weighted_rank_losses_is_the_global_mean(n, B, N):
    """DDP sums the ranks' gradients and divides by N. With each rank's loss its local mean
    (full global batches) or its local sum x N/R (the partial last one; an empty shard gives 0),
    that is the gradient of the mean over the global batch's R rows: memstrat's shards' sum."""
    rng = np.random.default_rng(n * 100 + B * 10 + N)
    grads = rng.normal(size=(n, 5))  # each row's loss gradient
    for g in range(dp.global_batches(n, B, N)):
        w = dp.loss_weight(n, B, N, g)
        ranks = []
        for r in range(N):
            s = dp.shard(n, B, N, g, r)
            mine = grads[s.first:s.first + s.rows]
            ranks.append(mine.mean(0) if w is None else mine.sum(0) * w)
        R = dp.global_rows(n, B, N, g)
        first = g * N * B
        np.testing.assert_allclose(sum(ranks) / N, grads[first:first + R].mean(0), rtol=1e-12)
        assert (w is None) == (R == N * B)


# ---------------------------------------------------------------------------------------------
# NCCL helpers

def test_nvls_refusal():
    assert dp.nvls_refusal({"NCCL_NVLS_ENABLE": "0"}) is None
    assert "it is not set" in dp.nvls_refusal({})
    assert "it is set to '1'" in dp.nvls_refusal({"NCCL_NVLS_ENABLE": "1"})
    assert "export NCCL_NVLS_ENABLE=0" in dp.nvls_refusal({"NCCL_NVLS_ENABLE": ""})


def test_nccl_settings_and_version():
    env = {"NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN", "PATH": "/bin", "TORCH_NCCL_X": "1"}
    assert dp.nccl_settings(env) == {"NCCL_DEBUG": "WARN", "NCCL_NVLS_ENABLE": "0"}
    assert dp.format_nccl_version((2, 27, 3)) == "2.27.3"
    assert dp.format_nccl_version(22703) == "2.27.3"
    assert dp.format_nccl_version(2708) == "2.7.8"
    assert dp.format_nccl_version(None) is None
    assert dp.nccl_at_least("2.9.6") and dp.nccl_at_least("2.27.3")
    assert not dp.nccl_at_least("2.9.5") and not dp.nccl_at_least(None)


def test_launcher_env():
    assert dp.launcher_env({}) is None
    assert dp.launcher_env({"RANK": "1", "WORLD_SIZE": "2"}) is None
    assert dp.launcher_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == (1, 2, 1)
    with pytest.raises(ValueError):
        dp.launcher_env({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    with pytest.raises(ValueError):
        dp.launcher_env({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})


# ---------------------------------------------------------------------------------------------
# the command line, before torch

def test_help_names_both_launchers():
    r = cli("--help")
    assert r.returncode == 0 and "torchrun --nproc-per-node" in r.stdout
    assert "--gpus" in r.stdout and "--step" in r.stdout


@pytest.mark.parametrize("args, message", BAD_OPTIONS)
def test_bad_options_exit_2_before_torch(data, args, message):
    r = cli("--data", str(data), "--batch", "16", *args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "PyTorch is not installed" not in r.stderr


@pytest.mark.parametrize("args", [["--step", "compile"], ["--transfer", "f16"], ["--gpus", "x"]])
def test_argparse_errors_exit_2(data, args):
    r = cli("--data", str(data), *args)
    assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.parametrize("nvls", [None, "1"])
def test_nvls_must_be_off(data, nvls):
    r = cli("--data", str(data), nvls=nvls)
    assert r.returncode == 2 and "NCCL_NVLS_ENABLE=0" in r.stderr


def test_torchrun_world_must_match_gpus(data):
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    r = cli("--data", str(data), "--gpus", "3", extra_env=env)
    assert r.returncode == 2 and "torchrun started 2 processes" in r.stderr
    r = cli("--data", str(data), extra_env={**env, "RANK": "oops"})
    assert r.returncode == 2 and "must be integers" in r.stderr


def test_a_stream_export_is_refused(tmp_path, data):
    init = export_init(tmp_path / "init", [16, 12, 10], n_train=40, data=str(data))
    manifest = json.loads((init / "manifest.json").read_text())
    (init / "manifest.json").write_text(json.dumps({**manifest, "scenario": "stream"}))
    r = cli("--init", str(init), "--data", str(data))
    assert r.returncode == 2 and "static scenario only" in r.stderr


# a torch that answers only what the checks before any device work ask
FAKE_TORCH = ("import runpy, sys, types; t = types.ModuleType('torch'); "
              "d = types.ModuleType('torch.distributed'); d.is_available = lambda: True; "
              "d.is_nccl_available = lambda: {nccl}; t.distributed = d; "
              "t.cuda = types.SimpleNamespace(is_available=lambda: {cuda}, "
              "device_count=lambda: {count}); "
              "sys.modules.update({{'torch': t, 'torch.distributed': d}}); "
              "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


@pytest.mark.parametrize("cuda, count, nccl, args, code, message", [
    (False, 0, True, [], 3, "torch.cuda.is_available() is False"),
    (True, 1, True, [], 3, "1 GPU visible; this needs at least 2"),
    (True, 2, False, [], 3, "this PyTorch has no NCCL"),
    (True, 2, True, ["--gpus", "3"], 2, "--gpus 3, but only 2 GPUs are visible"),
    (True, 2, True, [], 3, "needs NCCL >= 2.9.6"),   # the stand-in has no torch.cuda.nccl
])
def test_device_checks_before_any_device_work(data, cuda, count, nccl, args, code, message):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env["NCCL_NVLS_ENABLE"] = "0"
    fake = FAKE_TORCH.format(cuda=cuda, count=count, nccl=nccl)
    r = subprocess.run([sys.executable, "-c", fake, str(SCRIPT), "--data", str(data), "--batch",
                        "16", *args], capture_output=True, text=True, env=env, timeout=60,
                       check=False)
    assert r.returncode == code, r.stderr
    assert message in r.stderr


def test_good_options_without_torch_exit_3(data):
    r = cli("--data", str(data), "--gpus", "2", "--batch", "16", "--hidden", "12")
    assert r.returncode == 3 and "PyTorch is not installed" in r.stderr


# ---------------------------------------------------------------------------------------------
# on 2 CUDA GPUs with NCCL

@pytest.fixture
def two_gpus():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch")
    if torch.cuda.device_count() < 2:
        pytest.skip(f"{torch.cuda.device_count()} CUDA GPU visible; this needs 2")
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_nccl_available()):
        pytest.skip("this PyTorch has no NCCL")
    return torch


EPOCHS = 3
LAYERS = [16, 12, 10]


def ddp_run(tmp_path, data, init, step: str, *more: str) -> tuple[dict, np.ndarray]:
    rec_path, curve_path = tmp_path / f"{step}.jsonl", tmp_path / f"{step}.csv"
    r = cli("--gpus", "2", "--init", str(init), "--data", str(data), "--epochs", str(EPOCHS),
            "--step", step, "--json", str(rec_path), "--loss-curve", str(curve_path), *more,
            torch=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "summary: pytorch-ddp-" + step in r.stdout
    recs = [json.loads(ln) for ln in rec_path.read_text().splitlines()]
    assert len(recs) == 1, "one record, from rank 0"
    c = read_curve(curve_path)
    G = dp.global_batches(40, 16, 2)
    assert [(e, b) for e, b, _ in c] == [(e, b) for e in range(1, EPOCHS + 1) for b in range(G)]
    return recs[0], np.array([v for _, _, v in c])


def test_two_gpus_graph_and_eager(two_gpus, tmp_path, data, record_errors, undeclared_keys):
    """40 samples, 16 rows per GPU: global batches of 32 and 8 rows (shard 1 of the last one is
    empty). Both step forms give one record and the same curve to rounding, which is the curve of
    single-GPU training with batches of 32 rows (the same mean loss per global batch) in
    float64."""
    init = export_init(tmp_path / "init", LAYERS, n_train=40, batch=16, data=str(data))
    graph_rec, graph = ddp_run(tmp_path, data, init, "graph")
    eager_rec, eager = ddp_run(tmp_path, data, init, "eager")
    for rec, step in ((graph_rec, "graph"), (eager_rec, "eager")):
        assert rec["status"] == "ok" and rec["config"]["strategy"] == f"pytorch-ddp-{step}"
        c = rec["config"]
        assert (c["gpus"], c["per_gpu_batch"], c["global_batch"], c["batch"]) == (2, 16, 32, 16)
        assert c["scenario"] == "static" and c["ddp"]["step"] == step
        assert c["ddp"]["gradient_as_bucket_view"] and c["ddp"]["static_graph"]
        assert rec["env"]["nccl"]["settings"]["NCCL_NVLS_ENABLE"] == "0"
        assert dp.nccl_at_least(rec["env"]["nccl"]["version"], (2, 0, 0))
        assert len(rec["epochs"]) == EPOCHS and rec["summary"]["steady_epochs"] == EPOCHS - 1
        assert record_errors(rec) == [] and undeclared_keys(rec) == []
    assert graph_rec["config"]["ddp"]["async_error_handling"] == "0"
    assert graph_rec["config"]["ddp"]["warmup_steps"] == 11
    np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-6)
    assert np.all(np.diff(eager[::2]) != 0)  # the weights move
    d, state = mi.Mnist(data), mi.InitState(str(init))
    order = state.order.astype(np.int64)
    params = [state.layer(l) for l in range(len(LAYERS) - 1)]
    ref = numpy_reference_train(mi.normalize(d.train_x[order]), d.train_y[order], params, lr=0.1,
                                mu=0.9, batch=32, epochs=EPOCHS)
    np.testing.assert_allclose(eager, [v for _, _, v in ref], rtol=1e-5, atol=1e-5)
    for e in range(EPOCHS):  # train_loss: the rows-weighted mean of the global batches' losses
        expect = (eager[2 * e] * 32 + eager[2 * e + 1] * 8) / 40
        assert eager_rec["epochs"][e]["train_loss"] == pytest.approx(expect, rel=1e-6)


def test_two_gpus_f32_equals_u8(two_gpus, tmp_path, data):
    """--transfer f32 holds memstrat's normalised floats, u8 divides on the device: the same
    values, so the same curve to rounding."""
    init = export_init(tmp_path / "init", LAYERS, n_train=40, batch=16, data=str(data))
    _, u8 = ddp_run(tmp_path, data, init, "eager")
    _, f32 = ddp_run(tmp_path, data, init, "graph", "--transfer", "f32")
    np.testing.assert_allclose(f32, u8, rtol=1e-5, atol=1e-6)


def test_two_gpus_curve_is_memstrats_emulation(two_gpus, memstrat_binary, tmp_path, data):
    """From memstrat's own export: the DDP curve equals memstrat's --emulate-gpus 2 curve (the
    reference of --gpus 2 --reduce exact) to rounding."""
    memstrat = memstrat_binary
    ms_init, ms_curve = tmp_path / "ms_init", tmp_path / "memstrat.csv"
    r = subprocess.run([str(memstrat), "train", "--strategy", "resident", "--scenario", "static",
                        "--emulate-gpus", "2", "--data", str(data), "--batch", "16", "--hidden",
                        "12", "--epochs", str(EPOCHS), "--lr", "0.1", "--momentum", "0.9",
                        "--export-init", str(ms_init), "--loss-curve", str(ms_curve)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    _, ours = ddp_run(tmp_path, data, ms_init, "graph")
    theirs = np.array([v for _, _, v in read_curve(ms_curve)])
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
