"""The GPU augmentations of the resident baselines (experiments/baselines/torch_augment.py, the
jnp ops of jax_gpu_resident.py) against memstrat's C++ bytes (fixtures/augment_cpp.json) and
memstrat_stream.py's numpy output. The draws need only numpy and run everywhere; the torch
tests run on the CPU and, where there is one, on a CUDA GPU; the jax tests where jax is
installed (all skip with the reason otherwise).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
import gpu_augment_check as gac  # noqa: E402
import memstrat_stream as ms  # noqa: E402
import torch_augment as ta  # noqa: E402
from test_memstrat_stream import FIXTURE, SAMPLES, SEED, image, mnist_or_skip  # noqa: E402


def fixture_draws(kind: str, epoch: int, rows: np.ndarray) -> np.ndarray:
    """epoch_draws' layout for arbitrary rows (the fixture's rows are not 0..n-1)."""
    if kind == "light":
        return np.stack(ms.light_shift(SEED, epoch, rows)).astype(np.int64)
    p = ms.heavy_params(SEED, epoch, rows)
    return np.stack([p[k] for k in ta.HEAVY_KEYS]).astype(np.float32)


@pytest.mark.parametrize("epoch", [1, 2, 5])
def test_epoch_draws_are_memstrats_per_row_draws(epoch):
    n = 3000
    rows = np.arange(n)
    light = ta.epoch_draws("light", SEED, epoch, n)
    dx, dy = ms.light_shift(SEED, epoch, rows)
    assert light.dtype == np.int64 and light.shape == (2, n)
    assert np.array_equal(light[0], dx) and np.array_equal(light[1], dy)
    assert set(np.unique(light)) == {-2, -1, 0, 1, 2}
    heavy = ta.epoch_draws("heavy", SEED, epoch, n)
    p = ms.heavy_params(SEED, epoch, rows)
    assert heavy.dtype == np.float32 and heavy.shape == (5, n)
    for i, k in enumerate(ta.HEAVY_KEYS):
        assert np.array_equal(heavy[i].view(np.uint32), p[k].view(np.uint32)), k
    assert ta.epoch_draws("none", SEED, epoch, n) is None
    with pytest.raises(ValueError, match="unknown augmentation"):
        ta.epoch_draws("medium", SEED, epoch, n)


def test_epoch_draws_shift_an_epoch_as_memstrat_stream_does():
    """The draws the resident baselines upload, applied as a shift, give memstrat_stream's bytes
    (which test_memstrat_stream.py checks against the C++) for rows 0..n-1 of an epoch."""
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (500, FIXTURE["rows"], FIXTURE["cols"]), dtype=np.uint8)
    for epoch in (1, 4):
        d = ta.epoch_draws("light", SEED, epoch, len(src))
        got = ms.shift_images(src, d[0], d[1])
        assert np.array_equal(got, ms.augment("light", src, SEED, epoch, np.arange(len(src))))
        assert not np.array_equal(got, src)


def test_agreement_counts_unequal_bytes():
    a = np.zeros((2, 3), np.uint8)
    b = a.copy()
    assert ta.agreement(a, b) == {"bytes": 6, "unequal": 0, "equal_fraction": 1.0,
                                  "max_abs_diff": 0}
    b[1, 2] = 255
    r = ta.agreement(a, b)
    assert r["unequal"] == 1 and r["max_abs_diff"] == 255 and r["equal_fraction"] == 5 / 6
    with pytest.raises(ValueError, match="shapes differ"):
        ta.agreement(a, b[:1])


def test_the_check_tool_refuses_bad_options(capsys):
    assert gac.main(["--augment", "medium", "--data", "/nonexistent"]) == 2
    assert "expected a subset" in capsys.readouterr().err
    assert gac.main(["--epoch", "0", "--data", "/nonexistent"]) == 2


# ---------------------------------------------------------------------------------------------
# torch ops (CPU, and CUDA where present)

def torch_device(name: str):
    torch = pytest.importorskip("torch")
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch")
    return torch


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("kind", ["light", "heavy"])
def test_torch_ops_make_the_cpp_bytes(device, kind):
    torch = torch_device(device)
    for epoch in sorted({s["epoch"] for s in SAMPLES}):
        picked = [s for s in SAMPLES if s["epoch"] == epoch]
        src = torch.from_numpy(np.stack([image(s["source"]) for s in picked])).to(device)
        draws = torch.from_numpy(fixture_draws(kind, epoch, np.array([s["row"] for s in
                                                                       picked]))).to(device)
        got = ta.augment(torch, kind, src, draws).cpu().numpy()
        want = np.stack([image(s[kind]) for s in picked])
        assert np.array_equal(got, want), f"{kind} epoch {epoch}: {(got != want).sum()} bytes"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("kind", ["none", "light", "heavy"])
def test_torch_epoch_on_mnist_equals_numpy(device, kind):
    """A whole MNIST epoch: every byte as memstrat_stream.py (and so memstrat) makes it."""
    torch = torch_device(device)
    m = mnist_or_skip()
    images = m.train_x.reshape(-1, m.rows, m.cols)[:20000]
    src = np.ascontiguousarray(images[ms.epoch_order(len(images), 1, 2)])
    got = gac.torch_bytes(kind, src, 1, 2, device)
    want = ms.augment(kind, src, 1, 2, np.arange(len(src)))
    r = ta.agreement(got, want)
    assert r["unequal"] == 0, r


# ---------------------------------------------------------------------------------------------
# jnp ops (where jax is installed, on its default device)

@pytest.mark.parametrize("kind", ["light", "heavy"])
def test_jax_ops_against_the_cpp_bytes(kind):
    jax = pytest.importorskip("jax")
    import jax_gpu_resident as jr
    f = jax.jit(lambda s, d: jr.augment(jax.numpy, kind, s, d))
    for epoch in sorted({s["epoch"] for s in SAMPLES}):
        picked = [s for s in SAMPLES if s["epoch"] == epoch]
        src = np.stack([image(s["source"]) for s in picked])
        d = fixture_draws(kind, epoch, np.array([s["row"] for s in picked]))
        d = d.astype(np.int32) if kind == "light" else d
        got = np.asarray(f(src, d))
        r = ta.agreement(got, np.stack([image(s[kind]) for s in picked]))
        if kind == "light":
            assert r["unequal"] == 0, r          # integer ops: exact
        else:
            # XLA fuses the warp into one kernel and may contract multiply-adds into FMAs: a
            # rounding step apart at most, on few bytes (gpu_augment_check.py reports MNIST's)
            assert r["max_abs_diff"] <= 1 and r["equal_fraction"] >= 0.99, r
