#!/usr/bin/env python3
"""PyTorch eager baseline for memstrat: the same MLP, data order, loss and optimiser.

    python3 experiments/baselines/pytorch_mlp.py --mode pinned --batch 256 --epochs 5 \\
        --json results/pytorch.jsonl

trains the MNIST MLP that `memstrat train` trains (Linear layers with ReLU between them,
mean softmax cross-entropy, SGD with momentum, PyTorch semantics v = mu*v + g; p -= lr*v)
with PyTorch's own ways of feeding a GPU:

  --mode pageable   data set in a plain CPU tensor; per batch `x[lo:hi].to("cuda")`, a
                    synchronous copy from pageable memory (memstrat `pageable`)
  --mode pinned     the CPU tensor is `.pin_memory()`-ed once; per batch
                    `x[lo:hi].to("cuda", non_blocking=True)` on the compute stream, no
                    overlap (memstrat `pinned`; nearest to `double-buffer` too)
  --mode resident   the whole data set moved to the GPU once; a batch is a slice
                    (memstrat `resident`)

Data order: like memstrat's `static` scenario, the training set is put in the epoch's
sample order once (outside the timed region) and batch b is rows [b*B, (b+1)*B) of it; the
same order every epoch. The order is memstrat's: read from `--init DIR`
(`memstrat train --export-init DIR` writes order_epoch1.i32), or, without --init,
recomputed here from --seed with memstrat's splitmix64 Fisher-Yates shuffle.

Initial weights: `--init DIR` loads memstrat's init_params.f32 (per layer W [in x out]
row-major, then b [out]; W is transposed into torch's [out x in] Linear.weight), so the
per-batch losses (`--loss-curve FILE`, CSV epoch,batch,loss, the forward loss of each step)
can be compared with memstrat's. Without --init: He-normal weights from torch's RNG
seeded with --seed, zero biases (memstrat's distribution, not its numbers).

Timing: wall_ms = time.perf_counter() around the epoch, ending after
torch.cuda.synchronize(); gpu_ms = CUDA events on the current stream around the epoch.
Evaluation runs outside the timed region. Math is fp32 (TF32 off). Eager mode, default
torch.optim.SGD (foreach) and `zero_grad(set_to_none=True)`: what a user writes. The timed
loop only keeps each step's loss tensor (no host synchronisation inside an epoch);
`--train-acc` also counts correct predictions on the GPU (a few extra kernels per step).

Writes one JSON Lines record per run (`--json FILE`, docs/results_schema.md, schema 1) with
config.strategy = "pytorch-<mode>" and config.framework = "pytorch"; memstrat-only
counters (copy/compute/stall ms, unified-memory and API-call counts) are null.

Exit codes (as memstrat): 0 ok, 1 run failed (a record marked "failed" is appended),
2 bad option or input file, 3 no GPU (use --device cpu to run on the CPU).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from baseline_record import (append_jsonl, environment_json, iso_utc_now, make_run_id,
                             summary_json)
from memstrat_inputs import (InitState, UsageError, load_mnist, memstrat_static_order,
                             normalize, resolve_data_dir)

SCHEMA_VERSION = 1
EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_NO_DEVICE = 0, 1, 2, 3
PROG = "pytorch_mlp.py"
MODES = ("pageable", "pinned", "resident")
MASK64 = (1 << 64) - 1


class UsageError(ValueError):
    """A bad option or input file: reported in one line, exit code 2, nothing written."""


# ---------------------------------------------------------------------------------------------
# IDX / MNIST (no torch needed)

_IDX_TYPES = {0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (optionally gzip-compressed, by the .gz suffix) into an array."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise UsageError(f"{path}: cannot read: {e}") from None
    if len(raw) < 4:
        raise UsageError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    if raw[0] != 0 or raw[1] != 0:
        raise UsageError(f"{path}: not an IDX file (magic starts {raw[0]:#04x} {raw[1]:#04x},"
                         " expected 0x00 0x00)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_TYPES:
        raise UsageError(f"{path}: unknown IDX element type {code:#04x}")
    if ndim == 0:
        raise UsageError(f"{path}: IDX file with 0 dimensions")
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise UsageError(f"{path}: truncated IDX header ({ndim} dimensions declared)")
    dims = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = _IDX_TYPES[code]
    expected = math.prod(dims) * dtype.itemsize
    if len(raw) - head != expected:
        raise UsageError(f"{path}: payload is {len(raw) - head} bytes, the header {dims} "
                         f"needs {expected}")
    return np.frombuffer(raw, dtype=dtype, offset=head).reshape(dims).astype(
        dtype.newbyteorder("="), copy=False)


_PARTS = {"train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
          "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte"}


def _find_part(d: Path, base: str) -> Path | None:
    for name in (base + ".gz", base):
        p = d / name
        if p.is_file():
            return p
    return None


def resolve_data_dir(cli_value: str | None, fallback: str | None = None) -> Path:
    """--data, else $MEMSTRAT_DATA, else `fallback` (a manifest's path), else data/mnist or
    ../shared/data/mnist (relative to the working directory, then to the repository)."""
    if cli_value:
        p = Path(cli_value)
        if not p.is_dir():
            raise UsageError(f"--data {cli_value}: no such directory")
        return p.resolve()
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        if not Path(env).is_dir():
            raise UsageError(f"{DATA_ENV_VAR}={env}: no such directory")
        return Path(env).resolve()
    candidates = []
    if fallback:
        candidates.append(Path(fallback))
    for base in (Path.cwd(), REPO_ROOT):
        candidates += [base / "data" / "mnist", base / ".." / "shared" / "data" / "mnist"]
    for c in candidates:
        if c.is_dir() and _find_part(c, _PARTS["train_x"]) is not None:
            return c.resolve()
    raise UsageError("no MNIST directory found (tried " + ", ".join(str(c) for c in candidates)
                     + "); run experiments/get_mnist.py or pass --data DIR")


class Mnist:
    """uint8 images [n, 784] and int64 labels, as memstrat's HostDataset holds them."""

    def __init__(self, directory: Path):
        self.source = str(directory)
        self.name = "fashion-mnist" if "fashion" in directory.name.lower() else "mnist"
        marker = directory / "DATASET"
        if marker.is_file():
            word = (marker.read_text().split() or [""])[0]
            if word in ("mnist", "fashion-mnist"):
                self.name = word
        arrays = {}
        for key, base in _PARTS.items():
            p = _find_part(directory, base)
            if p is None:
                raise UsageError(f"{directory}: missing {base}(.gz); run experiments/get_mnist.py")
            arrays[key] = read_idx(p)
        for split in ("train", "test"):
            x, y = arrays[split + "_x"], arrays[split + "_y"]
            if x.ndim != 3 or x.dtype != np.uint8 or y.ndim != 1 or y.dtype != np.uint8:
                raise UsageError(f"{directory}: {split} files are not uint8 images [n,rows,cols]"
                                 " + uint8 labels [n]")
            if x.shape[0] != y.shape[0]:
                raise UsageError(f"{directory}: {x.shape[0]} {split} images but "
                                 f"{y.shape[0]} labels")
            if y.size and int(y.max()) >= 10:
                raise UsageError(f"{directory}: {split} label {int(y.max())} is not in 0..9")
        if arrays["train_x"].shape[1:] != arrays["test_x"].shape[1:]:
            raise UsageError(f"{directory}: train and test images differ in size")
        self.rows, self.cols = arrays["train_x"].shape[1:]
        self.train_x = arrays["train_x"].reshape(arrays["train_x"].shape[0], -1)
        self.test_x = arrays["test_x"].reshape(arrays["test_x"].shape[0], -1)
        self.train_y = arrays["train_y"].astype(np.int64)
        self.test_y = arrays["test_y"].astype(np.int64)
        self.classes = 10

    @property
    def features(self) -> int:
        return self.rows * self.cols

    def truncate(self, n_train: int, n_test: int) -> None:
        """Keep the first n samples (0 keeps all), like `memstrat --train-samples`."""
        if n_train and n_train < len(self.train_y):
            self.train_x, self.train_y = self.train_x[:n_train], self.train_y[:n_train]
        if n_test and n_test < len(self.test_y):
            self.test_x, self.test_y = self.test_x[:n_test], self.test_y[:n_test]


_DATA_CACHE: dict[Path, Mnist] = {}


def load_mnist(directory: Path) -> Mnist:
    """Cached per directory (the benchmark runs many configurations in one process)."""
    if directory not in _DATA_CACHE:
        _DATA_CACHE[directory] = Mnist(directory)
    d = _DATA_CACHE[directory]
    out = Mnist.__new__(Mnist)
    out.__dict__.update(d.__dict__)  # shallow: truncate() rebinds, never mutates, the arrays
    return out


def normalize(pixels_u8: np.ndarray) -> np.ndarray:
    """memstrat's x = float(pixel) / 255.0f (IEEE division, bitwise the same)."""
    return pixels_u8.astype(np.float32) / np.float32(255.0)


# ---------------------------------------------------------------------------------------------
# memstrat's sample order (memory_strategies/epoch_data.cpp)

def splitmix64_order(n: int, seed: int) -> np.ndarray:
    """Fisher-Yates permutation of [0, n) driven by splitmix64(seed), as memstrat's
    shuffled_order(); int32."""
    p = list(range(n))
    st = seed & MASK64
    for i in range(n - 1, 0, -1):
        st = (st + 0x9E3779B97F4A7C15) & MASK64
        z = st
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        j = z % (i + 1)
        p[i], p[j] = p[j], p[i]
    return np.asarray(p, dtype=np.int32)


def memstrat_static_order(n: int, seed: int) -> np.ndarray:
    """The order of every epoch in memstrat's static scenario (EpochWriter::order)."""
    return splitmix64_order(n, (seed * 0x100000001B3) & MASK64)


# ---------------------------------------------------------------------------------------------
# memstrat's exported initial state (--export-init DIR)

class InitState:
    def __init__(self, directory: str, scenarios: Sequence[str] = ("static",)):
        d = Path(directory)
        self.dir = d
        mpath = d / "manifest.json"
        try:
            self.manifest = json.loads(mpath.read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"--init {directory}: cannot read manifest.json: {e}") from None
        m = self.manifest
        try:
            self.layers = [int(v) for v in m["layers"]]
            self.offsets = [(int(p["weight_offset"]), int(p["bias_offset"])) for p in m["params"]]
            self.param_count = int(m["param_count"])
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"{mpath}: missing or bad field ({e})") from None
        if len(self.layers) < 2 or len(self.offsets) != len(self.layers) - 1:
            raise UsageError(f"{mpath}: {len(self.offsets)} parameter entries for layers "
                             f"{self.layers}")
        need = sum(i * o + o for i, o in zip(self.layers[:-1], self.layers[1:]))
        if need != self.param_count:
            raise UsageError(f"{mpath}: param_count {self.param_count} but layers "
                             f"{self.layers} need {need}")
        for l, (w, b) in enumerate(self.offsets):
            i, o = self.layers[l], self.layers[l + 1]
            if w < 0 or b < 0 or w + i * o > self.param_count or b + o > self.param_count:
                raise UsageError(f"{mpath}: layer {l} offsets ({w}, {b}) out of range")
        self.params = self._read(d / "init_params.f32", "<f4", self.param_count)
        self.order = self._read(d / "order_epoch1.i32", "<i4", None).astype(np.int32)
        self.seed = m.get("seed")
        self.scenario = m.get("scenario", "static")
        if self.scenario not in scenarios:
            raise UsageError(f"{mpath}: scenario '{self.scenario}'; this baseline reproduces the"
                             f" {'/'.join(scenarios)} scenario only (export with --scenario "
                             f"{scenarios[0]})")

    @staticmethod
    def _read(path: Path, dtype: str, count: int | None) -> np.ndarray:
        try:
            a = np.fromfile(path, dtype=np.dtype(dtype))
        except OSError as e:
            raise UsageError(f"{path}: cannot read: {e}") from None
        if count is not None and a.size != count:
            raise UsageError(f"{path}: {a.size} values, the manifest says {count}")
        return a.astype(np.dtype(dtype).newbyteorder("="))

    def layer(self, l: int) -> tuple[np.ndarray, np.ndarray]:
        """(W [in x out], b [out]) of layer l as float32 arrays."""
        i, o = self.layers[l], self.layers[l + 1]
        w_off, b_off = self.offsets[l]
        return (self.params[w_off:w_off + i * o].reshape(i, o),
                self.params[b_off:b_off + o])


