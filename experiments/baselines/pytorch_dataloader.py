#!/usr/bin/env python3
"""PyTorch DataLoader baseline for memstrat's stream scenario: the same MLP, per-epoch sample
order and augmentation, fed the way PyTorch users feed a GPU.

    python3 experiments/baselines/pytorch_dataloader.py --augment heavy --workers 4 \\
        --pin-memory on --epochs 5 --json results/dataloader.jsonl

Every epoch draws a fresh permutation (memstrat's: splitmix64 Fisher-Yates seeded with
seed * 0x100000001B3 + epoch); batch b is the gather of rows [b*B, (b+1)*B) of it, each sample
augmented by a function of (seed, epoch, row) only (--augment none | light: the ±2 px shift |
heavy: a random affine warp with bilinear sampling), bit for bit as memstrat's producers make
them (memstrat_stream.py, tested against the C++ output). The training is pytorch_mlp.py's (both
take it from pytorch_run.py): Linear/ReLU layers, mean softmax cross-entropy, SGD with momentum,
fp32 (TF32 off), eager.

The data path is a map-style dataset + torch.utils.data.DataLoader:
  --workers N            num_workers (0: the training process loads and augments itself)
  --fetch sample         __getitem__ per sample + default collation (what a user writes)
  --fetch batch          one __getitem__ per batch, augmented as one numpy array (batch_size=None
                         with a sampler of whole batches: the fastest pure-PyTorch form)
  --pin-memory on|off    pin_memory (a pin thread copies each batch into page-locked memory)
  --non-blocking on|off  .to("cuda", non_blocking=...) of each batch
  --prefetch-factor K    batches each worker loads ahead (workers > 0)
  --persistent-workers   keep the worker processes between epochs (workers > 0)
  --transfer f32|u8      normalise in the workers (f32) or move uint8 and normalise on the device

Timing (per epoch, as pytorch_mlp.py): wall_ms = perf_counter around the epoch, ending after
torch.cuda.synchronize(); gpu_ms = CUDA events. The epoch starts before iter(loader), so
worker start-up without persistent workers is part of it, as in a user's loop; computing the
permutation is not (memstrat computes it in begin_epoch). input_wait_ms is the time the loop
blocked on the loader (iter() plus every next()): the training starved for input;
input_wait_first_ms the part until the first batch arrived (filling the pipeline).

Writes one JSON Lines record per run (--json, docs/schema/run_record.schema.json, schema 1) with
config.strategy = "pytorch-dataloader", scenario "stream" and the loader settings in config.
--init DIR loads memstrat's exported weights (a stream or refresh export; its epoch-1 order must
equal this script's). Exit codes as pytorch_mlp.py: 0 ok, 1 run failed, 2 bad option, 3 no GPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_options  # noqa: E402  (the options shared with pytorch_mlp.py)
import pytorch_run as pr  # noqa: E402  (model, timing, step, record: shared with pytorch_mlp.py)
from memstrat_inputs import Mnist, UsageError, normalize  # noqa: E402
from memstrat_stream import AUGMENTS, augment, epoch_order  # noqa: E402

PROG = "pytorch_dataloader.py"
SCENARIOS = ("stream", "refresh")  # --init exports whose data this reproduces


# ---------------------------------------------------------------------------------------------
# dataset and samplers (plain classes: DataLoader needs __getitem__ / __iter__, not torch types)

class StreamSamples:
    """memstrat's stream data. Key (epoch, row, sample) -> (image, label) of one sample;
    (epoch, first_row, samples[]) -> a whole batch. Images uint8 [features] (or [n, features])
    for --transfer u8, normalised float32 for f32; labels int64."""

    def __init__(self, data: Mnist, kind: str, seed: int, transfer: str):
        self.images = data.train_x.reshape(-1, data.rows, data.cols)
        self.labels = data.train_y
        self.kind, self.seed, self.transfer = kind, seed, transfer

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key):
        epoch, row, sample = key
        one = np.ndim(sample) == 0
        samples = np.atleast_1d(np.asarray(sample, dtype=np.int64))
        rows = row + np.arange(samples.size, dtype=np.int64)
        x = augment(self.kind, self.images[samples], self.seed, epoch, rows)
        x = x.reshape(samples.size, -1)
        if self.transfer == "f32":
            x = normalize(x)
        y = self.labels[samples]
        return (x[0], y[0]) if one else (x, y)


class EpochSamples:
    """Sampler of one key per sample, in the current epoch's order (set_epoch before iter)."""

    def __init__(self, n: int):
        self.n, self.epoch, self.order = n, 0, np.arange(n)

    def set_epoch(self, epoch: int, order: np.ndarray) -> None:
        self.epoch, self.order = epoch, order

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        e, o = self.epoch, self.order
        return ((e, i, int(o[i])) for i in range(self.n))


