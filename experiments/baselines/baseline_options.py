"""The options every PyTorch baseline shares (data, model, optimiser, device, outputs) and their
validation against memstrat's exported initial state, before torch is imported: a bad option or
input file is reported in milliseconds with exit code 2, on any machine."""
from __future__ import annotations

import argparse
import math
import os
from typing import Sequence

import numpy as np

from memstrat_inputs import (InitState, UsageError, load_mnist, memstrat_static_order,
                             resolve_data_dir)
from memstrat_stream import AUGMENTS, epoch_order


def parse_hidden(s: str) -> list[int]:
    try:
        h = [int(p) for p in s.split(",")]
    except ValueError:
        raise UsageError(f"--hidden {s!r}: expected sizes separated by commas, e.g. 256 or "
                         "512,256") from None
    if not h or any(v <= 0 for v in h):
        raise UsageError(f"--hidden {s!r}: layer sizes must be positive")
    return h


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


def add_data_parallel_run_options(p: argparse.ArgumentParser) -> None:
    """add_run_options as the anchors of --gpus N read them (pytorch_ddp.py,
    jax_data_parallel.py): memstrat's --transfer and the benchmark's epochs as defaults, --batch
    per GPU, the loss curve per global batch, CUDA only, no training accuracy."""
    add_run_options(p)
    p.set_defaults(transfer="u8", epochs=21)  # memstrat's --transfer; the benchmark's epochs
    helps = {"batch": "rows per GPU, a global batch being N x these (default 256, or --init's)",
             "loss_curve": "write each global batch's mean loss, CSV epoch,batch,loss",
             "device": "cuda only (the shared option; cpu is refused)",
             "train_acc": "refused: this anchor does not count training accuracy"}
    for act in p._actions:  # the shared options as these anchors read them
        act.help = helps.get(act.dest, act.help)


def check_appendable(path: str, what: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        os.close(fd)
    except OSError as e:
        raise UsageError(f"{what}: cannot open '{path}' for writing: {e.strerror} (does the "
                         "directory exist?)") from None


class Settings:
    """Validated options, resolved against --init's manifest; no torch, no device. `scenarios`:
    the memstrat scenarios whose exports (--init) the baseline reproduces."""

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
# what a run times (the fast baselines: config.measure)

MEASURES = {
    "epoch": "end to end: the input pipeline and every step (default)",
    "pipeline": "the input pipeline alone: each batch touched on the device by one small kernel "
                "instead of a step (--consumer none says the same)",
    "step": "the steps alone, the epoch's data already in place before the timer starts",
}


def add_measure_options(p: argparse.ArgumentParser, measures: Sequence[str]) -> None:
    """--measure (the choices `measures`, keys of MEASURES) and --consumer train|none."""
    p.add_argument("--measure", choices=measures, default=None,
                   help="what the epoch's timed region holds: " +
                        "; ".join(f"{m}: {MEASURES[m]}" for m in measures))
    p.add_argument("--consumer", choices=("train", "none"), default=None,
                   help="none: the batches go to no step (the same as --measure pipeline)")


def resolve_measure(a: argparse.Namespace) -> str:
    """--measure and --consumer, which must agree (UsageError otherwise); "epoch" by default."""
    if a.consumer == "none":
        if a.measure not in (None, "pipeline"):
            raise UsageError(f"--consumer none measures the pipeline alone; it contradicts "
                             f"--measure {a.measure}")
        measure = "pipeline"
    elif a.consumer == "train" and a.measure == "pipeline":
        raise UsageError("--measure pipeline runs no training step; it contradicts --consumer "
                         "train")
    else:
        measure = a.measure or "epoch"
    if a.train_acc and measure == "pipeline":
        raise UsageError("--train-acc counts a step's predictions; the pipeline measure runs no "
                         "step")
    return measure


class GpuResidentSettings(Settings):
    """The options of a baseline that keeps the u8 set and its step on the GPU and trains in
    memstrat's stream order (a splitmix64 permutation per epoch): --device cuda, --measure, and
    an --init export of the stream or refresh scenario of the same seed."""

    SCENARIOS = ("stream", "refresh")
    MEASURES = ("epoch", "pipeline", "step")

    def __init__(self, a: argparse.Namespace):
        self.measure = resolve_measure(a)
        if a.device != "cuda":
            raise UsageError("this baseline keeps its data and its step on the GPU: it needs "
                             "--device cuda")
        super().__init__(a, self.SCENARIOS)
        n = len(self.data.train_y)
        if self.init is not None and not np.array_equal(self.order, epoch_order(n, self.seed, 1)):
            raise UsageError(f"{self.init.dir}/order_epoch1.i32 is not the stream order of epoch "
                             f"1 for seed {self.seed}: the export is of another seed or scenario")
        self.order_source = "splitmix64-per-epoch"


def gpu_resident_parser(prog: str, description: str | None,
                        add_own=None) -> argparse.ArgumentParser:
    """The command line of a GpuResidentSettings baseline: --augment, the script's own options
    (`add_own(parser)`), --measure and the options every baseline shares."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--augment", choices=AUGMENTS, default="light",
                   help="per-sample augmentation, as memstrat's stream scenario (default "
                        "%(default)s)")
    if add_own is not None:
        add_own(p)
    add_measure_options(p, GpuResidentSettings.MEASURES)
    add_run_options(p)
    return p