# ---------------------------------------------------------------------------------------------
# options

def parse_hidden(s: str) -> list[int]:
    try:
        h = [int(p) for p in s.split(",")]
    except ValueError:
        raise UsageError(f"--hidden {s!r}: expected sizes separated by commas, e.g. 256 or "
                         "512,256") from None
    if not h or any(v <= 0 for v in h):
        raise UsageError(f"--hidden {s!r}: layer sizes must be positive")
    return h


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Curve comparison: memstrat train --strategy resident --transfer f32 --epochs 1 "
               "--export-init /tmp/init --loss-curve a.csv; then pytorch_mlp.py --init /tmp/init "
               "--mode resident --epochs 1 --loss-curve b.csv. See the module docstring for "
               "what each mode does.")
    p.add_argument("--mode", choices=MODES, default="resident",
                   help="how batches reach the GPU (default: %(default)s)")
    add_run_options(p)
    return p


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options every PyTorch baseline shares: data, model, optimiser, device, outputs."""
    p.add_argument("--init", metavar="DIR",
                   help="memstrat --export-init directory: initial weights, sample order, and "
                        "the defaults of --hidden/--lr/--momentum/--batch/--train-samples")
    p.add_argument("--data", metavar="DIR", help="MNIST directory (default: $MEMSTRAT_DATA, "
                   "the --init manifest's, data/mnist)")
    p.add_argument("-b", "--batch", type=int, help="batch size (default 256, or --init's)")
    p.add_argument("--hidden", help="hidden layer sizes, comma separated (default 256, or "
                   "--init's)")
    p.add_argument("-e", "--epochs", type=int, default=10, help="epochs (default %(default)s); "
                   "the summary uses epochs 2..N")
    p.add_argument("--lr", type=float, help="SGD learning rate (default 0.05, or --init's)")
    p.add_argument("--momentum", type=float, help="SGD momentum (default 0.9, or --init's)")
    p.add_argument("--seed", type=int, help="seed of the sample order and, without --init, "
                   "of the weights (default 1, or --init's)")
    p.add_argument("--transfer", choices=("f32", "u8"), default="f32",
                   help="f32: hold/move normalised floats (a typical PyTorch pipeline); u8: "
                        "hold/move raw pixels, normalise on the device (default %(default)s)")
    p.add_argument("--train-samples", type=int, default=None,
                   help="use only the first N training samples (0 = all; default all, or "
                        "--init's)")
    p.add_argument("--test-samples", type=int, default=None,
                   help="use only the first N test samples (0 = all)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default) or cpu (tests; pinned needs cuda)")
    p.add_argument("--train-acc", action="store_true",
                   help="also count correct predictions in the timed loop (extra kernels per "
                        "step); without it train_acc is null")
    p.add_argument("--json", metavar="FILE", help="append one JSON Lines record (schema 1)")
    p.add_argument("--loss-curve", metavar="FILE",
                   help="write per-batch forward losses, CSV epoch,batch,loss")
    p.add_argument("--run-tag", help="free-form tag stored as config.run_tag")
    p.add_argument("-q", "--quiet", action="store_true", help="only the summary line")


def check_appendable(path: str, what: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        os.close(fd)
    except OSError as e:
        raise UsageError(f"{what}: cannot open '{path}' for writing: {e.strerror} (does the "
                         "directory exist?)") from None


class Settings:
    """Validated options, resolved against --init's manifest; no torch, no device."""

    def __init__(self, a: argparse.Namespace, scenarios: Sequence[str] = ("static",)):
        self.args = a
        self.init = InitState(a.init, scenarios) if a.init else None
        m = self.init.manifest if self.init else {}
        if self.init:
            hidden = self.init.layers[1:-1]
            if a.hidden is not None and parse_hidden(a.hidden) != hidden:
                raise UsageError(f"--hidden {a.hidden} differs from --init's layers "
                                 f"{self.init.layers}")
        else:
            hidden = parse_hidden(a.hidden if a.hidden is not None else "256")
        self.hidden = hidden
        self.batch = a.batch if a.batch is not None else int(m.get("batch", 256))
        self.lr = a.lr if a.lr is not None else float(m.get("lr", 0.05))
        self.momentum = a.momentum if a.momentum is not None else float(m.get("momentum", 0.9))
        self.seed = a.seed if a.seed is not None else int(m.get("seed", 1))
        self.warnings = []
        if self.init:
            for name, mine, key in (("--batch", self.batch, "batch"), ("--lr", self.lr, "lr"),
                                    ("--momentum", self.momentum, "momentum"),
                                    ("--seed", self.seed, "seed")):
                if key in m and not math.isclose(float(mine), float(m[key]), rel_tol=1e-6):
                    self.warnings.append(f"{name} {mine} differs from --init's {m[key]}: the loss"
                                         " curve will not match memstrat's")
        if self.batch <= 0:
            raise UsageError("--batch must be > 0")
        if a.epochs <= 0:
            raise UsageError("--epochs must be > 0")
        if not self.lr > 0:
            raise UsageError("--lr must be > 0")
        if not 0 <= self.momentum < 1:
            raise UsageError("--momentum must be in [0, 1)")
        self.train_samples = a.train_samples if a.train_samples is not None else \
            int(m.get("train_samples", 0)) if self.init else 0
        self.test_samples = a.test_samples if a.test_samples is not None else \
            int(m.get("test_samples", 0)) if self.init else 0
        if self.train_samples < 0 or self.test_samples < 0:
            raise UsageError("--train-samples/--test-samples must be >= 0 (0 keeps all)")
        if getattr(a, "mode", None) == "pinned" and a.device == "cpu":
            raise UsageError("--mode pinned needs --device cuda (pinned memory is a CUDA "
                             "allocation)")
        self.data_dir = resolve_data_dir(a.data, m.get("dataset") if self.init else None)
        self.data = load_mnist(self.data_dir)
        self.data.truncate(self.train_samples, self.test_samples)
        n = len(self.data.train_y)
        if self.batch > n:
            raise UsageError(f"--batch {self.batch} is larger than the training set ({n} "
                             f"samples); use --batch <= {n}")
        if self.init:
            if self.init.layers[0] != self.data.features or self.init.layers[-1] != 10:
                raise UsageError(f"--init layers {self.init.layers} do not fit the data "
                                 f"({self.data.features} features, 10 classes)")
            order = self.init.order
            if order.size != n:
                raise UsageError(f"--init order has {order.size} samples, the training set "
                                 f"{n}; pass the --train-samples memstrat used")
            if not np.array_equal(np.sort(order), np.arange(n, dtype=np.int32)):
                raise UsageError(f"{self.init.dir}/order_epoch1.i32 is not a permutation of "
                                 f"0..{n - 1}")
            self.order = order
            self.order_source = "init"
        else:
            self.order = memstrat_static_order(n, self.seed)
            self.order_source = "splitmix64"
        self.layers = [self.data.features] + self.hidden + [10]
        if a.json:
            check_appendable(a.json, "--json")
        if a.loss_curve:
            try:
                with open(a.loss_curve, "a"):
                    pass
            except OSError as e:
                raise UsageError(f"--loss-curve: cannot write '{a.loss_curve}': {e.strerror}") \
                    from None


