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
MODES = ("pageable", "pinned", "resident")


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
        prog="pytorch_mlp.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Curve comparison: memstrat train --strategy resident --transfer f32 --epochs 1 "
               "--export-init /tmp/init --loss-curve a.csv; then pytorch_mlp.py --init /tmp/init "
               "--mode resident --epochs 1 --loss-curve b.csv. See the module docstring for "
               "what each mode does.")
    p.add_argument("--mode", choices=MODES, default="resident",
                   help="how batches reach the GPU (default: %(default)s)")
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
    return p


def check_appendable(path: str, what: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        os.close(fd)
    except OSError as e:
        raise UsageError(f"{what}: cannot open '{path}' for writing: {e.strerror} (does the "
                         "directory exist?)") from None


class Settings:
    """Validated options, resolved against --init's manifest; no torch, no device."""

    def __init__(self, a: argparse.Namespace):
        self.args = a
        self.init = InitState(a.init) if a.init else None
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
        if a.mode == "pinned" and a.device == "cpu":
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


def train(s: Settings, argv: list[str], out=None, err=None) -> tuple[int, dict | None]:
    """Runs the training; returns (exit code, the record or None when nothing ran)."""
    out, err = out or sys.stdout, err or sys.stderr
    a = s.args
    torch = _import_torch()
    F = torch.nn.functional
    if a.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_mlp.py: torch.cuda.is_available() is False; this needs an NVIDIA GPU "
              "(or --device cpu)", file=err)
        return EXIT_NO_DEVICE, None
    set_fp32_math(torch)
    d = s.data
    n_train = len(d.train_y)
    rec: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "run_id": make_run_id(), "started_at": iso_utc_now(),
        "status": "ok", "error": None, "argv": argv,
        "env": environment_json(torch, a.device),
        "config": {
            "strategy": "pytorch-" + a.mode, "framework": "pytorch", "mode": a.mode,
            "scenario": "static", "transfer": a.transfer, "batch": s.batch,
            "hidden": s.hidden, "epochs": a.epochs, "lr": s.lr, "momentum": s.momentum,
            "seed": s.seed, "gemm": "torch", "tf32": False, "graphs": False, "depth": None,
            "streams": None, "advise": None, "profile": False,
            "run_tag": a.run_tag, "device": a.device, "eager": True,
            "train_acc_in_loop": a.train_acc,
            "init": str(Path(a.init).resolve()) if a.init else None,
            "order": s.order_source,
            "dataset": {"name": d.name, "path": d.source, "train_samples": n_train,
                        "test_samples": len(d.test_y)},
        },
        "epochs": [],
    }
    for w in s.warnings:
        print("pytorch_mlp.py: warning: " + w, file=err)
    if not a.quiet:
        print(f"pytorch_mlp.py: pytorch-{a.mode} | {a.transfer} | batch {s.batch} | hidden "
              f"{','.join(map(str, s.hidden))} | {a.epochs} epochs | "
              f"{rec['env']['gpu_name'] or a.device} | torch {torch.__version__} | "
              f"{n_train} train, {len(d.test_y)} test from {d.source}", file=out)
    curve = None
    try:
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
        rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                        "h2d_bytes": feed.setup_h2d_bytes + test_x.nbytes + test_y.nbytes
                        if a.device == "cuda" else 0}
        if a.loss_curve:
            curve = open(a.loss_curve, "w")
            curve.write("epoch,batch,loss\n")
        bounds = [(lo, min(lo + s.batch, n_train)) for lo in range(0, n_train, s.batch)]
        rows = torch.tensor([hi - lo for lo, hi in bounds], dtype=torch.float64)

        for epoch in range(1, a.epochs + 1):
            losses, corrects = [], []
            timer.start()
            # ---- timed: what a user's eager loop does -----------------------------------
            for lo, hi in bounds:
                x, y = feed.batch(lo, hi)
                logits = model(x)
                loss = F.cross_entropy(logits, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(loss.detach())
                if a.train_acc:
                    corrects.append((logits.detach().argmax(1) == y).sum())
            wall_ms, gpu_ms = timer.stop()
            # ---- outside the timed region -----------------------------------------------
            batch_losses = torch.stack(losses).double().cpu()
            train_loss = float((batch_losses * rows).sum()) / n_train
            train_acc = float(torch.stack(corrects).sum().cpu()) / n_train if a.train_acc \
                else None
            test_loss, test_acc = evaluate(torch, model, test_x, test_y)
            if not all(math.isfinite(v) for v in (train_loss, test_loss)):
                raise RuntimeError(f"epoch {epoch}: loss is not finite (train {train_loss}, "
                                   f"test {test_loss})")
            rec["epochs"].append({
                "epoch": epoch, "wall_ms": wall_ms, "gpu_ms": gpu_ms, "host_ms": 0.0,
                "copy_ms": None, "compute_ms": None, "stall_ms": None, "idle_ms": None,
                "h2d_bytes": feed.epoch_h2d_bytes, "um_htod_bytes": None,
                "um_dtoh_bytes": None, "um_gpu_faults": None, "um_cpu_faults": None,
                "kernel_ms": None, "memcpy_ms": None, "api_calls": None,
                "train_loss": train_loss, "train_acc": train_acc, "test_loss": test_loss,
                "test_acc": test_acc})
            if curve is not None:
                curve.writelines(f"{epoch},{b},{v:.9g}\n"
                                 for b, v in enumerate(batch_losses.tolist()))
            if not a.quiet:
                acc = "-" if train_acc is None else f"{100 * train_acc:.2f}%"
                print(f"epoch {epoch:3d}/{a.epochs}  wall {wall_ms:9.2f} ms  gpu {gpu_ms:9.2f} ms"
                      f"  loss {train_loss:.4f}  train {acc}  test {100 * test_acc:.2f}%",
                      file=out, flush=True)
        fin_loss, fin_acc = evaluate(torch, model, test_x, test_y)
        rec["summary"] = summary_json(rec["epochs"], n_train)
        rec["final"] = {"test_loss": fin_loss, "test_acc": fin_acc,
                        "samples_per_s": rec["summary"]["samples_per_s"]}
        rec["profiler_notes"] = []
    except Exception as ex:  # noqa: BLE001 -- any failure becomes a "failed" record
        rec["status"] = "failed"
        rec["error"] = f"{type(ex).__name__}: {ex}"
        print(f"pytorch_mlp.py: run failed: {rec['error']}", file=err)
        if a.json:
            try:
                append_jsonl(a.json, rec)
                print(f"pytorch_mlp.py: a record marked \"failed\" was appended to {a.json}",
                      file=err)
            except OSError as e2:
                print(f"pytorch_mlp.py: could not write the failed record: {e2}", file=err)
        return EXIT_RUN_FAILED, rec
    finally:
        if curve is not None:
            curve.close()
    sm = rec["summary"]
    print(f"summary: pytorch-{a.mode} {a.transfer} batch {s.batch} hidden "
          f"{','.join(map(str, s.hidden))}: median epoch {sm['wall_ms_median']:.2f} ms (min "
          f"{sm['wall_ms_min']:.2f}, max {sm['wall_ms_max']:.2f}, epochs 2..{a.epochs}), epoch 1 "
          f"{sm['epoch1_wall_ms']:.2f} ms, {sm['samples_per_s'] / 1e6:.2f} M samples/s, test acc "
          f"{100 * rec['final']['test_acc']:.2f}%", file=out, flush=True)
    if a.json:
        append_jsonl(a.json, rec)
    return EXIT_OK, rec


def run(argv: Sequence[str], out=None, err=None) -> tuple[int, dict | None]:
    """Parse, validate and train; (exit code, record or None). For in-process callers."""
    out, err = out or sys.stdout, err or sys.stderr
    args_list = list(argv)
    parser = build_parser()
    try:
        a = parser.parse_args(args_list)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return (EXIT_OK if e.code in (0, None) else EXIT_USAGE), None
    try:
        settings = Settings(a)
        return train(settings, ["experiments/baselines/pytorch_mlp.py", *args_list], out, err)
    except UsageError as e:
        print(f"pytorch_mlp.py: {e}", file=err)
        return EXIT_USAGE, None


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv)[0]


if __name__ == "__main__":
    sys.exit(main())
