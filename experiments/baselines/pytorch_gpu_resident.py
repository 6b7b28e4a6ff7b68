#!/usr/bin/env python3
"""The strongest all-on-the-GPU PyTorch pipeline for memstrat's stream scenario: the uint8 data
set resident on the GPU, each epoch's permutation and augmentation made there with torch ops,
and the step as one CUDA graph (--step graph) or under torch.compile(mode="reduce-overhead")
(--step compile).

    python3 experiments/baselines/pytorch_gpu_resident.py --augment heavy --step graph \\
        --epochs 21 --json results/gpu_resident.jsonl

Same model, initial weights (--init DIR from `memstrat train --export-init`), sample order
(memstrat's splitmix64 permutation per epoch) and augmented bytes as memstrat's stream scenario:
the draws of every row are computed with numpy on the host (memstrat_stream.py) and uploaded
once per epoch, the pixels are made on the device (torch_augment.py: light bit for bit; heavy
in memstrat's float32 operation order, gpu_augment_check.py measures the bytes that agree).

Per epoch: the permutation is computed before the timer starts (as the DataLoader baseline and
memstrat's begin_epoch); then, timed: the draws, their and the permutation's upload (pinned,
non_blocking), the gather of the resident images and labels into the epoch's buffers, the
augmentation, and the steps. With --step graph the graph selects its batch itself (an index
that the graph advances), so a step is one graph launch.

--measure picks what the timed region holds (config.measure):
  epoch     end to end: the permutation's upload, augmentation and every step (default)
  pipeline  the input pipeline alone: the epoch's data made as above, each batch then touched
            on the device by one small kernel instead of a step (--consumer none says the same)
  step      the steps alone, the epoch's data already made before the timer starts

Writes one JSON Lines record per run (--json, docs/schema/run_record.schema.json, schema 1),
config.strategy "pytorch-gpu-resident-graph" or "-compile", scenario "stream". Needs a CUDA
GPU. Exit codes: 0 ok, 1 run failed, 2 bad option, 3 no GPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_options  # noqa: E402
import pytorch_run as pr  # noqa: E402
import torch_augment as ta  # noqa: E402
from memstrat_inputs import normalize  # noqa: E402
from memstrat_stream import epoch_order  # noqa: E402
from torch_step import STEP_FORMS, CompiledStep, GraphStep, make_sgd  # noqa: E402

PROG = "pytorch_gpu_resident.py"


def build_parser() -> argparse.ArgumentParser:
    def step_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--step", choices=STEP_FORMS, default="graph",
                       help="graph: torch.cuda.graph of the whole step; compile: torch.compile("
                            "mode='reduce-overhead') (default %(default)s)")
    return baseline_options.gpu_resident_parser(PROG, __doc__, step_option)


Settings = baseline_options.GpuResidentSettings


class EpochData:
    """The resident data set and the epoch's buffers: images u8 [n, rows, cols] and labels on the
    device; per epoch the uploaded permutation and draws, and the augmented epoch x [n, features],
    y [n] in order (fixed addresses, which the graphs read)."""

    def __init__(self, torch, s: Settings, dev):
        d = s.data
        self.torch, self.kind, self.seed, self.n = torch, s.args.augment, s.seed, len(d.train_y)
        self.images = torch.from_numpy(d.train_x.reshape(-1, d.rows, d.cols)).to(dev)
        self.labels = torch.from_numpy(d.train_y).to(dev)
        self.order_host = torch.empty(self.n, dtype=torch.int64).pin_memory()
        self.order = torch.empty(self.n, dtype=torch.int64, device=dev)
        draws = ta.epoch_draws(self.kind, self.seed, 1, self.n)
        self.draws_host = None if draws is None else torch.from_numpy(draws).pin_memory()
        self.draws = None if draws is None else torch.empty_like(self.draws_host, device=dev)
        # zeros, not empty: the graph step's warm-up (before the first epoch is made) trains on
        # them, and cross_entropy asserts on the device for a label outside 0..9
        self.x = torch.zeros((self.n, d.features), dtype=torch.uint8, device=dev)
        self.y = torch.zeros(self.n, dtype=torch.int64, device=dev)
        self.setup_h2d_bytes = self.images.nbytes + self.labels.nbytes
        self.epoch_h2d_bytes = self.order.nbytes + (0 if draws is None else self.draws.nbytes)

    def make(self, epoch: int, order: np.ndarray) -> None:
        """The epoch's data, enqueued on the current stream (the host buffers are free again
        once the epoch has been synchronised, which the timer does)."""
        torch = self.torch
        self.order_host.copy_(torch.from_numpy(order.astype(np.int64)))
        self.order.copy_(self.order_host, non_blocking=True)
        if self.draws is not None:
            self.draws_host.copy_(torch.from_numpy(ta.epoch_draws(self.kind, self.seed, epoch,
                                                                  self.n)))
            self.draws.copy_(self.draws_host, non_blocking=True)
        src = self.images.index_select(0, self.order)
        self.x.copy_(ta.augment(torch, self.kind, src, self.draws).view(self.n, -1))
        torch.index_select(self.labels, 0, self.order, out=self.y)


def train(s: Settings, argv: list[str], out=None, err=None) -> tuple[int, dict | None]:
    out, err = out or sys.stdout, err or sys.stderr
    a = s.args
    torch = pr.torch_for(a, PROG, err)
    if torch is None:
        return pr.EXIT_NO_DEVICE, None
    d, n = s.data, len(s.data.train_y)
    B = s.batch
    full, tail = n // B, n % B
    n_batches = full + (tail > 0)
    log = pr.RunLog(s, argv, torch, f"pytorch-gpu-resident-{a.step}", "stream",
                    {"augment": a.augment}, PROG, out, err)
    log.rec["config"].update({
        "graphs": a.step == "graph", "eager": False, "step_form": a.step,
        "measure": s.measure, "consumer": "none" if s.measure == "pipeline" else "train",
        "augment_device": "gpu", "workers": None, "prefetch": None,
        "fused_off_reason": f"PyTorch, step {a.step}", "single_launch_off_reason":
        f"PyTorch, step {a.step}", "epoch_launch_off_reason": f"PyTorch, step {a.step}"})
    log.banner(f" | {a.augment} on the GPU, step {a.step}, measure {s.measure}")

    def body():
        t_setup = time.perf_counter()
        dev = torch.device("cuda")
        data = EpochData(torch, s, dev)
        test_x = torch.from_numpy(normalize(d.test_x)).to(dev)
        test_y = torch.from_numpy(d.test_y).to(dev)
        model = pr.build_model(torch, s.layers, s.init, s.seed, "cuda")
        opt = make_sgd(torch, model, s.lr, s.momentum)
        scale = torch.tensor(255.0, dtype=torch.float32, device=dev)
        StepForm = GraphStep if a.step == "graph" else CompiledStep
        step = StepForm(torch, model, opt, scale, n_batches, a.train_acc)
        if a.step == "graph":
            if full:
                xb, yb = data.x[:full * B].view(full, B, -1), data.y[:full * B].view(full, B)
                step.capture("full", lambda: (xb.index_select(0, step.idx).view(B, -1),
                                              yb.index_select(0, step.idx).view(B)))
            if tail:
                step.capture("tail", lambda: (data.x[full * B:], data.y[full * B:]))
        sink = torch.zeros((), dtype=torch.int64, device=dev)
        timer = pr.Timer(torch, "cuda")
        torch.cuda.synchronize()
        log.rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                            "h2d_bytes": data.setup_h2d_bytes + test_x.nbytes + test_y.nbytes}
        log.open_curve()
        rows = torch.tensor([min(B, n - lo) for lo in range(0, n, B)], dtype=torch.float64)

        for epoch in range(1, a.epochs + 1):
            order = epoch_order(n, s.seed, epoch)
            if s.measure == "step":
                data.make(epoch, order)
            step.begin_epoch()
            timer.start()
            # ---- timed ------------------------------------------------------------------
            if s.measure != "step":
                data.make(epoch, order)
            if s.measure == "pipeline":
                for lo in range(0, n, B):   # the consumer touches one byte of each batch
                    sink.add_(data.x[min(lo + B, n) - 1, -1])
            elif a.step == "graph":
                for _ in range(full):
                    step.replay("full")
                if tail:
                    step.replay("tail")
            else:
                for b, lo in enumerate(range(0, n, B)):
                    step.run(b, data.x[lo:lo + B], data.y[lo:lo + B])
            wall_ms, gpu_ms = timer.stop()
            # ---- outside the timed region -----------------------------------------------
            if s.measure == "pipeline":
                losses, corrects = [torch.zeros((), device=dev)] * n_batches, []
            else:
                losses, corrects = step.out.lists()
            log.end_epoch(epoch, wall_ms, gpu_ms, data.epoch_h2d_bytes, losses,
                          corrects if a.train_acc else [], rows, model, test_x, test_y)
        return model, test_x, test_y

    return log.execute(body)


run, main = pr.entry_points(build_parser, Settings, train, PROG)


if __name__ == "__main__":
    sys.exit(main())