# ---------------------------------------------------------------------------------------------
# training (torch imported lazily so that option errors need no torch)

def _import_torch():
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise UsageError("PyTorch is not installed (pip install torch)") from None
    return torch


def set_fp32_math(torch) -> None:
    """fp32 compared with fp32: no TF32 in matmuls (memstrat runs without --tf32). Newer torch
    (>= 2.9) has a per-backend API and refuses a mix of it with the legacy flags, so only one
    of the two is used. (cuDNN plays no part in an MLP.)"""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")


def build_model(torch, layers: list[int], init: InitState | None, seed: int, device: str):
    nn = torch.nn
    mods = []
    for l in range(len(layers) - 1):
        mods.append(nn.Linear(layers[l], layers[l + 1]))
        if l + 2 < len(layers):
            mods.append(nn.ReLU())
    model = nn.Sequential(*mods)
    linears = [m for m in mods if isinstance(m, nn.Linear)]
    with torch.no_grad():
        if init is not None:
            for l, lin in enumerate(linears):
                w, b = init.layer(l)  # W [in x out] -> torch's weight [out x in]
                lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
                lin.bias.copy_(torch.from_numpy(b.copy()))
        else:
            gen = torch.Generator().manual_seed(seed)
            for l, lin in enumerate(linears):
                lin.weight.normal_(0.0, math.sqrt(2.0 / layers[l]), generator=gen)
                lin.bias.zero_()
    return model.to(device)


