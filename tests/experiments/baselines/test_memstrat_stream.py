"""experiments/baselines/memstrat_stream.py against the C++ it reproduces (no torch needed).

fixtures/augment_cpp.json is written by tests/cpu/test_augment.cpp from
memory_strategies/augment.cpp and epoch_order.cpp (that test also checks the C++ still
produces it): 16 synthetic sources with their light and heavy outputs and draws, the first rows
of some epoch orders, and checksums of augmented real-MNIST epochs (the bytes stay out of the
repository; those tests skip without MNIST).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
import memstrat_stream as ms  # noqa: E402
import memstrat_inputs as mi  # noqa: E402
import pytorch_dataloader as dl  # noqa: E402  (its dataset and samplers need no torch)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "augment_cpp.json").read_text())
SAMPLES = FIXTURE["samples"]
SEED = FIXTURE["seed"]


def image(hexstr: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(hexstr), np.uint8).reshape(FIXTURE["rows"],
                                                                   FIXTURE["cols"])


def mnist_or_skip() -> mi.Mnist:
    for d in (os.environ.get(mi.DATA_ENV_VAR), REPO / "data" / "mnist",
              REPO.parent / "shared" / "data" / "mnist"):
        if d and (Path(d) / "train-images-idx3-ubyte.gz").is_file():
            return mi.load_mnist(Path(d))
    pytest.skip("MNIST not found ($MEMSTRAT_DATA, data/mnist, ../shared/data/mnist)")


@pytest.mark.parametrize("kind", ["light", "heavy"])
def test_each_sample_matches_the_cpp_bytes(kind):
    for s in SAMPLES:
        got = ms.augment(kind, image(s["source"])[None], SEED, s["epoch"], [s["row"]])[0]
        want = image(s[kind])
        assert np.array_equal(got, want), \
            f"{kind} epoch {s['epoch']} row {s['row']}: {(got != want).sum()} pixels differ"


@pytest.mark.parametrize("kind", ["light", "heavy"])
def test_a_stack_is_augmented_like_its_samples_one_by_one(kind):
    # Same epoch for a stack: the fixture's samples of epoch 1 and 3 in one call each.
    for epoch in (1, 3):
        picked = [s for s in SAMPLES if s["epoch"] == epoch]
        src = np.stack([image(s["source"]) for s in picked])
        got = ms.augment(kind, src, SEED, epoch, [s["row"] for s in picked])
        assert np.array_equal(got, np.stack([image(s[kind]) for s in picked]))


def test_draws_match_the_cpp_bits():
    for s in SAMPLES:
        rows = np.array([s["row"]])
        p = ms.heavy_params(SEED, s["epoch"], rows)
        bits = [int(np.asarray(p[k], np.float32).view(np.uint32)[0])
                for k in ("half_tan", "scale", "shear", "tx", "ty")]
        assert bits == s["heavy_params_f32_bits"], s["row"]
        dx, dy = ms.light_shift(SEED, s["epoch"], rows)
        assert [int(dx[0]), int(dy[0])] == s["shift"]


def test_none_copies_and_bad_input_is_refused():
    src = image(SAMPLES[0]["source"])[None]
    out = ms.augment("none", src, 1, 1, [0])
    assert np.array_equal(out, src) and out is not src
    with pytest.raises(ValueError, match="unknown kind"):
        ms.augment("medium", src, 1, 1, [0])
    with pytest.raises(ValueError, match="uint8 images"):
        ms.augment("light", src.astype(np.float32), 1, 1, [0])
    with pytest.raises(ValueError, match="uint8 images"):
        ms.augment("light", src, 1, 1, [0, 1])


def test_epoch_orders_match_the_cpp_permutations():
    for o in FIXTURE["orders"]:
        got = ms.epoch_order(o["n"], o["seed"], o["epoch"])
        assert got[:32].tolist() == o["first"], o
        assert got.dtype == np.int32 and np.array_equal(np.sort(got), np.arange(o["n"]))
    # A fresh permutation per epoch; epoch 0 is the static scenario's order.
    assert not np.array_equal(ms.epoch_order(1000, 7, 1), ms.epoch_order(1000, 7, 2))
    assert np.array_equal(ms.epoch_order(1000, 7, 0), mi.memstrat_static_order(1000, 7))


def checksum(b: np.ndarray) -> int:
    """tests/cpu/test_augment.cpp's checksum: sum of b[i] * (2i + 1) * phi mod 2^64."""
    b = b.reshape(-1).astype(np.uint64)
    w = (np.arange(b.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)) * \
        np.uint64(0x9E3779B97F4A7C15)
    return int((b * w).sum(dtype=np.uint64))


def test_real_mnist_epochs_match_the_cpp_checksums():
    m = mnist_or_skip()
    for c in FIXTURE["mnist_checksums"]:
        if len(m.train_y) != c["n_train"]:
            pytest.skip(f"the checksums are of the {c['n_train']}-sample training set")
        order = ms.epoch_order(len(m.train_y), c["seed"], c["epoch"])[:c["rows"]]
        src = m.train_x[order].reshape(-1, m.rows, m.cols)
        out = ms.augment(c["augment"], src, c["seed"], c["epoch"], np.arange(c["rows"]))
        assert checksum(out) == int(c["checksum"]), c


def test_checksum_sees_a_single_changed_byte():
    a = np.zeros(1000, np.uint8)
    b = a.copy()
    b[999] = 1
    assert checksum(a) != checksum(b)


def test_the_dataset_and_samplers_serve_memstrats_stream_data():
    m = mnist_or_skip()
    m.truncate(600, 10)
    n, batch, seed = 600, 64, 5
    for transfer in ("u8", "f32"):
        ds = dl.StreamSamples(m, "heavy", seed, transfer)
        per_sample, per_batch = dl.EpochSamples(n), dl.EpochBatches(n, batch)
        assert len(ds) == n and len(per_batch) == 10
        for epoch in (1, 2):
            order = ms.epoch_order(n, seed, epoch)
            want = ms.augment("heavy", m.train_x[order].reshape(-1, 28, 28), seed, epoch,
                              np.arange(n)).reshape(n, -1)
            if transfer == "f32":
                want = mi.normalize(want)
            per_sample.set_epoch(epoch, order)
            per_batch.set_epoch(epoch, order)
            keys = list(per_sample)
            assert [k[2] for k in keys] == order.tolist() and [k[1] for k in keys] == \
                list(range(n))
            for i in (0, 1, 333, n - 1):
                x, y = ds[keys[i]]
                assert np.array_equal(x, want[i]) and y == m.train_y[order[i]]
            xs, ys = zip(*(ds[k] for k in per_batch))
            assert [len(v) for v in ys] == [64] * 9 + [24]  # the last batch is partial
            assert np.array_equal(np.concatenate(xs), want)
            assert np.array_equal(np.concatenate(ys), m.train_y[order])
