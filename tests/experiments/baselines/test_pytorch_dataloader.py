"""experiments/baselines/pytorch_dataloader.py on the CPU: options fail fast (no torch needed),
the loss curve does not depend on the loader settings, every batch of every epoch is memstrat's
stream data (checked against a numpy forward pass), and the record follows pytorch_mlp's
conventions. Tests that need torch skip cleanly without it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "experiments" / "baselines"
sys.path.insert(0, str(BASELINES))
import memstrat_inputs as mi  # noqa: E402
import memstrat_stream as ms  # noqa: E402
import pytorch_dataloader as dl  # noqa: E402
import pytorch_run as pr  # noqa: E402
# The synthetic data set, --export-init writer and curve reader of the pytorch_mlp tests: the
# same conventions, one implementation.
from test_pytorch_mlp import export_init, make_dataset, read_curve  # noqa: E402

LAYERS = [16, 12, 10]  # make_dataset's 4x4 images


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    t.set_num_threads(1)
    return t


@pytest.fixture
def data(tmp_path) -> Path:
    return make_dataset(tmp_path / "data", n_train=50)


def stream_init(d: Path, data: Path, seed: int = 3) -> Path:
    """An --export-init of memstrat's stream scenario: its epoch-1 order is the stream order."""
    export_init(d, LAYERS, n_train=50, seed=seed, order=ms.epoch_order(50, seed, 1),
                data=str(data))
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["scenario"] = "stream"
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def base_args(data: Path, *more: str) -> list[str]:
    return ["--data", str(data), "--device", "cpu", "--pin-memory", "off", "--batch", "16",
            "--hidden", "12", "-q", *more]


# ---------------------------------------------------------------------------------------------
# options (before torch)

@pytest.mark.parametrize("args, message", [
    (["--workers", "0", "--prefetch-factor", "2"], "--prefetch-factor needs --workers > 0"),
    (["--workers", "2", "--prefetch-factor", "0"], "--prefetch-factor must be >= 1"),
    (["--workers", "0", "--persistent-workers", "on"], "--persistent-workers on needs"),
    (["--workers", "-1"], "--workers must be >= 0"),
    (["--pin-memory", "on"], "--pin-memory on needs --device cuda"),
    (["--batch", "0"], "--batch must be > 0"),
])
def test_usage_errors(data, capsys, args, message):
    argv = ["--data", str(data), "--device", "cpu", "--pin-memory", "off", "--batch", "8", *args]
    code, rec = dl.run(argv)
    assert code == pr.EXIT_USAGE and rec is None
    assert message in capsys.readouterr().err


def test_bad_choices_are_argparse_errors(data, capsys):
    assert dl.run(["--data", str(data), "--augment", "medium"])[0] == pr.EXIT_USAGE
    assert dl.run(["--data", str(data), "--pin-memory", "maybe"])[0] == pr.EXIT_USAGE
    assert "expected on or off" in capsys.readouterr().err


def test_init_must_be_a_stream_export_with_the_stream_order(tmp_path, data, capsys):
    static = export_init(tmp_path / "static", LAYERS, n_train=50, data=str(data))
    assert dl.run(["--init", str(static), "--data", str(data), "--device", "cpu",
                   "--pin-memory", "off"])[0] == pr.EXIT_USAGE
    assert "stream/refresh scenario only" in capsys.readouterr().err
    wrong = stream_init(tmp_path / "wrong", data)
    np.asarray(mi.memstrat_static_order(50, 3), "<i4").tofile(wrong / "order_epoch1.i32")
    assert dl.run(["--init", str(wrong), "--data", str(data), "--device", "cpu",
                   "--pin-memory", "off"])[0] == pr.EXIT_USAGE
    assert "not the stream order of epoch 1" in capsys.readouterr().err


