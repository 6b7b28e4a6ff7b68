"""What memstrat's training starts from, read the way memstrat reads it (numpy only, no torch):
the MNIST IDX files and the data directory, the float normalisation, memstrat's sample order
(memory_strategies/epoch_data.cpp) and the initial state `memstrat train --export-init DIR`
writes. pytorch_mlp.py trains on exactly these, so its loss curve can be compared with
memstrat's batch by batch."""
from __future__ import annotations

import gzip
import math
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_ENV_VAR = "MEMSTRAT_DATA"
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
    """--data, else $MEMSTRAT_DATA, else `fallback` (a manifest's path), else data/mnist
    (relative to the working directory, then to the repository)."""
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
        candidates.append(base / "data" / "mnist")
    for c in candidates:
        if c.is_dir() and _find_part(c, _PARTS["train_x"]) is not None:
            return c.resolve()
    raise UsageError("no MNIST directory found (tried " + ", ".join(str(c) for c in candidates)
                     + "); run experiments/scripts/get_mnist.py or pass --data DIR")


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
                raise UsageError(f"{directory}: missing {base}(.gz); run experiments/scripts/get_mnist.py")
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
    """The files of `memstrat train --export-init DIR`, checked against each other. `scenarios`
    are the scenarios whose data the reading baseline reproduces (the first is the one to
    export with); an export of any other scenario is a usage error."""

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
