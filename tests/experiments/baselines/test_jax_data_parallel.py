"""The JAX data-parallel anchor of `memstrat train --gpus N` (experiments/baselines/
jax_data_parallel.py).

    python3 -m pytest -q tests/experiments/baselines/test_jax_data_parallel.py

Everywhere: which rows each GPU takes (the full global batches, the padded and weighted last
one), and the exit codes and messages of bad options, which come before jax is imported (the
script runs with jax made unimportable, or with a stand-in that answers only the device
questions). With jax installed (skipped otherwise): the real shard_map + psum epoch on 2 CPU
devices (XLA_FLAGS=--xla_force_host_platform_device_count=2, in a process of its own), its loss
curve against a float64 numpy reference of the same data-parallel step and against the same code
on 1 device at the global batch, and its record against the schema. On 2 CUDA GPUs with a CUDA
jax: the script end to end.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "experiments" / "baselines"
SCRIPT = BASELINES / "jax_data_parallel.py"
sys.path.insert(0, str(BASELINES))
import ddp_plan as dp  # noqa: E402
import jax_data_parallel as jdp  # noqa: E402
import memstrat_inputs as mi  # noqa: E402
from data_parallel_cases import BAD_OPTIONS  # noqa: E402
from test_pytorch_mlp import export_init, make_dataset, read_curve  # noqa: E402

# the single-GPU anchors' tolerance against the float64 reference (test_pytorch_mlp.py)
TOL = 1e-5
# runs the script with `import jax` failing, as where jax is not installed
NO_JAX = ("import runpy, sys; sys.modules['jax'] = None; sys.argv = sys.argv[1:]; "
          "runpy.run_path(sys.argv[0], run_name='__main__')")
HAS_JAX = importlib.util.find_spec("jax") is not None
LAYERS = [16, 12, 10]
EPOCHS = 3


def cli(*args: str, nvls: str | None = "0", no_jax: bool = True, extra_env=None,
        timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NCCL_NVLS_ENABLE"}
    if nvls is not None:
        env["NCCL_NVLS_ENABLE"] = nvls
    env.update(extra_env or {})
    cmd = [sys.executable, "-c", NO_JAX, str(SCRIPT)] if no_jax else [sys.executable, str(SCRIPT)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


@pytest.fixture
def data(tmp_path) -> Path:
    return make_dataset(tmp_path / "mnist", n_train=40, n_test=20)


# ---------------------------------------------------------------------------------------------
# which rows each GPU takes

@pytest.mark.parametrize("n, B, N", [(40, 16, 2), (50, 16, 2), (11, 3, 3), (8, 2, 2), (3, 4, 2),
                                     (29, 4, 4)])
def test_layout_is_memstrats_shards(n, B, N):
    """full[g, r] is shard r of global batch g; the last global batch's shards padded to B rows,
    weighted 1/R on the rows they hold and 0 on the padding; every row once, in order."""
    order = np.random.default_rng(n).permutation(n).astype(np.int32)
    lay = jdp.Layout(order, B, N)
    G, F = dp.global_batches(n, B, N), dp.full_global_batches(n, B, N)
    assert lay.full.shape == (F, N, B) and lay.global_batches == G
    assert list(lay.rows) == [dp.global_rows(n, B, N, g) for g in range(G)]
    taken = list(lay.full.reshape(-1))
    if F < G:
        R = dp.global_rows(n, B, N, G - 1)
        assert lay.last_rows.shape == lay.last_weight.shape == (N, B)
        for r in range(N):
            s = dp.shard(n, B, N, G - 1, r)
            assert list(lay.last_rows[r, :s.rows]) == list(order[s.first:s.first + s.rows])
            assert np.all(lay.last_rows[r, s.rows:] == 0)  # padding: a valid row, weight 0
            np.testing.assert_array_equal(lay.last_weight[r, :s.rows], np.float32(1 / R))
            assert np.all(lay.last_weight[r, s.rows:] == 0)
            taken += list(lay.last_rows[r, :s.rows])
        assert lay.last_weight.sum(dtype=np.float64) == pytest.approx(1.0, rel=1e-6)
    else:
        assert lay.last_rows is None and lay.last_weight is None
    assert taken == list(order)


# ---------------------------------------------------------------------------------------------
# the command line, before jax

def test_help_names_the_api_and_nvls():
    r = cli("--help")
    assert r.returncode == 0, r.stderr
    assert "NCCL_NVLS_ENABLE=0" in r.stdout and "--gpus" in r.stdout
    assert "shard_map" in r.stdout and "lax.psum" in r.stdout


@pytest.mark.parametrize("args, message", BAD_OPTIONS)
def test_bad_options_exit_2_before_jax(data, args, message):
    r = cli("--data", str(data), "--batch", "16", *args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "JAX is not installed" not in r.stderr


@pytest.mark.parametrize("args", [["--step", "graph"], ["--transfer", "f16"], ["--gpus", "x"]])
def test_argparse_errors_exit_2(data, args):
    r = cli("--data", str(data), *args)
    assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.parametrize("nvls", [None, "1"])
def test_nvls_must_be_off(data, nvls):
    r = cli("--data", str(data), nvls=nvls)
    assert r.returncode == 2 and "NCCL_NVLS_ENABLE=0" in r.stderr


def test_a_stream_export_is_refused(tmp_path, data):
    init = export_init(tmp_path / "init", LAYERS, n_train=40, data=str(data))
    manifest = json.loads((init / "manifest.json").read_text())
    (init / "manifest.json").write_text(json.dumps({**manifest, "scenario": "stream"}))
    r = cli("--init", str(init), "--data", str(data))
    assert r.returncode == 2 and "static scenario only" in r.stderr


def test_good_options_without_jax_exit_3(data):
    r = cli("--data", str(data), "--gpus", "2", "--batch", "16", "--hidden", "12")
    assert r.returncode == 3 and "JAX is not installed" in r.stderr


FAKE_JAX = textwrap.dedent('''\
    """A jax that answers only what the checks before any device work ask."""
    import types
    config = types.SimpleNamespace(update=lambda *a, **k: None)
    GPUS = {gpus}

    def devices(kind=None):
        if kind == "gpu":
            if GPUS is None:
                raise RuntimeError("Unknown backend: 'gpu' requested, but no platforms are "
                                   "instances of gpu")
            return ["gpu%d" % i for i in range(GPUS)]
        return ["cpu0"]
    ''')


@pytest.mark.parametrize("gpus, args, message", [
    (None, [], "jax sees no GPU"),
    (0, [], "jax sees no GPU"),
    (1, [], "1 GPU visible to jax; this needs at least 2"),
    (2, ["--gpus", "3"], "--gpus 3, but only 2 GPUs are visible to jax"),
])
def test_too_few_gpus_exit_3_before_any_device_work(tmp_path, data, gpus, args, message):
    fake = tmp_path / "fake" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_JAX.format(gpus=gpus))
    r = cli("--data", str(data), "--batch", "16", *args, no_jax=False,
            extra_env={"PYTHONPATH": str(fake.parent)})
    assert r.returncode == 3, r.stdout + r.stderr
    assert message in r.stderr


# ---------------------------------------------------------------------------------------------
# the float64 reference of the data-parallel step

def data_parallel_reference(x, y, params, lr, mu, batch, gpus, epochs, grad_scale=1.0,
                            shard_means=False):
    """Per global batch: its mean loss, with each shard's gradient computed on its own rows
    (rows-weighted by 1/R) and the N shards' gradients summed, then SGD with momentum
    (v = mu*v + g; p -= lr*v); float64. x, y in epoch order. grad_scale and shard_means make the
    wrong steps the tests must tell apart (a sum counted twice; the N shards' means averaged, which
    is wrong where the last global batch's shards are unequal or empty)."""
    Ws = [np.array(w, np.float64) for w, _ in params]
    bs = [np.array(b, np.float64) for _, b in params]
    vW, vb = [np.zeros_like(w) for w in Ws], [np.zeros_like(b) for b in bs]
    n, L, out = len(y), len(Ws), []
    for e in range(1, epochs + 1):
        for g in range(dp.global_batches(n, batch, gpus)):
            R = dp.global_rows(n, batch, gpus, g)
            gW, gb = [np.zeros_like(w) for w in Ws], [np.zeros_like(b) for b in bs]
            loss = 0.0
            for r in range(gpus):
                s = dp.shard(n, batch, gpus, g, r)
                if s.rows == 0:
                    continue
                scale = 1.0 / (s.rows * gpus) if shard_means else 1.0 / R
                h, hs, zs = np.asarray(x[s.first:s.first + s.rows], np.float64), [], []
                for l in range(L):
                    hs.append(h)
                    z = h @ Ws[l] + bs[l]
                    zs.append(z)
                    h = np.maximum(z, 0) if l + 1 < L else z
                yy, i = y[s.first:s.first + s.rows], np.arange(s.rows)
                m = h.max(1, keepdims=True)
                ex = np.exp(h - m)
                sm = ex.sum(1, keepdims=True)
                loss += float(np.sum(m[:, 0] + np.log(sm[:, 0]) - h[i, yy])) / R
                dz = ex / sm
                dz[i, yy] -= 1
                dz *= scale
                for l in reversed(range(L)):
                    gW[l] += hs[l].T @ dz
                    gb[l] += dz.sum(0)
                    if l > 0:
                        dz = (dz @ Ws[l].T) * (zs[l - 1] > 0)
            out.append((e, g, loss))
            for l in range(L):
                vW[l] = mu * vW[l] + grad_scale * gW[l]
                vb[l] = mu * vb[l] + grad_scale * gb[l]
                Ws[l] -= lr * vW[l]
                bs[l] -= lr * vb[l]
    return out


def reference_for(data: Path, init: Path, batch: int, gpus: int, **wrong) -> np.ndarray:
    d, st = mi.Mnist(data), mi.InitState(str(init))
    order = st.order.astype(np.int64)
    params = [st.layer(l) for l in range(len(st.layers) - 1)]
    m = st.manifest
    return np.array([v for *_, v in data_parallel_reference(
        mi.normalize(d.train_x[order]), d.train_y[order], params, m["lr"], m["momentum"], batch,
        gpus, EPOCHS, **wrong)])


def assert_close(got: np.ndarray, ref: np.ndarray) -> float:
    """|got - ref| <= TOL * max(1, |ref|) everywhere; the largest difference."""
    assert got.shape == ref.shape
    bad = np.abs(got - ref) > TOL * np.maximum(1.0, np.abs(ref))
    assert not bad.any(), f"first mismatches at {np.nonzero(bad)[0][:5]}: {got[bad][:5]} vs " \
                          f"{ref[bad][:5]}"
    return float(np.max(np.abs(got - ref)))


@pytest.mark.parametrize("n", [40, 50])
def test_reference_is_the_global_batch_step_and_tells_wrong_steps_apart(tmp_path, n):
    """The data-parallel reference equals single-GPU training at the global batch (the sum of
    the shards' 1/R-weighted gradients is the global mean's gradient); a gradient summed twice
    (a psum on top of shard_map's own) or the N shards' means averaged (wrong where the last
    global batch's shards are unequal or empty) moves the curve far past the tolerance."""
    from test_pytorch_mlp import numpy_reference_train
    data = make_dataset(tmp_path / "d", n_train=n, n_test=4)
    init = export_init(tmp_path / "i", LAYERS, n_train=n, batch=16, data=str(data))
    ref = reference_for(data, init, 16, 2)
    d, st = mi.Mnist(data), mi.InitState(str(init))
    order = st.order.astype(np.int64)
    single = numpy_reference_train(mi.normalize(d.train_x[order]), d.train_y[order],
                                   [st.layer(l) for l in range(2)], 0.1, 0.9, 32, EPOCHS)
    np.testing.assert_allclose(ref, [v for *_, v in single], rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(reference_for(data, init, 16, 2, grad_scale=2.0) - ref)) > 1e-3
    assert np.max(np.abs(reference_for(data, init, 16, 2, shard_means=True) - ref)) > 1e-3


# ---------------------------------------------------------------------------------------------
# the real epoch on emulated CPU devices

DRIVER = textwrap.dedent('''\
    """Trains with jax_data_parallel.train on CPU devices: argv[1] a JSON list of runs."""
    import json, sys
    sys.path.insert(0, {baselines!r})
    import jax
    import jax_data_parallel as jdp
    for run in json.loads(sys.argv[1]):
        a = jdp.build_parser().parse_args(run["args"])
        s = jdp.Settings(a, {{"NCCL_NVLS_ENABLE": "0"}})
        code, rec = jdp.train(s, ["jax_data_parallel.py", *run["args"]],
                              jax.devices("cpu")[:run["devices"]])
        if code != 0:
            sys.exit(f"run {{run}} failed: {{rec['error']}}")
    ''')


def needs_jax():
    if not HAS_JAX:
        pytest.skip("jax is not installed (python3 -m pip install 'jax[cpu]')")


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """For 40 samples (the last global batch: shard 0 of 8 rows, shard 1 empty) and 50 (shard 0
    full, shard 1 of 2 rows): 2 devices at 16 rows each, 1 device at 32, and 2 devices with
    --transfer f32; {(n, devices, transfer): (curve, record)} and the data and init dirs."""
    needs_jax()
    tmp = tmp_path_factory.mktemp("jax_dp")
    runs, want, dirs = [], {}, {}
    for n in (40, 50):
        data = make_dataset(tmp / f"mnist{n}", n_train=n, n_test=20)
        init = export_init(tmp / f"init{n}", LAYERS, n_train=n, batch=16, data=str(data))
        dirs[n] = (data, init)
        for devices, batch, transfer in ((2, 16, "u8"), (1, 32, "u8"), (2, 16, "f32")):
            key = (n, devices, transfer)
            tag = f"{n}_{devices}_{transfer}"
            curve, js = tmp / f"c{tag}.csv", tmp / f"r{tag}.jsonl"
            runs.append({"devices": devices, "args": [
                "--init", str(init), "--data", str(data), "--batch", str(batch), "--epochs",
                str(EPOCHS), "--transfer", transfer, "--loss-curve", str(curve), "--json",
                str(js), "-q"]})
            want[key] = (curve, js)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", DRIVER.format(baselines=str(BASELINES)),
                        json.dumps(runs)], capture_output=True, text=True, env=env, timeout=900,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    out = {}
    for key, (curve, js) in want.items():
        c = read_curve(curve)
        recs = [json.loads(ln) for ln in js.read_text().splitlines()]
        assert len(recs) == 1
        out[key] = (c, recs[0])
    return out, dirs