class EpochBatches(EpochSamples):
    """Sampler of one key per batch: (epoch, first row, the batch's samples)."""

    def __init__(self, n: int, batch: int):
        super().__init__(n)
        self.batch = batch

    def __len__(self) -> int:
        return (self.n + self.batch - 1) // self.batch

    def __iter__(self):
        e, o, b = self.epoch, self.order, self.batch
        return ((e, lo, o[lo:lo + b]) for lo in range(0, self.n, b))


# ---------------------------------------------------------------------------------------------
# options

def on_off(s: str) -> bool:
    if s not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"{s!r}: expected on or off")
    return s == "on"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Sweep: for w in 0 2 4 8; do pytorch_dataloader.py --workers $w --augment heavy "
               "--json dl.jsonl -q; done")
    p.add_argument("--augment", choices=AUGMENTS, default="light",
                   help="per-sample augmentation, as memstrat's stream scenario (default "
                        "%(default)s)")
    p.add_argument("--workers", type=int, default=4,
                   help="DataLoader num_workers (default %(default)s; 0 loads in this process)")
    p.add_argument("--fetch", choices=("sample", "batch"), default="sample",
                   help="sample: __getitem__ per sample + collation; batch: one __getitem__ per "
                        "batch (default %(default)s)")
    p.add_argument("--pin-memory", type=on_off, default=True, metavar="on|off",
                   help="DataLoader pin_memory (default on; needs --device cuda)")
    p.add_argument("--non-blocking", type=on_off, default=True, metavar="on|off",
                   help="copy batches with .to(non_blocking=True) (default on)")
    p.add_argument("--prefetch-factor", type=int, default=None,
                   help="batches loaded ahead per worker (default: torch's, 2; needs --workers "
                        "> 0)")
    p.add_argument("--persistent-workers", type=on_off, default=None, metavar="on|off",
                   help="keep workers between epochs (default: on when --workers > 0)")
    baseline_options.add_run_options(p)
    return p


class Settings(baseline_options.Settings):
    """The shared validated options plus the loader's; no torch, no device."""

    def __init__(self, a: argparse.Namespace):
        super().__init__(a, SCENARIOS)
        if a.workers < 0:
            raise UsageError("--workers must be >= 0")
        if a.prefetch_factor is not None:
            if a.workers == 0:
                raise UsageError("--prefetch-factor needs --workers > 0 (without workers "
                                 "nothing loads ahead)")
            if a.prefetch_factor < 1:
                raise UsageError("--prefetch-factor must be >= 1")
        if a.persistent_workers is None:
            a.persistent_workers = a.workers > 0
        elif a.persistent_workers and a.workers == 0:
            raise UsageError("--persistent-workers on needs --workers > 0")
        if a.pin_memory and a.device == "cpu":
            raise UsageError("--pin-memory on needs --device cuda (pinned memory is a CUDA "
                             "allocation); pass --pin-memory off")
        n = len(self.data.train_y)
        if self.init is not None:
            first = epoch_order(n, self.seed, 1)
            if not np.array_equal(self.order, first):
                raise UsageError(f"{self.init.dir}/order_epoch1.i32 is not the stream order "
                                 f"of epoch 1 for seed {self.seed}: the export is of another "
                                 "seed or scenario")
        self.order_source = "splitmix64-per-epoch"


# ---------------------------------------------------------------------------------------------
# training

