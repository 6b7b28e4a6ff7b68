"""Self-tests of the PyTorch baseline (experiments/baselines/pytorch_mlp.py) and of
experiments/baselines/benchmark_vs_pytorch.py (CPU only).

    python3 -m pytest -q tests/experiments/baselines/test_pytorch_mlp.py

Tests that need torch skip cleanly without it. The semantics (1/batch mean, momentum form,
the [in x out] weight layout that must be transposed into torch's Linear) are pinned down
by comparing the baseline with a float64 numpy reference of the same training.
"""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BASELINES = REPO / "experiments" / "baselines"
sys.path.insert(0, str(BASELINES))
import baseline_record as br  # noqa: E402
import memstrat_inputs as mi  # noqa: E402
import pytorch_mlp as pm  # noqa: E402
import pytorch_run as pr  # noqa: E402


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    t.set_num_threads(1)  # small CPU problems: threads only contend
    return t


# ---------------------------------------------------------------------------------------------
# a numpy reference of memstrat's training

def numpy_reference_train(x, y, params, lr, mu, batch, epochs, dtype=np.float64):
    """Per-batch forward losses [(epoch, batch, loss)] of memstrat's training: Linear layers
    (W [in x out], b [out]) with ReLU between, mean softmax cross-entropy over the batch's
    rows, SGD with momentum v = mu*v + g; p -= lr*v. x is already in epoch order."""
    Ws = [np.array(w, dtype=dtype) for w, _ in params]
    bs = [np.array(b, dtype=dtype) for _, b in params]
    vW = [np.zeros_like(w) for w in Ws]
    vb = [np.zeros_like(b) for b in bs]
    L, n, out = len(Ws), len(y), []
    for e in range(1, epochs + 1):
        for bi, lo in enumerate(range(0, n, batch)):
            hi = min(lo + batch, n)
            rows = hi - lo
            h, hs, zs = np.asarray(x[lo:hi], dtype=dtype), [], []
            for l in range(L):
                hs.append(h)
                z = h @ Ws[l] + bs[l]
                zs.append(z)
                h = np.maximum(z, 0) if l + 1 < L else z
            r = np.arange(rows)
            m = h.max(1, keepdims=True)
            ex = np.exp(h - m)
            s = ex.sum(1, keepdims=True)
            losses = m[:, 0] + np.log(s[:, 0]) - h[r, y[lo:hi]]
            out.append((e, bi, float(losses.mean())))
            dz = ex / s
            dz[r, y[lo:hi]] -= 1
            dz /= rows
            for l in reversed(range(L)):
                gW, gb = hs[l].T @ dz, dz.sum(0)
                if l > 0:
                    dz = (dz @ Ws[l].T) * (zs[l - 1] > 0)
                vW[l] = mu * vW[l] + gW
                vb[l] = mu * vb[l] + gb
                Ws[l] -= lr * vW[l]
                bs[l] -= lr * vb[l]
    return out


# ---------------------------------------------------------------------------------------------
# synthetic data + an exported init like memstrat's

def write_idx(path: Path, arr: np.ndarray, gz: bool = True) -> None:
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    data = head + arr.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def make_dataset(d: Path, n_train=50, n_test=20, side=4, seed=0) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    write_idx(d / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (n_train, side, side)))
    write_idx(d / "train-labels-idx1-ubyte.gz", rng.integers(0, 10, n_train))
    write_idx(d / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (n_test, side, side)))
    write_idx(d / "t10k-labels-idx1-ubyte", rng.integers(0, 10, n_test), gz=False)
    return d


def export_init(d: Path, layers, n_train, seed=3, lr=0.1, momentum=0.9, batch=16,
                order=None, data="") -> Path:
    """What `memstrat train --export-init d` writes (memstrat's layout: W [in x out])."""
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    flat, entries, off = [], [], 0
    for i, o in zip(layers[:-1], layers[1:]):
        w = rng.normal(0, np.sqrt(2.0 / i), (i, o)).astype(np.float32)
        b = rng.normal(0, 0.1, o).astype(np.float32)  # nonzero: tests the bias path
        entries.append({"weight_offset": off, "bias_offset": off + i * o})
        flat += [w.ravel(), b]
        off += i * o + o
    np.concatenate(flat).astype("<f4").tofile(d / "init_params.f32")
    if order is None:
        order = mi.memstrat_static_order(n_train, seed)
    np.asarray(order, dtype="<i4").tofile(d / "order_epoch1.i32")
    (d / "manifest.json").write_text(json.dumps({
        "layers": layers, "params": entries, "param_count": off, "seed": seed, "lr": lr,
        "momentum": momentum, "batch": batch, "scenario": "static", "dataset": data,
        "train_samples": n_train, "test_samples": 0}, indent=2))
    return d