class ResidentFeed:
    """The whole (ordered) training set on the device once; a batch is a slice."""

    def __init__(self, torch, x_cpu, y_cpu, device: str, scale):
        self.x, self.y = x_cpu.to(device), y_cpu.to(device)
        self.scale = scale
        self.setup_h2d_bytes = x_cpu.nbytes + y_cpu.nbytes if device == "cuda" else 0
        self.epoch_h2d_bytes = 0

    def batch(self, lo: int, hi: int):
        x = self.x[lo:hi]
        return (x if self.scale is None else x.float().div_(self.scale)), self.y[lo:hi]


class PageableFeed:
    """Plain CPU tensors; per batch a synchronous copy of a contiguous slice."""

    def __init__(self, torch, x_cpu, y_cpu, device: str, scale):
        self.x, self.y, self.device, self.scale = x_cpu, y_cpu, device, scale
        self.setup_h2d_bytes = 0
        self.epoch_h2d_bytes = (x_cpu.nbytes + y_cpu.nbytes) if device == "cuda" else 0

    def batch(self, lo: int, hi: int):
        x = self.x[lo:hi].to(self.device)
        return (x if self.scale is None else x.float().div_(self.scale)), \
            self.y[lo:hi].to(self.device)


class PinnedFeed(PageableFeed):
    """CPU tensors pinned once; per batch an async copy of a pinned slice on the current
    (compute) stream: no overlap with compute, no host synchronisation."""

    def __init__(self, torch, x_cpu, y_cpu, device: str, scale):
        super().__init__(torch, x_cpu.pin_memory(), y_cpu.pin_memory(), device, scale)
        mid = len(self.y) // 2
        if not (self.x[mid:mid + 1].is_pinned() and self.y[mid:mid + 1].is_pinned()):
            raise RuntimeError("a slice of the pinned tensor is not pinned: the per-batch copy "
                               "would be synchronous")

    def batch(self, lo: int, hi: int):
        x = self.x[lo:hi].to(self.device, non_blocking=True)
        return (x if self.scale is None else x.float().div_(self.scale)), \
            self.y[lo:hi].to(self.device, non_blocking=True)