def test_help_runs():
    r = subprocess.run([sys.executable, str(BASELINES / "pytorch_dataloader.py"), "--help"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0
    for opt in ("--workers", "--pin-memory", "--prefetch-factor", "--persistent-workers",
                "--non-blocking", "--augment", "--fetch", "--init"):
        assert opt in r.stdout


# ---------------------------------------------------------------------------------------------
# training (torch, CPU)

def test_curve_is_the_same_whatever_the_loader_does(torch, tmp_path, data):
    init = stream_init(tmp_path / "init", data)
    curves = {}
    for name, extra in (("w0", ["--workers", "0"]),
                        ("w2", ["--workers", "2", "--prefetch-factor", "3"]),
                        ("w2-fresh", ["--workers", "2", "--persistent-workers", "off"]),
                        ("w2-batch", ["--workers", "2", "--fetch", "batch"]),
                        ("w0-u8", ["--workers", "0", "--transfer", "u8"])):
        curve = tmp_path / f"{name}.csv"
        code, rec = dl.run(["--init", str(init), "--data", str(data), "--device", "cpu",
                            "--pin-memory", "off", "--augment", "heavy", "--epochs", "3",
                            "--loss-curve", str(curve), "-q", *extra])
        assert code == 0, rec and rec.get("error")
        curves[name] = curve.read_text()
    assert len(read_curve(tmp_path / "w0.csv")) == 3 * 4  # 50 samples, batch 16
    assert len(set(curves.values())) == 1, "the loader settings changed the training"


def test_every_batch_is_memstrats_stream_data(torch, tmp_path, data):
    """With a learning rate far below the weights' precision the weights never change, so each
    batch's loss is the forward pass of the exported weights on that batch: computed here in
    float64 from memstrat_stream's data, for every batch of every epoch."""
    init = stream_init(tmp_path / "init", data)
    curve = tmp_path / "c.csv"
    code, _ = dl.run(["--init", str(init), "--data", str(data), "--device", "cpu",
                      "--pin-memory", "off", "--workers", "2", "--augment", "heavy",
                      "--epochs", "3", "--lr", "1e-30", "--momentum", "0",
                      "--loss-curve", str(curve), "-q"])
    assert code == 0
    st, m = mi.InitState(str(init), dl.SCENARIOS), mi.Mnist(data)
    (w0, b0), (w1, b1) = st.layer(0), st.layer(1)
    got = read_curve(curve)
    for epoch in (1, 2, 3):
        order = ms.epoch_order(50, 3, epoch)
        x = ms.augment("heavy", m.train_x[order].reshape(-1, 4, 4), 3, epoch, np.arange(50))
        x = mi.normalize(x.reshape(50, -1)).astype(np.float64)
        y = m.train_y[order]
        for b, lo in enumerate(range(0, 50, 16)):
            xb, yb = x[lo:lo + 16], y[lo:lo + 16]
            logits = np.maximum(xb @ w0 + b0, 0) @ w1 + b1
            mx = logits.max(1)
            loss = np.mean(mx + np.log(np.exp(logits - mx[:, None]).sum(1)) -
                           logits[np.arange(len(yb)), yb])
            e, bb, v = got[(epoch - 1) * 4 + b]
            assert (e, bb) == (epoch, b)
            assert v == pytest.approx(loss, rel=1e-6), (epoch, b)


def test_record_follows_the_baseline_conventions(torch, tmp_path, data, record_errors,
                                                 undeclared_keys):
    js = tmp_path / "r.jsonl"
    code, _ = dl.run(base_args(data, "--workers", "2", "--epochs", "3", "--json", str(js),
                               "--run-tag", "t", "--augment", "light"))
    assert code == 0
    rec = json.loads(js.read_text())
    # the schema, which also documents the loader's own keys (config, input waits)
    assert record_errors(rec) == []
    assert undeclared_keys(rec) == []
    # memstrat's environment, per-epoch, summary and final keys, so that analysis compares like
    # with like
    example = json.loads((REPO / "tests" / "experiments" / "fixtures" /
                          "run_record_ok.json").read_text())
    assert set(example["env"]) <= set(rec["env"])
    assert set(example["epochs"][0]) <= set(rec["epochs"][0])
    for part in ("summary", "final"):
        assert set(rec[part]) == set(example[part]), part
    cfg = rec["config"]
    assert cfg["strategy"] == "pytorch-dataloader" and cfg["scenario"] == "stream"
    assert (cfg["augment"], cfg["workers"], cfg["fetch"], cfg["pin_memory"],
            cfg["non_blocking"], cfg["prefetch_factor"], cfg["persistent_workers"]) == \
        ("light", 2, "sample", False, True, 2, True)
    assert cfg["order"] == "splitmix64-per-epoch" and cfg["run_tag"] == "t"
    for e in rec["epochs"]:
        assert 0 <= e["input_wait_first_ms"] <= e["input_wait_ms"] <= e["wall_ms"]
    assert rec["summary"]["steady_epochs"] == 2
    from analysis.records import validate_record
    validate_record(rec, "x")


def test_no_workers_means_the_loop_waits_for_all_loading(torch, tmp_path, data):
    code, rec = dl.run(base_args(data, "--workers", "0", "--epochs", "2", "--augment",
                                 "heavy"))
    assert code == 0
    assert rec["config"]["prefetch_factor"] is None and not rec["config"]["persistent_workers"]
    for e in rec["epochs"]:
        assert e["input_wait_ms"] > 0


def test_a_failing_run_writes_a_failed_record(torch, tmp_path, data, monkeypatch, capsys):
    def broken(*_):
        raise RuntimeError("loader broke")
    monkeypatch.setattr(dl, "make_loader", broken)
    js = tmp_path / "r.jsonl"
    code, rec = dl.run(base_args(data, "--workers", "0", "--json", str(js)))
    assert code == pr.EXIT_RUN_FAILED and rec["status"] == "failed"
    assert "loader broke" in json.loads(js.read_text())["error"]
    assert "run failed" in capsys.readouterr().err