@pytest.mark.parametrize("n", [40, 50])
def test_two_devices_equal_the_float64_data_parallel_step(cpu_runs, n):
    runs, dirs = cpu_runs
    c, rec = runs[(n, 2, "u8")]
    G = dp.global_batches(n, 16, 2)
    assert [(e, b) for e, b, _ in c] == [(e, b) for e in range(1, EPOCHS + 1) for b in range(G)]
    got = np.array([v for *_, v in c])
    ref = reference_for(*dirs[n], 16, 2)
    diff = assert_close(got, ref)
    print(f"n={n}: 2 devices vs float64 reference, max |diff| {diff:.3g}")
    assert np.all(np.diff(got[::G]) != 0)  # the weights move
    rows = [dp.global_rows(n, 16, 2, g) for g in range(G)]
    for e in range(EPOCHS):  # train_loss: the rows-weighted mean of the global batches' losses
        expect = sum(got[e * G + g] * rows[g] for g in range(G)) / n
        assert rec["epochs"][e]["train_loss"] == pytest.approx(expect, rel=1e-6)


@pytest.mark.parametrize("n", [40, 50])
def test_two_devices_equal_one_device_at_the_global_batch(cpu_runs, n):
    runs, _ = cpu_runs
    two = np.array([v for *_, v in runs[(n, 2, "u8")][0]])
    one = np.array([v for *_, v in runs[(n, 1, "u8")][0]])
    diff = assert_close(two, one)
    print(f"n={n}: 2 devices vs 1 device at batch 32, max |diff| {diff:.3g}")
    f32 = np.array([v for *_, v in runs[(n, 2, "f32")][0]])
    assert_close(f32, two)  # the same values, normalised before or in the step