FEEDS = {"resident": ResidentFeed, "pageable": PageableFeed, "pinned": PinnedFeed}


class Timer:
    """Host clock around the epoch (ending after a device sync) + CUDA events on the current
    stream; on the CPU gpu_ms is the host time."""

    def __init__(self, torch, device: str):
        self.torch, self.cuda = torch, device == "cuda"
        if self.cuda:
            self.start_ev = torch.cuda.Event(enable_timing=True)
            self.end_ev = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.start_ev.record()
        self.t0 = time.perf_counter()

    def stop(self) -> tuple[float, float]:
        if self.cuda:
            self.end_ev.record()
            self.torch.cuda.synchronize()
        wall = (time.perf_counter() - self.t0) * 1000.0
        gpu = self.start_ev.elapsed_time(self.end_ev) if self.cuda else wall
        return wall, gpu


def evaluate(torch, model, x, y, chunk: int = 2048) -> tuple[float, float]:
    F = torch.nn.functional
    n = int(y.shape[0])
    if n == 0:
        return 0.0, 0.0
    loss = torch.zeros((), dtype=torch.float64, device=x.device)
    correct = torch.zeros((), dtype=torch.int64, device=x.device)
    with torch.no_grad():
        for lo in range(0, n, chunk):
            logits = model(x[lo:lo + chunk])
            loss += F.cross_entropy(logits, y[lo:lo + chunk], reduction="sum").double()
            correct += (logits.argmax(1) == y[lo:lo + chunk]).sum()
    return float(loss) / n, float(correct) / n


