#!/usr/bin/env python3
"""The PyTorch DistributedDataParallel anchor of `memstrat train --gpus N --strategy resident
--scenario static`: data-parallel training of the same MLP on N GPUs of one host.

    NCCL_NVLS_ENABLE=0 python3 experiments/baselines/pytorch_ddp.py --gpus 2 --step graph \\
        --epochs 21 --json results/ddp.jsonl
    NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 experiments/baselines/pytorch_ddp.py ...

One process per GPU: started here with torch.multiprocessing.spawn (rendezvous on 127.0.0.1 and
a free port), or, when torchrun started this process (RANK, WORLD_SIZE and LOCAL_RANK set), the
one torchrun gives. NCCL backend, init_process_group(device_id=cuda:LOCAL_RANK).

As memstrat (experiments/core/shard_plan.h): a global batch is N x --batch rows of the epoch's
order, rank r's shard its rows [r*B, (r+1)*B); the last global batch fills the shards in order
(full ones, at most one partial, the rest empty). The static scenario keeps ONE order for every
epoch (memstrat's EpochWriter::order; --init's order_epoch1.i32, else the splitmix64 shuffle of
--seed). Every GPU holds the whole data set (u8 pixels, normalised on the device as memstrat's
float(pixel) / 255.0f; --transfer f32: the normalised floats) and the order; each step gathers
its shard's rows on the GPU (index_select of the order's slice, then of the images).

The step: DistributedDataParallel(model, device_ids=[rank], gradient_as_bucket_view=True: the
gradients ARE views of DDP's all-reduce buckets, no copy into them and fixed addresses for the
graph; static_graph=True: every step uses every parameter, so DDP skips the search for unused
ones and fixes its buckets after the first step). Loss: each rank's local mean; DDP averages the
ranks' gradients, which is the gradient of the global mean when the shards are equal. In a
partial last global batch of R rows each rank's loss is instead the SUM of its rows' losses x
N/R (an empty shard: 0 rows, a zero gradient that still joins the all-reduce), so DDP's average
is the gradient of the mean over the R rows, as memstrat's 1/R factor per shard (ddp_plan.py).
SGD with momentum, zero_grad(set_to_none=False) (the bucket views stay).

--step graph (default): the whole DDP step (forward, backward with DDP's all-reduces, the
optimizer) as one torch.cuda.graph, as PyTorch's CUDA-graphs notes require for DDP: NCCL >=
2.9.6, TORCH_NCCL_ASYNC_ERROR_HANDLING=0 before init_process_group, DDP constructed on a side
stream, 11 eager DDP steps (of the first global batch) before the capture; the parameters are
restored and the momentum zeroed after them. One side stream carries all of a rank's work (DDP's
construction, the warm-up, the capture, the replays and any eager step), so the AccumulateGrad
nodes DDP keeps belong to the stream that captures and replays. The graph advances its own batch
index. A partial last global batch runs eagerly, once per epoch. --step eager: every step eager.

Timing (rank 0 reports): per epoch, after a barrier, the host clock and CUDA events around the
epoch on each rank; the epoch's wall_ms and gpu_ms are the largest over the ranks. Epoch 1 apart,
the summary is the median of epochs 2..E. The loss curve (--loss-curve, CSV epoch,batch,loss) has
one line per global batch: its mean loss over its rows (the ranks' values gathered and summed in
rank order, divided by N). The test set is evaluated on rank 0.

--json appends one record (docs/schema/run_record.schema.json, schema 1), config.strategy
"pytorch-ddp-graph" or "pytorch-ddp-eager", with config.gpus, per_gpu_batch, global_batch and
ddp, env.nccl. Refuses to start unless NCCL_NVLS_ENABLE=0. Exit codes: 0 ok, 1 run failed, 2 bad
option (before torch is imported), 3 no PyTorch, CUDA, NCCL or second GPU.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_options  # noqa: E402
import ddp_plan as dp  # noqa: E402
import pytorch_run as pr  # noqa: E402  (imports torch only when called)
from memstrat_inputs import UsageError, normalize  # noqa: E402
from nccl_env import import_torch_cuda  # noqa: E402
from torch_step import make_sgd  # noqa: E402

PROG = "pytorch_ddp.py"
EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_NO_DEVICE = 0, 1, 2, 3
STEPS = ("graph", "eager")
DDP_WARMUP_STEPS = 11  # PyTorch's CUDA-graphs notes: at least 11 eager DDP steps before capture
DDP_BUCKET_CAP_MB = 25  # DistributedDataParallel's default, named in the record


class NoDevice(RuntimeError):
    """No PyTorch, CUDA, NCCL or second GPU: exit code 3."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, metavar="N",
                   help="GPUs 0..N-1, N >= 2 (default: every visible GPU; under torchrun "
                        "WORLD_SIZE)")
    p.add_argument("--step", choices=STEPS, default="graph",
                   help="graph: the whole DDP step as one CUDA graph; eager (default "
                        "%(default)s)")
    baseline_options.add_data_parallel_run_options(p)
    return p


