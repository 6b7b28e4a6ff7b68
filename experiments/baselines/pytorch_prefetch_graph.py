#!/usr/bin/env python3
"""The strongest host-fed PyTorch pipeline for memstrat's stream scenario: the DataLoader of
pytorch_dataloader.py (host worker processes, pin_memory, persistent workers; the same order and
augmented bytes), a side-stream prefetcher, and the step as one CUDA graph.

    python3 experiments/baselines/pytorch_prefetch_graph.py --augment light --workers 8 \\
        --epochs 21 --json results/prefetch_graph.jsonl

Prefetcher: batch i+1 is taken from the loader and copied to the GPU (non_blocking, from the
pinned batch) on a stream of its own while batch i trains; before batch i+1's step the compute
stream waits for that stream (wait_stream) and the batch's device memory is marked as used by
the compute stream (record_stream), so the caching allocator does not hand it out again while
the step still reads it. The step (torch_step.GraphStep: forward + backward + SGD captured with
torch.cuda.graph after side-stream warm-up, one graph for the full batch and one for the
epoch's last, partial batch) reads static input buffers; the prefetched batch is copied into
them on the device. The graphs are captured before the loader's first iterator exists, so no
pinning thread allocates pinned memory during a capture.

--measure (config.measure): epoch (end to end, default) or pipeline (the DataLoader and the
prefetcher deliver every batch to the GPU, where one small kernel touches it instead of a
step; --consumer none says the same). The step alone is pytorch_gpu_resident.py --measure
step: the same graph on data already in place.

Loader options, timing, input waits, record and exit codes as pytorch_dataloader.py; config.
strategy "pytorch-dataloader-prefetch-graph". Needs a CUDA GPU.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_options  # noqa: E402
import pytorch_dataloader as dl  # noqa: E402  (the loader, its options and checks)
import pytorch_run as pr  # noqa: E402
from memstrat_inputs import UsageError, normalize  # noqa: E402
from memstrat_stream import epoch_order  # noqa: E402
from torch_step import GraphStep, make_sgd  # noqa: E402

PROG = "pytorch_prefetch_graph.py"
MEASURES = ("epoch", "pipeline")


def build_parser():
    p = dl.build_parser()
    p.prog, p.description = PROG, __doc__
    p.epilog = None
    baseline_options.add_measure_options(p, MEASURES)
    return p


class Settings(dl.Settings):
    def __init__(self, a):
        self.measure = baseline_options.resolve_measure(a)
        if a.device != "cuda":
            raise UsageError("this baseline copies on a CUDA stream and replays CUDA graphs: it "
                             "needs --device cuda")
        super().__init__(a)


class SidePrefetcher:
    """Batches of a loader iterator, each copied to the device on a side stream one batch ahead
    of its use. `wait_s` adds up the time blocked in next() on the loader."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.stream = torch.cuda.Stream()
        self.wait_s, self.first_wait_s = 0.0, None

    def start(self, batches, t_iter: float) -> None:
        self.batches, self.wait_s, self.first_wait_s = batches, t_iter, None
        self._load()

    def _load(self) -> None:
        t0 = time.perf_counter()
        try:
            x, y = next(self.batches)
        except StopIteration:
            self.next = None
            return
        self.wait_s += time.perf_counter() - t0
        if self.first_wait_s is None:
            self.first_wait_s = self.wait_s
        with self.torch.cuda.stream(self.stream):
            self.next = (x.to(self.device, non_blocking=True),
                         y.to(self.device, non_blocking=True))

    def take(self):
        """The next batch on the device, usable on the current stream; starts the copy of the
        one after it."""
        cur = self.torch.cuda.current_stream()
        cur.wait_stream(self.stream)
        x, y = self.next
        x.record_stream(cur)
        y.record_stream(cur)
        self._load()
        return x, y


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
    cfg = {"augment": a.augment, "workers": a.workers, "fetch": a.fetch,
           "pin_memory": a.pin_memory, "non_blocking": a.non_blocking,
           "prefetch_factor": (a.prefetch_factor or 2) if a.workers else None,
           "persistent_workers": a.persistent_workers}
    log = pr.RunLog(s, argv, torch, "pytorch-dataloader-prefetch-graph", "stream", cfg, PROG,
                    out, err)
    log.rec["config"].update({
        "graphs": True, "eager": False, "step_form": "graph", "measure": s.measure,
        "consumer": "none" if s.measure == "pipeline" else "train", "augment_device": "host",
        "prefetcher": "side-stream", "fused_off_reason": "PyTorch, step graph",
        "single_launch_off_reason": "PyTorch, step graph",
        "epoch_launch_off_reason": "PyTorch, step graph"})
    log.banner(f" | {a.augment}, {a.workers} workers, side-stream prefetch, step graph, "
               f"measure {s.measure}")

    def body():
        t_setup = time.perf_counter()
        dev = torch.device("cuda")
        test_x = torch.from_numpy(normalize(d.test_x)).to(dev)
        test_y = torch.from_numpy(d.test_y).to(dev)
        model = pr.build_model(torch, s.layers, s.init, s.seed, "cuda")
        opt = make_sgd(torch, model, s.lr, s.momentum)
        u8 = a.transfer == "u8"
        scale = torch.tensor(255.0, dtype=torch.float32, device=dev) if u8 else None
        xdtype = torch.uint8 if u8 else torch.float32
        step = GraphStep(torch, model, opt, scale, n_batches, a.train_acc)
        static = {}
        for name, rows in (("full", B if full else 0), ("tail", tail)):
            if rows:
                static[name] = (torch.zeros((rows, d.features), dtype=xdtype, device=dev),
                                torch.zeros(rows, dtype=torch.int64, device=dev))
                if s.measure == "epoch":
                    step.capture(name, lambda sx=static[name]: sx)
        loader, sampler = dl.make_loader(torch, s)   # no iterator yet: nothing pins memory
        prefetch = SidePrefetcher(torch, dev)
        sink = torch.zeros((), dtype=torch.int64, device=dev)
        timer = pr.Timer(torch, "cuda")
        torch.cuda.synchronize()
        log.rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                            "h2d_bytes": test_x.nbytes + test_y.nbytes}
        log.open_curve()
        row_bytes = d.features * (1 if u8 else 4) + 8
        rows = torch.tensor([min(B, n - lo) for lo in range(0, n, B)], dtype=torch.float64)
        for epoch in range(1, a.epochs + 1):
            sampler.set_epoch(epoch, epoch_order(n, s.seed, epoch))
            step.begin_epoch()
            timer.start()
            # ---- timed ------------------------------------------------------------------
            t0 = time.perf_counter()
            batches = iter(loader)
            prefetch.start(batches, time.perf_counter() - t0)
            for b in range(n_batches):
                x, y = prefetch.take()
                if s.measure == "pipeline":
                    sink.add_(x[-1, -1].to(torch.int64))
                    continue
                name = "full" if b < full else "tail"
                sx, sy = static[name]
                sx.copy_(x)
                sy.copy_(y)
                step.replay(name)
            wall_ms, gpu_ms = timer.stop()
            # ---- outside the timed region -----------------------------------------------
            del batches, x, y
            if s.measure == "pipeline":
                losses, corrects = [torch.zeros((), device=dev)] * n_batches, []
            else:
                losses, corrects = step.out.lists()
            log.end_epoch(epoch, wall_ms, gpu_ms, n * row_bytes, losses, corrects, rows, model,
                          test_x, test_y,
                          extra={"input_wait_ms": prefetch.wait_s * 1000.0,
                                 "input_wait_first_ms": prefetch.first_wait_s * 1000.0},
                          note=f"  input wait {prefetch.wait_s * 1000.0:9.2f} ms")
        return model, test_x, test_y

    return log.execute(body)


run, main = pr.entry_points(build_parser, Settings, train, PROG)


if __name__ == "__main__":
    sys.exit(main())