def read_curve(path: Path) -> list[tuple[int, int, float]]:
    lines = path.read_text().splitlines()
    assert lines[0] == "epoch,batch,loss"
    return [(int(e), int(b), float(v)) for e, b, v in (ln.split(",") for ln in lines[1:])]


# ---------------------------------------------------------------------------------------------
# IDX reader and data

def test_read_idx_gz_and_raw(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a.gz", a)
    write_idx(tmp_path / "a", a, gz=False)
    for p in ("a.gz", "a"):
        got = mi.read_idx(tmp_path / p)
        assert got.dtype == np.uint8 and got.shape == (2, 3, 4) and np.array_equal(got, a)


def test_read_idx_big_endian_int32(tmp_path):
    v = np.array([1, -2, 70000], dtype=">i4")
    (tmp_path / "i").write_bytes(bytes([0, 0, 0x0C, 1]) + (3).to_bytes(4, "big") + v.tobytes())
    got = mi.read_idx(tmp_path / "i")
    assert got.tolist() == [1, -2, 70000] and got.dtype.isnative


@pytest.mark.parametrize("raw, message", [
    (b"\x00", "too short"),
    (b"\x01\x00\x08\x01" + (1).to_bytes(4, "big") + b"\x00", "not an IDX file"),
    (b"\x00\x00\x07\x01" + (1).to_bytes(4, "big") + b"\x00", "unknown IDX element type"),
    (b"\x00\x00\x08\x02" + (1).to_bytes(4, "big"), "truncated IDX header"),
    (b"\x00\x00\x08\x01" + (5).to_bytes(4, "big") + b"\x00\x00", "payload is 2 bytes"),
    (b"\x00\x00\x08\x01" + (1).to_bytes(4, "big") + b"\x00\x00", "payload is 2 bytes"),
])
def test_read_idx_rejects_bad_files(tmp_path, raw, message):
    (tmp_path / "bad").write_bytes(raw)
    with pytest.raises(mi.UsageError, match=message):
        mi.read_idx(tmp_path / "bad")


def test_read_idx_rejects_corrupt_gzip(tmp_path):
    (tmp_path / "x.gz").write_bytes(b"not gzip at all")
    with pytest.raises(mi.UsageError, match="cannot read"):
        mi.read_idx(tmp_path / "x.gz")


def test_mnist_loader_and_truncate(tmp_path):
    d = make_dataset(tmp_path / "m")
    m = mi.Mnist(d)
    assert m.train_x.shape == (50, 16) and m.test_x.shape == (20, 16) and m.features == 16
    assert m.train_y.dtype == np.int64 and m.name == "mnist"
    m.truncate(10, 0)
    assert len(m.train_y) == 10 and len(m.test_y) == 20


def test_mnist_loader_rejects_bad_labels(tmp_path):
    d = make_dataset(tmp_path / "m")
    write_idx(d / "train-labels-idx1-ubyte.gz", np.full(50, 10))
    with pytest.raises(mi.UsageError, match="label 10"):
        mi.Mnist(d)


def test_normalize_is_float_division():
    px = np.arange(256, dtype=np.uint8)
    expected = np.array([np.float32(v) / np.float32(255.0) for v in range(256)], np.float32)
    assert np.array_equal(mi.normalize(px), expected)


# ---------------------------------------------------------------------------------------------
# memstrat's order

def test_order_matches_memstrat():
    # First elements of memstrat's EpochWriter(...).order(1) (static scenario), printed by
    # memory_strategies/epoch_data.cpp compiled against a synthetic HostDataset.
    assert mi.memstrat_static_order(60000, 1)[:5].tolist() == [41975, 6637, 19991, 28417, 39330]
    assert mi.memstrat_static_order(1000, 7)[:5].tolist() == [594, 553, 192, 850, 523]
    o = mi.memstrat_static_order(1000, 7)
    assert o.dtype == np.int32 and sorted(o.tolist()) == list(range(1000))


# ---------------------------------------------------------------------------------------------
# the baseline against the numpy reference

LAYERS = [16, 12, 10]  # non-square: a missing transpose cannot go unnoticed


@pytest.fixture
def setup(tmp_path):
    data = make_dataset(tmp_path / "data")
    init = export_init(tmp_path / "init", LAYERS, n_train=50, data=str(data))
    return tmp_path, data, init


def reference_curve(data: Path, init: Path, epochs: int):
    st = mi.InitState(str(init))
    m = mi.Mnist(data)
    x = mi.normalize(m.train_x)[st.order]
    y = m.train_y[st.order]
    params = [st.layer(l) for l in range(len(st.layers) - 1)]
    man = st.manifest
    return numpy_reference_train(x, y, params, man["lr"], man["momentum"], man["batch"], epochs)


@pytest.mark.parametrize("mode", ["resident", "pageable"])
@pytest.mark.parametrize("transfer", ["f32", "u8"])
def test_baseline_matches_numpy_reference(torch, setup, mode, transfer):
    tmp, data, init = setup
    curve, js = tmp / "curve.csv", tmp / "r.jsonl"
    code, rec = pm.run(["--init", str(init), "--data", str(data), "--device", "cpu", "--mode",
                        mode, "--transfer", transfer, "--epochs", "3", "--loss-curve",
                        str(curve), "--json", str(js), "--quiet"])
    assert code == 0, rec
    got = read_curve(curve)
    ref = reference_curve(data, init, 3)
    # 50 samples, batch 16: batches of 16, 16, 16 and a partial one of 2 rows, 3 epochs.
    assert [(e, b) for e, b, _ in got] == [(e, b) for e, b, _ in ref] and len(got) == 12
    for (e, b, g), (_, _, r) in zip(got, ref):
        assert abs(g - r) <= 1e-5 * max(1.0, abs(r)), (e, b, g, r)
    # train_loss = mean over the epoch's samples of the forward losses (rows-weighted).
    rows = [16, 16, 16, 2]
    for ep in (1, 2, 3):
        losses = [r for e, _, r in ref if e == ep]
        expect = sum(l * n for l, n in zip(losses, rows)) / 50
        assert rec["epochs"][ep - 1]["train_loss"] == pytest.approx(expect, rel=1e-5)
    assert js.read_text().count("\n") == 1


def test_reference_is_sensitive_to_the_semantics(setup):
    """The comparison above would catch the usual mistakes (so it pins the semantics)."""
    _, data, init = setup
    st, m = mi.InitState(str(init)), mi.Mnist(data)
    x, y = mi.normalize(m.train_x)[st.order], m.train_y[st.order]
    params = [st.layer(l) for l in range(2)]
    good = [v for *_, v in numpy_reference_train(x, y, params, 0.1, 0.9, 16, 2)]
    untransposed = [(w.reshape(w.shape[1], w.shape[0]).T, b) for w, b in params]
    for bad in (numpy_reference_train(x, y, untransposed, 0.1, 0.9, 16, 2),   # layout
                numpy_reference_train(x, y, params, 0.1 * 16, 0.9, 16, 2),  # sum, not mean
                numpy_reference_train(x, y, params, 0.1, 0.0, 16, 2),       # no momentum
                numpy_reference_train(x, y, params, 0.1 * 0.1, 0.9, 16, 2)):  # dampening-ish
        assert max(abs(a - b) for a, (*_, b) in zip(good, bad)) > 1e-3


def test_first_batch_loss_is_forward_of_the_exported_weights(torch, setup):
    tmp, data, init = setup
    curve = tmp / "c.csv"
    assert pm.run(["--init", str(init), "--data", str(data), "--device", "cpu", "--epochs", "1",
                   "--loss-curve", str(curve), "-q"])[0] == 0
    st, m = mi.InitState(str(init)), mi.Mnist(data)
    x = mi.normalize(m.train_x)[st.order][:16].astype(np.float64)
    (w0, b0), (w1, b1) = st.layer(0), st.layer(1)
    logits = np.maximum(x @ w0 + b0, 0) @ w1 + b1
    y = m.train_y[st.order][:16]
    mx = logits.max(1)
    loss = np.mean(mx + np.log(np.exp(logits - mx[:, None]).sum(1)) - logits[np.arange(16), y])
    assert read_curve(curve)[0][2] == pytest.approx(loss, rel=1e-6)


def test_without_init_uses_memstrats_order_and_he_init(torch, tmp_path):
    data = make_dataset(tmp_path / "d")
    code, rec = pm.run(["--data", str(data), "--device", "cpu", "--epochs", "2", "--batch", "8",
                        "--hidden", "12,6", "--seed", "5", "-q"])
    assert code == 0
    assert rec["config"]["order"] == "splitmix64" and rec["config"]["hidden"] == [12, 6]
    # Deterministic: the same seed gives the same run.
    code2, rec2 = pm.run(["--data", str(data), "--device", "cpu", "--epochs", "2", "--batch",
                          "8", "--hidden", "12,6", "--seed", "5", "-q"])
    assert [e["train_loss"] for e in rec["epochs"]] == [e["train_loss"] for e in rec2["epochs"]]


# ---------------------------------------------------------------------------------------------
# the record

def test_record_follows_the_schema(torch, setup, record_errors, undeclared_keys):
    tmp, data, init = setup
    js = tmp / "r.jsonl"
    code, _ = pm.run(["--init", str(init), "--data", str(data), "--device", "cpu", "--epochs",
                      "3", "--json", str(js), "--run-tag", "t1", "-q"])
    assert code == 0
    rec = json.loads(js.read_text())
    assert record_errors(rec) == []
    assert undeclared_keys(rec) == []  # the schema documents the baseline's own keys too
    # memstrat's per-epoch, summary and final keys, so that analysis compares like with like
    example = json.loads((REPO / "tests" / "experiments" / "fixtures" /
                          "run_record_ok.json").read_text())
    assert set(rec["epochs"][0]) == set(example["epochs"][0])
    for part in ("summary", "final"):
        assert set(rec[part]) == set(example[part]), part
    assert rec["schema_version"] == 1 and rec["status"] == "ok"
    assert rec["config"]["strategy"] == "pytorch-resident"
    assert rec["config"]["framework"] == "pytorch" and rec["config"]["run_tag"] == "t1"
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", rec["run_id"])
    assert rec["summary"]["steady_epochs"] == 2
    walls = sorted(e["wall_ms"] for e in rec["epochs"][1:])
    assert rec["summary"]["wall_ms_median"] == pytest.approx(sum(walls) / 2)
    for e in rec["epochs"]:
        assert e["copy_ms"] is None and e["api_calls"] is None and e["um_gpu_faults"] is None
        assert e["train_acc"] is None  # not counted without --train-acc
    from analysis.records import validate_record
    validate_record(rec, "x")


def test_train_acc_flag(torch, setup):
    tmp, data, init = setup
    code, rec = pm.run(["--init", str(init), "--data", str(data), "--device", "cpu",
                        "--epochs", "1", "--train-acc", "-q"])
    assert code == 0 and 0.0 <= rec["epochs"][0]["train_acc"] <= 1.0


def test_spread_matches_memstrat():
    s = br.spread([4.0, 1.0, 3.0, 2.0])
    assert (s["min"], s["max"], s["median"], s["p25"], s["p75"]) == (1.0, 4.0, 2.5, 1.75, 3.25)


# ---------------------------------------------------------------------------------------------
# options fail fast, before torch

@pytest.mark.parametrize("args, message", [
    (["--mode", "pinned", "--device", "cpu"], "pinned needs --device cuda"),
    (["--hidden", "12,x"], "--hidden"),
    (["--batch", "0"], "--batch must be > 0"),
    (["--batch", "51"], "larger than the training set"),
    (["--json", "/nonexistent-dir/r.jsonl"], "--json: cannot open"),
])
def test_usage_errors(tmp_path, capsys, args, message):
    data = make_dataset(tmp_path / "d")
    base = [] if "--batch" in args else ["--batch", "8"]
    code, rec = pm.run(["--data", str(data), *base, *args])
    assert code == pr.EXIT_USAGE and rec is None
    assert message in capsys.readouterr().err


def test_init_mismatches_are_usage_errors(tmp_path, capsys):
    data = make_dataset(tmp_path / "d")
    init = export_init(tmp_path / "i", LAYERS, n_train=50)
    assert pm.run(["--init", str(init), "--data", str(data), "--hidden", "99"])[0] == 2
    assert "differs from --init" in capsys.readouterr().err
    assert pm.run(["--init", str(init), "--data", str(data), "--train-samples", "40"])[0] == 2
    assert "--init order has 50 samples" in capsys.readouterr().err
    bad = export_init(tmp_path / "b", LAYERS, n_train=50, order=np.zeros(50, np.int32))
    assert pm.run(["--init", str(bad), "--data", str(data)])[0] == 2
    assert "not a permutation" in capsys.readouterr().err
    (init / "init_params.f32").write_bytes(b"\0" * 8)
    assert pm.run(["--init", str(init), "--data", str(data)])[0] == 2
    assert "the manifest says" in capsys.readouterr().err


def test_help_runs():
    r = subprocess.run([sys.executable, str(BASELINES / "pytorch_mlp.py"), "--help"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "--mode" in r.stdout and "--init" in r.stdout


# ---------------------------------------------------------------------------------------------
# the benchmark script, end to end on the CPU with a stand-in for the memstrat binary

FAKE_MEMSTRAT = r'''#!{python}
"""Stand-in for build/memstrat: numpy float32 training (a different fp32 implementation
from torch's), with memstrat's CLI surface as the benchmark uses it."""
import argparse, json, sys, time, uuid
import numpy as np
sys.path[:0] = [{baselines!r}, {here!r}]
import baseline_record as br
import memstrat_inputs as mi
from test_pytorch_mlp import numpy_reference_train
if sys.argv[1] == "list":
    print("resident x\npageable x\npinned x\ndouble-buffer x\nzero-copy x"); sys.exit(0)
p = argparse.ArgumentParser()
for o in ("--strategy", "--transfer", "--graphs", "--data", "--json", "--run-tag", "--gemm",
          "--export-init", "--loss-curve"):
    p.add_argument(o)
for o in ("--batch", "--hidden", "--epochs", "--train-samples", "--test-samples"):
    p.add_argument(o, type=int, default=0)
p.add_argument("--quiet", action="store_true"); p.add_argument("--no-profile", action="store_true")
a = p.parse_args(sys.argv[2:])
m = mi.Mnist(mi.resolve_data_dir(a.data)); m.truncate(a.train_samples, a.test_samples)
n = len(m.train_y); layers = [m.features, a.hidden, 10]
rng = np.random.default_rng(1)
params = [(rng.normal(0, np.sqrt(2 / i), (i, o)).astype(np.float32), np.zeros(o, np.float32))
          for i, o in zip(layers[:-1], layers[1:])]
order = mi.memstrat_static_order(n, 1)
if a.export_init:
    import pathlib; d = pathlib.Path(a.export_init); d.mkdir(parents=True, exist_ok=True)
    np.concatenate([t.ravel() for w, b in params for t in (w, b)]).tofile(d / "init_params.f32")
    order.astype("<i4").tofile(d / "order_epoch1.i32")
    offs, off = [], 0
    for i, o in zip(layers[:-1], layers[1:]):
        offs.append({{"weight_offset": off, "bias_offset": off + i * o}}); off += i * o + o
    (d / "manifest.json").write_text(json.dumps({{"layers": layers, "params": offs,
        "param_count": off, "seed": 1, "lr": 0.05, "momentum": 0.9, "batch": a.batch,
        "scenario": "static", "dataset": str(a.data), "train_samples": n, "test_samples": 0}}))
x = mi.normalize(m.train_x)[order]; y = m.train_y[order]
t0 = time.perf_counter()
curve = numpy_reference_train(x, y, params, 0.05, 0.9, a.batch, a.epochs, dtype=np.float32)
per = (time.perf_counter() - t0) * 1000 / a.epochs
if a.loss_curve:
    with open(a.loss_curve, "w") as f:
        f.write("epoch,batch,loss\n")
        f.writelines(f"{{e}},{{b}},{{v:.9g}}\n" for e, b, v in curve)
eps = [{{"epoch": e, "wall_ms": per * (1.5 if e == 1 else 1), "gpu_ms": per}}
       for e in range(1, a.epochs + 1)]
rec = {{"schema_version": 1, "run_id": uuid.uuid4().hex, "started_at": "x", "status": "ok",
       "env": {{"gpu_name": "Fake GPU", "git_sha": "abc"}},
       "config": {{"strategy": a.strategy, "transfer": a.transfer, "batch": a.batch,
                  "hidden": [a.hidden], "epochs": a.epochs, "run_tag": a.run_tag}},
       "epochs": eps, "summary": br.summary_json(eps, n),
       "final": {{"test_acc": 0.5, "test_loss": 1.0}}}}
br.append_jsonl(a.json, rec)
print("summary: fake")
'''


def test_benchmark_end_to_end_on_cpu(torch, tmp_path):
    import benchmark_vs_pytorch as bench
    import process_runs as pr
    fake = tmp_path / "memstrat"
    fake.write_text(FAKE_MEMSTRAT.format(python=sys.executable, here=str(HERE), baselines=str(BASELINES)))
    fake.chmod(0o755)
    data = REPO / "data" / "mnist"
    if not (data / "train-images-idx3-ubyte.gz").is_file():
        data = make_dataset(tmp_path / "data", n_train=600, n_test=100, side=28)
    out = tmp_path / "out"
    argv = ["--memstrat", str(fake), "--data", str(data), "--batches", "64,256",
            "--hiddens", "32", "--epochs", "2", "--transfers", "f32", "--curve-hiddens", "32",
            "--train-samples", "512", "--test-samples", "100", "--pytorch-device", "cpu",
            "--repeats", "1", "--out-dir", str(out)]
    code = bench.main(argv)
    md = (out / "benchmark.md").read_text()
    # pinned needs CUDA, so the PyTorch pinned runs fail on the CPU: exit 3, table still there.
    assert code == bench.EXIT_RUNS_FAILED, md
    assert "| 64 | 32 | 2 | resident | f32 |" in md
    assert "| 256 | 32 | 2 | pageable | f32 |" in md
    # option errors write no record (as memstrat's): the report names the runs without one
    assert "- vs-pytorch-pytorch-pinned-b64-h32-e2-r0: no record written" in md
    assert re.search(r"\| 32 \| 2 \| [0-9.]+ \| .* \| agree \|", md), md
    recs = pr.read_records([out / "records.jsonl"])
    kinds = {r["config"]["strategy"] for r in pr.run_records(recs)}
    assert {"resident", "pinned", "double-buffer", "pageable", "pytorch-resident",
            "pytorch-pageable"} <= kinds
    # 2 configs x (4 memstrat + 2 PyTorch that can run on the CPU) + curve (1 + 1) run records,
    # the plan record and the curve check's record
    assert len(pr.run_records(recs)) == 14 and len(recs) == 16
    a = bench.read_curve(out / "curves" / "h32_b256" / "memstrat.csv")
    b = bench.read_curve(out / "curves" / "h32_b256" / "pytorch.csv")
    assert len(a) == len(b) == 2  # 512 samples / 256


def test_compare_curves_and_tolerance_logic():
    import benchmark_vs_pytorch as bench
    a = {(1, 0): 2.30, (1, 1): 2.00, (1, 2): 1.50}
    b = {(1, 0): 2.30 + 2.3e-7, (1, 1): 2.00005, (1, 2): 1.499}
    c = bench.compare_curves(a, b, early=2)
    assert c.batches == 3 and c.max_abs == pytest.approx(1e-3) and c.max_abs_at == (1, 2)
    assert c.first_rel == pytest.approx(1e-7, rel=1e-3)
    assert c.last_abs == pytest.approx(1e-3)
    assert c.early_batches == 2 and c.early_max_abs == pytest.approx(5e-5)
    assert bench.compare_curves(a, b, early=1).early_max_abs == pytest.approx(2.3e-7)
    text, ok = bench.curve_markdown([(256, c, "", {})], bench.Tolerance(early=2), 256)
    assert ok and "agree" in text and "1e-05" in text
    for tol in (bench.Tolerance(atol=1e-4, early=2), bench.Tolerance(early_atol=1e-5, early=2),
                bench.Tolerance(first_rtol=1e-8, early=2)):
        text, ok = bench.curve_markdown([(256, c, "", {})], tol, 256)
        assert not ok and "DIFFER" in text
    text, ok = bench.curve_markdown([(1024, None, "memstrat: exit 1", {})], bench.Tolerance(),
                                    256)
    assert not ok and "FAILED: memstrat: exit 1" in text
    with pytest.raises(ValueError, match="different batches"):
        bench.compare_curves(a, {(1, 0): 1.0})


def test_benchmark_help_and_dry_run(tmp_path):
    r = subprocess.run([sys.executable, str(BASELINES / "benchmark_vs_pytorch.py"),
                        "--help"], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "--quick" in r.stdout
    data = make_dataset(tmp_path / "d")
    r = subprocess.run([sys.executable, str(BASELINES / "benchmark_vs_pytorch.py"),
                        "--dry-run", "--data", str(data), "--skip", "8:1024"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "7 configurations" in r.stdout
    assert "left out (--skip): batch 8 hidden 1024" in r.stdout


@pytest.mark.parametrize("line, release", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
     "(dvs-builder@U22-I3-AE18-23-3)  Thu Jul 31 20:18:43 UTC 2025", "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
     "535.104.05"),
    ("", None),
])
def test_driver_release_is_the_kernel_modules_version_number(line, release):
    # The open kernel module's line has "for x86_64" after "Kernel Module": the release is the
    # version number, not the next word.
    assert br.driver_release(line) == release


def test_machine_identity_as_memstrat_records_it(monkeypatch, tmp_path):
    """gpu_uuid in nvidia-smi's form from torch's UUID (object or text, with or without the
    prefix); boot_id the boot_id file's line, null without one."""
    import uuid
    u = uuid.UUID("8f2a01c3-4d5e-6f70-8192-a3b4c5d6e7f8")
    for given in (u, str(u), "GPU-8F2A01C3-4D5E-6F70-8192-A3B4C5D6E7F8"):
        assert br.gpu_uuid(given) == "GPU-8f2a01c3-4d5e-6f70-8192-a3b4c5d6e7f8"
    assert br.gpu_uuid(None) is None
    f = tmp_path / "boot_id"
    f.write_text("6f1c1f7e-2f5d-4b8e-9a53-0c7d1e2a3b4c\n")
    monkeypatch.setattr(br, "BOOT_ID", str(f))
    env = br.common_environment("pytorch", "cpu")
    assert env["boot_id"] == "6f1c1f7e-2f5d-4b8e-9a53-0c7d1e2a3b4c"
    assert env["gpu_uuid"] is None
    monkeypatch.setattr(br, "BOOT_ID", str(tmp_path / "absent"))
    assert br.common_environment("pytorch", "cpu")["boot_id"] is None


def test_git_revision_takes_the_environment_over_the_checkout(monkeypatch):
    monkeypatch.setenv("MEMSTRAT_GIT_SHA", "f00dfeedbeef")
    monkeypatch.setenv("MEMSTRAT_GIT_DIRTY", "0")
    assert br.git_revision() == ("f00dfeedbeef", False)
    monkeypatch.setenv("MEMSTRAT_GIT_DIRTY", "1")
    assert br.git_revision() == ("f00dfeedbeef", True)
    monkeypatch.delenv("MEMSTRAT_GIT_DIRTY")
    assert br.git_revision() == ("f00dfeedbeef", False)
    # Without it: the checkout's own commit, as `git rev-parse` names it.
    monkeypatch.delenv("MEMSTRAT_GIT_SHA")
    head = subprocess.run(["git", "-C", str(BASELINES), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()
    assert br.git_revision()[0] == (head or "unknown")