class Settings(baseline_options.Settings):
    """The checked options (no torch, no device): the shared ones against --init's static
    export, and --gpus, NCCL_NVLS_ENABLE, the torchrun variables."""

    def __init__(self, a: argparse.Namespace, environ=os.environ):
        why = dp.anchor_refusal(a, environ)
        if why:
            raise UsageError(why)
        try:
            self.launch = dp.launcher_env(environ)
        except ValueError as e:
            raise UsageError(f"torchrun's variables: {e}") from None
        if self.launch and a.gpus is not None and a.gpus != self.launch[1]:
            raise UsageError(f"--gpus {a.gpus}, but torchrun started {self.launch[1]} processes "
                             "(WORLD_SIZE); drop --gpus or match --nproc-per-node")
        super().__init__(a, ("static",))


def nccl_version(torch) -> str | None:
    try:
        import torch.cuda.nccl  # noqa: PLC0415
        return dp.format_nccl_version(torch.cuda.nccl.version())
    except (ImportError, RuntimeError, AttributeError):  # a torch built without NCCL
        return None


def open_devices(s: Settings):
    """torch once PyTorch, CUDA, NCCL and the GPUs check out (sets s.gpus)."""
    torch, dist = import_torch_cuda(NoDevice)
    if not (dist.is_available() and dist.is_nccl_available()):
        raise NoDevice("this PyTorch has no NCCL")
    visible = torch.cuda.device_count()
    if s.launch:
        s.gpus = s.launch[1]
        if s.gpus < 2:
            raise UsageError(f"torchrun started {s.gpus} process; give --nproc-per-node >= 2")
        if s.launch[2] >= visible:
            raise NoDevice(f"LOCAL_RANK {s.launch[2]}, but {visible} GPUs are visible")
    else:
        if visible < 2:
            raise NoDevice(f"{visible} GPU visible; this needs at least 2")
        s.gpus = visible if s.args.gpus is None else s.args.gpus
        if s.gpus > visible:
            raise UsageError(f"--gpus {s.gpus}, but only {visible} GPUs are visible")
    s.nccl_version = nccl_version(torch)
    if s.args.step == "graph" and not dp.nccl_at_least(s.nccl_version):
        raise NoDevice(f"--step graph captures NCCL collectives, which needs NCCL >= 2.9.6 "
                       f"(this PyTorch has {s.nccl_version}); use --step eager")
    return torch


class DdpStep:
    """The DDP step, eager (`body`) or captured once (`capture`, then `graph.replay()`); each
    batch's loss in a device buffer at the batch index `idx`, which the step advances."""

    def __init__(self, torch, ddp, opt, scale, n_batches: int):
        self.torch, self.ddp, self.opt, self.scale = torch, ddp, opt, scale
        self.F = torch.nn.functional
        dev = next(ddp.parameters()).device
        self.losses = torch.zeros(n_batches, dtype=torch.float32, device=dev)
        self.idx = torch.zeros(1, dtype=torch.int64, device=dev)
        self.graph = None

    def body(self, x, y, weight: float | None = None) -> None:
        self.opt.zero_grad(set_to_none=False)
        logits = self.ddp(x if self.scale is None else x.float().div(self.scale))
        if weight is None:
            loss = self.F.cross_entropy(logits, y)
        else:
            loss = self.F.cross_entropy(logits, y, reduction="sum").mul(weight)
        loss.backward()
        self.opt.step()
        self.losses.index_copy_(0, self.idx, loss.detach().view(1))
        self.idx.add_(1)

    def capture(self, inputs) -> None:
        """Warm-up and capture on the current stream: the side stream DDP was built on, so
        that the AccumulateGrad nodes DDP keeps belong to the capturing stream."""
        torch, params = self.torch, list(self.ddp.module.parameters())
        start = [p.detach().clone() for p in params]
        for _ in range(DDP_WARMUP_STEPS):
            self.idx.zero_()
            self.body(*inputs())
        self.idx.zero_()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=torch.cuda.current_stream(),
                              capture_error_mode="thread_local"):
            self.body(*inputs())
        with torch.no_grad():  # the first replay starts from the initial state
            for p, p0 in zip(params, start):
                p.copy_(p0)
                p.grad.zero_()
                buf = self.opt.state.get(p, {}).get("momentum_buffer")
                if buf is not None:  # None with --momentum 0
                    buf.zero_()
        self.idx.zero_()
        torch.cuda.synchronize()
        self.graph = g