def test_cpu_record_follows_the_schema(cpu_runs, record_errors, undeclared_keys):
    runs, _ = cpu_runs
    for (n, devices, transfer), (_, rec) in runs.items():
        assert rec["status"] == "ok" and record_errors(rec) == [] and undeclared_keys(rec) == []
        c = rec["config"]
        assert c["strategy"] == "jax-data-parallel-jit" and c["framework"] == "jax"
        assert (c["gpus"], c["global_batch"]) == (devices, 32) and c["scenario"] == "static"
        assert c["per_gpu_batch"] == c["batch"] == 32 // devices and c["transfer"] == transfer
        jd = c["jax_data_parallel"]
        assert jd["api"] == "jax.shard_map" and jd["collective"] == "lax.psum"
        assert jd["last_batch"] == "masked" and jd["compile_ms"] > 0
        assert rec["env"]["jax_version"] and rec["env"]["jaxlib_version"]
        assert len(rec["epochs"]) == EPOCHS and rec["summary"]["steady_epochs"] == EPOCHS - 1
        assert all(e["wall_ms"] > 0 and e["gpu_ms"] == e["wall_ms"] for e in rec["epochs"])


# ---------------------------------------------------------------------------------------------
# on 2 CUDA GPUs with a CUDA jax

@pytest.fixture
def two_gpus():
    needs_jax()
    # asked in a process of its own: jax here would take most of the GPUs' memory for its pool
    r = subprocess.run([sys.executable, "-c", "import jax\ntry:\n    print(len(jax.devices("
                        "'gpu')))\nexcept RuntimeError:\n    print(0)"],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    count = int(r.stdout.split()[-1]) if r.returncode == 0 and r.stdout.split() else 0
    if count < 2:
        pytest.skip(f"{count} CUDA GPU visible to jax; this needs 2 and a jax with CUDA")


def test_two_gpus_end_to_end(two_gpus, tmp_path, data, record_errors, undeclared_keys):
    """40 samples, 16 rows per GPU: global batches of 32 and 8 rows (GPU 1's shard of the last
    one empty). One record with the NCCL settings, the curve of the float64 data-parallel step."""
    init = export_init(tmp_path / "init", LAYERS, n_train=40, batch=16, data=str(data))
    js, curve = tmp_path / "r.jsonl", tmp_path / "c.csv"
    r = cli("--gpus", "2", "--init", str(init), "--data", str(data), "--epochs", str(EPOCHS),
            "--json", str(js), "--loss-curve", str(curve), no_jax=False, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "summary: jax-data-parallel-jit" in r.stdout
    recs = [json.loads(ln) for ln in js.read_text().splitlines()]
    assert len(recs) == 1
    rec = recs[0]
    assert rec["status"] == "ok" and record_errors(rec) == [] and undeclared_keys(rec) == []
    assert rec["config"]["gpus"] == 2 and rec["config"]["device"] == "cuda"
    assert rec["env"]["nccl"]["settings"]["NCCL_NVLS_ENABLE"] == "0"
    assert rec["env"]["gpu_name"]
    got = np.array([v for *_, v in read_curve(curve)])
    diff = assert_close(got, reference_for(data, init, 16, 2))
    print(f"2 GPUs vs float64 reference, max |diff| {diff:.3g}; NCCL {rec['env']['nccl']}")