class RunLog:
    """One run's record (docs/results_schema.md, schema 1), loss curve and console lines: what
    every PyTorch baseline writes. `strategy` is config.strategy (also the label of the printed
    lines); `extra_config` adds the baseline's own config keys."""

    def __init__(self, s: Settings, argv: list[str], torch, strategy: str, scenario: str,
                 extra_config: dict[str, Any], prog: str, out, err):
        a, d = s.args, s.data
        self.s, self.prog, self.out, self.err = s, prog, out, err
        self.torch = torch
        self.n_train = len(d.train_y)
        self.curve = None
        self.rec: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "run_id": make_run_id(),
            "started_at": iso_utc_now(), "status": "ok", "error": None, "argv": argv,
            "env": environment_json(torch, a.device),
            "config": {
                "strategy": strategy, "framework": "pytorch", **extra_config,
                "scenario": scenario, "transfer": a.transfer, "batch": s.batch,
                "hidden": s.hidden, "epochs": a.epochs, "lr": s.lr, "momentum": s.momentum,
                "seed": s.seed, "gemm": "torch", "tf32": False, "graphs": False,
                # memstrat's step keys: eager PyTorch runs each layer's ops as their own kernels.
                "fused": False, "fused_off_reason": "PyTorch eager", "step": "layer-by-layer",
                "single_launch_off_reason": "PyTorch eager", "epoch_launch": False,
                "epoch_launch_off_reason": "PyTorch eager", "depth": None,
                "streams": None, "advise": None, "profile": False,
                "run_tag": a.run_tag, "device": a.device, "eager": True,
                "train_acc_in_loop": a.train_acc,
                "init": str(Path(a.init).resolve()) if a.init else None,
                "order": s.order_source,
                "dataset": {"name": d.name, "path": d.source, "train_samples": self.n_train,
                            "test_samples": len(d.test_y)},
            },
            "epochs": [],
            "api_totals": None,  # memstrat's CUPTI counts; none here
        }

    def banner(self, details: str = "") -> None:
        s, a = self.s, self.s.args
        for w in s.warnings:
            print(f"{self.prog}: warning: " + w, file=self.err)
        if not a.quiet:
            print(f"{self.prog}: {self.rec['config']['strategy']} | {a.transfer} | batch "
                  f"{s.batch} | hidden {','.join(map(str, s.hidden))} | {a.epochs} epochs | "
                  f"{self.rec['env']['gpu_name'] or a.device} | torch {self.torch.__version__} | "
                  f"{self.n_train} train, {len(s.data.test_y)} test from {s.data.source}"
                  + details, file=self.out)

    def open_curve(self) -> None:
        if self.s.args.loss_curve:
            self.curve = open(self.s.args.loss_curve, "w")
            self.curve.write("epoch,batch,loss\n")

    def end_epoch(self, epoch: int, wall_ms: float, gpu_ms: float, h2d_bytes: int, losses: list,
                  corrects: list, rows, model, test_x, test_y,
                  extra: dict[str, Any] | None = None, note: str = "") -> None:
        """After the timed region: the epoch's losses (rows-weighted), evaluation, the record
        entry, the curve lines and the progress line. `losses` / `corrects` are per-batch
        tensors, `rows` a float64 tensor of the rows of each batch."""
        torch, a = self.torch, self.s.args
        batch_losses = torch.stack(losses).double().cpu()
        train_loss = float((batch_losses * rows).sum()) / self.n_train
        train_acc = float(torch.stack(corrects).sum().cpu()) / self.n_train if a.train_acc \
            else None
        test_loss, test_acc = evaluate(torch, model, test_x, test_y)
        if not all(math.isfinite(v) for v in (train_loss, test_loss)):
            raise RuntimeError(f"epoch {epoch}: loss is not finite (train {train_loss}, "
                               f"test {test_loss})")
        self.rec["epochs"].append({
            "epoch": epoch, "wall_ms": wall_ms, "gpu_ms": gpu_ms, "host_ms": 0.0,
            "copy_ms": None, "compute_ms": None, "stall_ms": None, "idle_ms": None,
            "h2d_bytes": h2d_bytes, "um_htod_bytes": None,
            "um_dtoh_bytes": None, "um_gpu_faults": None, "um_cpu_faults": None,
            "kernel_ms": None, "memcpy_ms": None, "api_calls": None,
            "train_loss": train_loss, "train_acc": train_acc, "test_loss": test_loss,
            "test_acc": test_acc, **(extra or {})})
        if self.curve is not None:
            self.curve.writelines(f"{epoch},{b},{v:.9g}\n"
                                  for b, v in enumerate(batch_losses.tolist()))
        if not a.quiet:
            acc = "-" if train_acc is None else f"{100 * train_acc:.2f}%"
            print(f"epoch {epoch:3d}/{a.epochs}  wall {wall_ms:9.2f} ms  gpu {gpu_ms:9.2f} ms"
                  f"  loss {train_loss:.4f}  train {acc}  test {100 * test_acc:.2f}%{note}",
                  file=self.out, flush=True)

    def finish(self, model, test_x, test_y) -> None:
        fin_loss, fin_acc = evaluate(self.torch, model, test_x, test_y)
        self.rec["summary"] = summary_json(self.rec["epochs"], self.n_train)
        self.rec["final"] = {"test_loss": fin_loss, "test_acc": fin_acc,
                             "samples_per_s": self.rec["summary"]["samples_per_s"]}
        self.rec["profiler_notes"] = []

    def failed(self, ex: Exception) -> int:
        """Any failure becomes a record marked "failed" (appended to --json); exit code 1."""
        rec, a = self.rec, self.s.args
        rec["status"] = "failed"
        rec["error"] = f"{type(ex).__name__}: {ex}"
        print(f"{self.prog}: run failed: {rec['error']}", file=self.err)
        if a.json:
            try:
                append_jsonl(a.json, rec)
                print(f"{self.prog}: a record marked \"failed\" was appended to {a.json}",
                      file=self.err)
            except OSError as e2:
                print(f"{self.prog}: could not write the failed record: {e2}", file=self.err)
        return EXIT_RUN_FAILED

    def execute(self, body) -> tuple[int, dict]:
        """Runs body() (set-up and epochs; returns the model, test_x and test_y of the final
        evaluation), then the summary and the record; any exception becomes a failed record."""
        try:
            self.finish(*body())
        except Exception as ex:  # noqa: BLE001 -- any failure becomes a "failed" record
            return self.failed(ex), self.rec
        finally:
            self.close()
        return self.report(), self.rec

    def close(self) -> None:
        if self.curve is not None:
            self.curve.close()
            self.curve = None

    def report(self) -> int:
        """The summary line, and the record appended to --json; exit code 0."""
        s, a, sm = self.s, self.s.args, self.rec["summary"]
        print(f"summary: {self.rec['config']['strategy']} {a.transfer} batch {s.batch} hidden "
              f"{','.join(map(str, s.hidden))}: median epoch {sm['wall_ms_median']:.2f} ms (min "
              f"{sm['wall_ms_min']:.2f}, max {sm['wall_ms_max']:.2f}, epochs 2..{a.epochs}), "
              f"epoch 1 {sm['epoch1_wall_ms']:.2f} ms, {sm['samples_per_s'] / 1e6:.2f} M "
              f"samples/s, test acc {100 * self.rec['final']['test_acc']:.2f}%",
              file=self.out, flush=True)
        if a.json:
            append_jsonl(a.json, self.rec)
        return EXIT_OK