def train(torch, s: Settings, rank: int, local: int, argv: list[str]) -> int:
    """One rank's run; rank 0 keeps the record. The exit code (rank 0's matters)."""
    import torch.distributed as dist  # noqa: PLC0415
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415
    a, d, N, B = s.args, s.data, s.gpus, s.batch
    n = len(d.train_y)
    G, full = dp.global_batches(n, B, N), dp.full_global_batches(n, B, N)
    dev, graph = torch.device("cuda", local), a.step == "graph"
    log = None
    if rank == 0:
        log = pr.RunLog(s, argv, torch, f"pytorch-ddp-{a.step}", "static", {}, PROG,
                        sys.stdout, sys.stderr)
        log.rec["env"]["nccl"] = {"version": s.nccl_version,
                                  "settings": dp.nccl_settings(os.environ)}
        log.rec["config"].update({
            "gpus": N, "per_gpu_batch": B, "global_batch": N * B, "reduce": "ring",
            "graphs": graph, "eager": not graph, **({"step_form": "graph"} if graph else {}),
            "fused_off_reason": f"PyTorch DDP, step {a.step}",
            "single_launch_off_reason": f"PyTorch DDP, step {a.step}",
            "epoch_launch_off_reason": f"PyTorch DDP, step {a.step}",
            "ddp": {"launcher": "torchrun" if s.launch else "spawn", "backend": "nccl",
                    "step": a.step, "gradient_as_bucket_view": True, "static_graph": True,
                    "find_unused_parameters": False, "bucket_cap_mb": DDP_BUCKET_CAP_MB,
                    "warmup_steps": DDP_WARMUP_STEPS if graph and full else 0,
                    "last_batch": "eager" if graph else "none",
                    "loss": "local mean; a partial last global batch of R rows: local sum x N/R",
                    "async_error_handling": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")}})
        log.banner(f" | {N} GPUs, global batch {N * B}, DDP, step {a.step}")

    def body():
        t_setup = time.perf_counter()
        u8 = a.transfer == "u8"
        images = torch.from_numpy(d.train_x if u8 else normalize(d.train_x)).to(dev)
        scale = torch.tensor(255.0, dtype=torch.float32, device=dev) if u8 else None
        labels = torch.from_numpy(d.train_y).to(dev)
        order = torch.from_numpy(s.order.astype(np.int64)).to(dev)
        model = pr.build_model(torch, s.layers, s.init, s.seed, dev)
        ddp = DDP(model, device_ids=[local], gradient_as_bucket_view=True, static_graph=True,
                  bucket_cap_mb=DDP_BUCKET_CAP_MB)
        step = DdpStep(torch, ddp, make_sgd(torch, model, s.lr, s.momentum), scale, G)
        mine = order[:full * N * B].view(full, N, B)[:, rank]  # this rank's rows per batch

        def full_inputs():
            rows = mine.index_select(0, step.idx).view(B)
            return images.index_select(0, rows), labels.index_select(0, rows)
        last = None
        if full < G:
            sh = dp.shard(n, B, N, G - 1, rank)
            last = (order[sh.first:sh.first + sh.rows], dp.loss_weight(n, B, N, G - 1))
        if graph and full:
            step.capture(full_inputs)
        test_x = test_y = None
        if rank == 0:
            test_x = torch.from_numpy(normalize(d.test_x)).to(dev)
            test_y = torch.from_numpy(d.test_y).to(dev)
        timer = pr.Timer(torch, "cuda")
        gathered = torch.empty(N * G, dtype=torch.float32, device=dev)
        times = torch.empty(2, dtype=torch.float64, device=dev)
        global_rows = torch.tensor([dp.global_rows(n, B, N, g) for g in range(G)],
                                   dtype=torch.float64)
        torch.cuda.synchronize()
        if log:
            per_gpu = images.nbytes + labels.nbytes + order.nbytes
            log.rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0,
                                "api_calls": None,
                                "h2d_bytes": N * per_gpu + test_x.nbytes + test_y.nbytes}
            log.open_curve()
        for epoch in range(1, a.epochs + 1):
            step.idx.zero_()
            dist.barrier(device_ids=[local])
            timer.start()
            # ---- timed ------------------------------------------------------------------
            for _ in range(full):
                if graph:
                    step.graph.replay()
                else:
                    step.body(*full_inputs())
            if last is not None:  # the partial last global batch, eager
                rows, weight = last
                step.body(images.index_select(0, rows), labels.index_select(0, rows), weight)
            wall_ms, gpu_ms = timer.stop()
            # ---- outside the timed region: every rank's losses and the slowest times ----
            dist.all_gather_into_tensor(gathered, step.losses)
            times.copy_(torch.tensor([wall_ms, gpu_ms], dtype=torch.float64))
            dist.all_reduce(times, op=dist.ReduceOp.MAX)
            if log:
                means = gathered.view(N, G).double().cpu()
                means = sum(means[r] for r in range(N)) / N  # rank order
                wall_ms, gpu_ms = times.tolist()
                log.end_epoch(epoch, wall_ms, gpu_ms, 0, list(means.unbind()), [], global_rows,
                              model, test_x, test_y)
        return model, test_x, test_y

    def on_side_stream():
        # Everything on one side stream: DDP built there (the graph notes' step 2), the warm-up,
        # the capture, the replays and the eager steps, so no step crosses streams.
        with torch.cuda.stream(torch.cuda.Stream(dev)):
            return body()
    if log is None:
        on_side_stream()
        return EXIT_OK
    return log.execute(on_side_stream)[0]


def worker(local: int, rank: int, world: int, argv: list[str], exit_path: str | None,
           s: Settings | None = None) -> int:
    """A rank: spawn's (s rebuilt from argv) or torchrun's. A failed rank ends its process
    without tearing the group down (which could wait for the others); its launcher ends them."""
    if s is None:
        s = Settings(build_parser().parse_args(argv))
        s.gpus = world
    if s.args.step == "graph":  # the graph notes' step 1, before init_process_group
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    s.nccl_version = nccl_version(torch)
    pr.set_fp32_math(torch)
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    code = train(torch, s, rank, local, [f"experiments/baselines/{PROG}", *argv])
    if exit_path and rank == 0:
        Path(exit_path).write_text(str(code))
    if code != EXIT_OK:
        sys.exit(code)
    dist.destroy_process_group()
    return code


def _spawned(index: int, world: int, argv: list[str], exit_path: str) -> None:
    worker(index, index, world, argv, exit_path)


def spawn(torch, s: Settings, argv: list[str]) -> int:
    with socket.socket() as sk:  # a free port for the rendezvous
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    with tempfile.TemporaryDirectory() as tmp:
        exit_path = os.path.join(tmp, "rank0.exit")
        try:
            torch.multiprocessing.spawn(_spawned, nprocs=s.gpus, join=True,
                                        args=(s.gpus, argv, exit_path))
        except Exception as e:  # noqa: BLE001  (a rank failed; spawn ended the others)
            if not os.path.exists(exit_path):
                print(f"{PROG}: run failed: {type(e).__name__}: {e}", file=sys.stderr)
                return EXIT_RUN_FAILED
        return int(Path(exit_path).read_text()) if os.path.exists(exit_path) \
            else EXIT_RUN_FAILED


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        s = Settings(build_parser().parse_args(argv))
        torch = open_devices(s)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return EXIT_OK if e.code in (0, None) else EXIT_USAGE
    except (UsageError, NoDevice) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, UsageError) else EXIT_NO_DEVICE
    if s.launch:
        rank, world, local = s.launch
        return worker(local, rank, world, argv, None, s)
    return spawn(torch, s, argv)


if __name__ == "__main__":
    sys.exit(main())
