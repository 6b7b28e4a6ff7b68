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
import sys
import time
from typing import Sequence

import numpy as np

import baseline_options
from baseline_options import add_run_options
from memstrat_inputs import UsageError, normalize
from pytorch_run import (EXIT_NO_DEVICE, RunLog, Timer, build_model, run_cli, torch_for,
                         train_step)

PROG = "pytorch_mlp.py"
MODES = ("pageable", "pinned", "resident")


# ---------------------------------------------------------------------------------------------
# options

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


class Settings(baseline_options.Settings):
    """The shared options plus --mode; no torch, no device."""

    def __init__(self, a: argparse.Namespace):
        if a.mode == "pinned" and a.device == "cpu":
            raise UsageError("--mode pinned needs --device cuda (pinned memory is a CUDA "
                             "allocation)")
        super().__init__(a)


# ---------------------------------------------------------------------------------------------
# feeding the GPU (torch imported lazily, by pytorch_run, so that option errors need no torch)

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


def run(argv: Sequence[str], out=None, err=None) -> tuple[int, dict | None]:
    """Parse, validate and train; (exit code, record or None). For in-process callers."""
    return run_cli(argv, build_parser(), Settings, train, PROG, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv)[0]


if __name__ == "__main__":
    sys.exit(main())