def train_step(F, model, opt, x, y, losses: list, corrects: list | None) -> None:
    """One eager step as a user writes it. Keeps the loss (and, with a `corrects` list, the
    number of correct predictions) on the device: no host synchronisation."""
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.detach())
    if corrects is not None:
        corrects.append((logits.detach().argmax(1) == y).sum())


def torch_for(a: argparse.Namespace, prog: str, err):
    """torch with fp32 math, or None (after saying why) when --device cuda has no GPU."""
    torch = _import_torch()
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"{prog}: torch.cuda.is_available() is False; this needs an NVIDIA GPU "
              "(or --device cpu)", file=err)
        return None
    set_fp32_math(torch)
    return torch


def train(s: Settings, argv: list[str], out=None, err=None) -> tuple[int, dict | None]:
    """Runs the training; returns (exit code, the record or None when nothing ran)."""
    out, err = out or sys.stdout, err or sys.stderr
    a = s.args
    torch = torch_for(a, PROG, err)
    if torch is None:
        return EXIT_NO_DEVICE, None
    F = torch.nn.functional
    d = s.data
    n_train = len(d.train_y)
    log = RunLog(s, argv, torch, "pytorch-" + a.mode, "static", {"mode": a.mode}, PROG, out,
                 err)
    log.banner()

    def body():
        t_setup = time.perf_counter()
        if a.device == "cuda":
            torch.cuda.synchronize()
        # Put the training set in epoch order once (memstrat static: the host copy is written
        # in order at attach), then batch b = rows [b*B, (b+1)*B).
        order = s.order.astype(np.int64)
        x_host = d.train_x[order]
        if a.transfer == "f32":
            x_cpu, scale = torch.from_numpy(normalize(x_host)), None
        else:
            x_cpu = torch.from_numpy(np.ascontiguousarray(x_host))
            # A 0-d device tensor divides exactly (a CPU scalar would become a multiply).
            scale = torch.tensor(255.0, dtype=torch.float32, device=a.device)
        y_cpu = torch.from_numpy(d.train_y[order])
        feed = FEEDS[a.mode](torch, x_cpu, y_cpu, a.device, scale)
        test_x = torch.from_numpy(normalize(d.test_x)).to(a.device)
        test_y = torch.from_numpy(d.test_y).to(a.device)
        model = build_model(torch, s.layers, s.init, s.seed, a.device)
        opt = torch.optim.SGD(model.parameters(), lr=s.lr, momentum=s.momentum)
        timer = Timer(torch, a.device)
        if a.device == "cuda":
            torch.cuda.synchronize()
        log.rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                            "h2d_bytes": feed.setup_h2d_bytes + test_x.nbytes + test_y.nbytes
                            if a.device == "cuda" else 0}
        log.open_curve()
        bounds = [(lo, min(lo + s.batch, n_train)) for lo in range(0, n_train, s.batch)]
        rows = torch.tensor([hi - lo for lo, hi in bounds], dtype=torch.float64)

        for epoch in range(1, a.epochs + 1):
            losses, corrects = [], []
            timer.start()
            # ---- timed: what a user's eager loop does -----------------------------------
            for lo, hi in bounds:
                x, y = feed.batch(lo, hi)
                train_step(F, model, opt, x, y, losses, corrects if a.train_acc else None)
            wall_ms, gpu_ms = timer.stop()
            # ---- outside the timed region -----------------------------------------------
            log.end_epoch(epoch, wall_ms, gpu_ms, feed.epoch_h2d_bytes, losses, corrects, rows,
                          model, test_x, test_y)
        return model, test_x, test_y

    return log.execute(body)


def run_cli(argv: Sequence[str], parser: argparse.ArgumentParser, settings, train_fn,
            prog: str, out=None, err=None) -> tuple[int, dict | None]:
    """Parse, validate (settings(args) -> Settings) and train; (exit code, record or None)."""
    out, err = out or sys.stdout, err or sys.stderr
    args_list = list(argv)
    try:
        a = parser.parse_args(args_list)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return (EXIT_OK if e.code in (0, None) else EXIT_USAGE), None
    try:
        return train_fn(settings(a), [f"experiments/baselines/{prog}", *args_list], out, err)
    except UsageError as e:
        print(f"{prog}: {e}", file=err)
        return EXIT_USAGE, None


def run(argv: Sequence[str], out=None, err=None) -> tuple[int, dict | None]:
    """Parse, validate and train; (exit code, record or None). For in-process callers."""
    return run_cli(argv, build_parser(), Settings, train, PROG, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv)[0]


if __name__ == "__main__":
    sys.exit(main())