def make_loader(torch, s: Settings):
    a = s.args
    data = StreamSamples(s.data, a.augment, s.seed, a.transfer)
    n = len(data)
    kw: dict[str, Any] = {"num_workers": a.workers, "pin_memory": a.pin_memory,
                          "persistent_workers": a.persistent_workers}
    if a.prefetch_factor is not None:
        kw["prefetch_factor"] = a.prefetch_factor
    if a.fetch == "sample":
        sampler = EpochSamples(n)
        loader = torch.utils.data.DataLoader(data, batch_size=s.batch, sampler=sampler,
                                             drop_last=False, **kw)
    else:
        sampler = EpochBatches(n, s.batch)
        loader = torch.utils.data.DataLoader(data, batch_size=None, sampler=sampler, **kw)
    return loader, sampler


def train(s: Settings, argv: list[str], out=None, err=None) -> tuple[int, dict | None]:
    out, err = out or sys.stdout, err or sys.stderr
    a = s.args
    torch = pr.torch_for(a, PROG, err)
    if torch is None:
        return pr.EXIT_NO_DEVICE, None
    F = torch.nn.functional
    d = s.data
    n_train = len(d.train_y)
    loader_config = {"augment": a.augment, "workers": a.workers, "fetch": a.fetch,
                     "pin_memory": a.pin_memory, "non_blocking": a.non_blocking,
                     # torch loads 2 batches ahead per worker unless told otherwise
                     "prefetch_factor": (a.prefetch_factor or 2) if a.workers else None,
                     "persistent_workers": a.persistent_workers}
    log = pr.RunLog(s, argv, torch, "pytorch-dataloader", "stream", loader_config, PROG, out,
                    err)
    log.banner(f" | {a.augment}, {a.workers} workers, fetch {a.fetch}, pin_memory "
               f"{'on' if a.pin_memory else 'off'}")

    def body():
        t_setup = time.perf_counter()
        loader, sampler = make_loader(torch, s)
        test_x = torch.from_numpy(normalize(d.test_x)).to(a.device)
        test_y = torch.from_numpy(d.test_y).to(a.device)
        model = pr.build_model(torch, s.layers, s.init, s.seed, a.device)
        opt = torch.optim.SGD(model.parameters(), lr=s.lr, momentum=s.momentum)
        # u8: normalise on the device; a 0-d device tensor divides exactly as memstrat does.
        scale = torch.tensor(255.0, dtype=torch.float32, device=a.device) \
            if a.transfer == "u8" else None
        timer = pr.Timer(torch, a.device)
        on_gpu = a.device == "cuda"
        if on_gpu:
            torch.cuda.synchronize()
        log.rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                            "h2d_bytes": test_x.nbytes + test_y.nbytes if on_gpu else 0}
        log.open_curve()
        row_bytes = d.features * (4 if a.transfer == "f32" else 1) + 8  # + int64 label
        rows = torch.tensor([min(s.batch, n_train - lo) for lo in range(0, n_train, s.batch)],
                            dtype=torch.float64)
        nb = a.non_blocking

        for epoch in range(1, a.epochs + 1):
            sampler.set_epoch(epoch, epoch_order(n_train, s.seed, epoch))
            losses, corrects = [], []
            timer.start()
            # ---- timed: what a user's loop does, with the waits on the loader measured ----
            t0 = time.perf_counter()
            batches = iter(loader)
            wait = time.perf_counter() - t0
            first_wait = None
            for _ in range(len(rows)):
                t0 = time.perf_counter()
                x, y = next(batches)
                wait += time.perf_counter() - t0
                if first_wait is None:
                    first_wait = wait
                x, y = x.to(a.device, non_blocking=nb), y.to(a.device, non_blocking=nb)
                if scale is not None:
                    x = x.float().div_(scale)
                pr.train_step(F, model, opt, x, y, losses, corrects if a.train_acc else None)
            wall_ms, gpu_ms = timer.stop()
            # ---- outside the timed region -----------------------------------------------
            del batches  # non-persistent workers shut down here, outside the epoch
            log.end_epoch(epoch, wall_ms, gpu_ms, n_train * row_bytes if on_gpu else 0,
                          losses, corrects, rows, model, test_x, test_y,
                          extra={"input_wait_ms": wait * 1000.0,
                                 "input_wait_first_ms": first_wait * 1000.0},
                          note=f"  input wait {wait * 1000.0:9.2f} ms")
        return model, test_x, test_y

    return log.execute(body)


run, main = pr.entry_points(build_parser, Settings, train, PROG)


if __name__ == "__main__":
    sys.exit(main())
