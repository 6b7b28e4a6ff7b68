#!/usr/bin/env python3
"""How closely the GPU augmentations of the resident baselines reproduce memstrat's bytes: one
epoch of the training set augmented by torch ops (torch_augment.py) and, where jax is
installed, by jnp (jax_gpu_resident.py), each compared byte by byte with memstrat_stream.py's
numpy output (itself tested against memstrat's C++).

    python3 experiments/baselines/gpu_augment_check.py --augment light,heavy --epoch 1

Prints, per framework and augmentation, the bytes compared, the fraction equal and the largest
absolute difference, and appends them as one JSON line per check to --json. Exit codes: 0 every
check ran, 2 bad option or neither torch nor jax installed, 3 --require-exact and some check
had unequal bytes.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_augment as ta  # noqa: E402
from memstrat_inputs import UsageError, load_mnist, resolve_data_dir  # noqa: E402
from memstrat_stream import augment as np_augment, epoch_order  # noqa: E402

PROG = "gpu_augment_check.py"


def torch_bytes(kind: str, images: np.ndarray, seed: int, epoch: int, device: str):
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return None
    n = images.shape[0]
    draws = ta.epoch_draws(kind, seed, epoch, n)
    src = torch.from_numpy(images).to(device)
    d = None if draws is None else torch.from_numpy(draws).to(device)
    return ta.augment(torch, kind, src, d).cpu().numpy()


def jax_bytes(kind: str, images: np.ndarray, seed: int, epoch: int):
    try:
        import jax  # noqa: PLC0415
    except ImportError:
        return None
    import jax_gpu_resident as jr  # noqa: PLC0415
    draws = ta.epoch_draws(kind, seed, epoch, images.shape[0])
    if draws is not None and draws.dtype == np.int64:
        draws = draws.astype(np.int32)
    f = jax.jit(lambda s, dr: jr.augment(jax.numpy, kind, s, dr))
    return np.asarray(f(images, draws if draws is not None else np.zeros(0, np.float32)))


def checks(kinds: Sequence[str], images: np.ndarray, seed: int, epoch: int, device: str):
    """[(framework, kind, agreement dict)] for every framework installed."""
    n = images.shape[0]
    order = epoch_order(n, seed, epoch)
    src = np.ascontiguousarray(images[order])
    out = []
    for kind in kinds:
        want = np_augment(kind, src, seed, epoch, np.arange(n))
        for fw, got in (("torch", torch_bytes(kind, src, seed, epoch, device)),
                        ("jax", jax_bytes(kind, src, seed, epoch))):
            if got is not None:
                out.append((fw, kind, ta.agreement(got, want)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--augment", default="light,heavy", help="comma-separated (default %(default)s)")
    p.add_argument("--data", help="MNIST directory (default: $MEMSTRAT_DATA, data/mnist)")
    p.add_argument("--seed", type=int, default=1, help="default %(default)s")
    p.add_argument("--epoch", type=int, default=1, help="default %(default)s")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="torch's device (default %(default)s; jax uses its default device)")
    p.add_argument("--require-exact", action="store_true", help="exit 3 on any unequal byte")
    p.add_argument("--json", metavar="FILE", help="append one JSON line per check")
    a = p.parse_args(argv)
    kinds = [k.strip() for k in a.augment.split(",") if k.strip()]
    try:
        if not kinds or any(k not in ("none", "light", "heavy") for k in kinds):
            raise UsageError(f"--augment {a.augment!r}: expected a subset of none,light,heavy")
        if a.epoch < 1:
            raise UsageError("--epoch must be >= 1")
        data = load_mnist(resolve_data_dir(a.data))
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    images = data.train_x.reshape(-1, data.rows, data.cols)
    found = checks(kinds, images, a.seed, a.epoch, a.device)
    if not found:
        print(f"{PROG}: neither torch nor jax is installed", file=sys.stderr)
        return 2
    inexact = False
    for fw, kind, r in found:
        print(f"{fw:5s} {kind:5s}: {r['bytes']} bytes, {100 * r['equal_fraction']:.6f}% equal "
              f"({r['unequal']} unequal), max |diff| {r['max_abs_diff']}")
        inexact |= r["unequal"] > 0
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps({"framework": fw, "augment": kind, "seed": a.seed,
                                    "epoch": a.epoch, "data": data.source, **r}) + "\n")
    return 3 if a.require_exact and inexact else 0


if __name__ == "__main__":
    sys.exit(main())
