"""The PyTorch side every baseline shares: torch with fp32 math, the model with memstrat's initial
weights, the epoch timer, evaluation, one eager training step, the run's record, loss curve and
console lines (RunLog), and the command-line skeleton (run_cli). torch is imported only when a
run starts, so option errors need no torch.

Exit codes (as memstrat): 0 ok, 1 run failed (a record marked "failed" is appended),
2 bad option or input file, 3 no GPU (use --device cpu to run on the CPU).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from baseline_options import Settings
from baseline_record import (append_jsonl, environment_json, iso_utc_now, make_run_id,
                             summary_json)
from memstrat_inputs import InitState, UsageError

SCHEMA_VERSION = 1
EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_NO_DEVICE = 0, 1, 2, 3


def import_torch():
    """torch, or a usage error that says how to get it (imported when a run starts, so that
    option errors need no torch)."""
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
    """One run's record (docs/schema/run_record.schema.json, schema 1), loss curve and console
    lines: what every PyTorch baseline writes. `strategy` is config.strategy (also the label of
    the printed lines); `extra_config` adds the baseline's own config keys."""

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
        self.rec["epochs"].append(epoch_entry(epoch, wall_ms, gpu_ms, h2d_bytes, train_loss,
                                              train_acc, test_loss, test_acc, extra))
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


def epoch_entry(epoch: int, wall_ms: float, gpu_ms: float, h2d_bytes: int, train_loss: float,
                train_acc: float | None, test_loss: float, test_acc: float,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """One epochs[] entry of a baseline's record: memstrat's keys, null where a baseline cannot
    measure them; `extra` fills those it does (the input-pipeline keys)."""
    return {
        "epoch": epoch, "wall_ms": wall_ms, "gpu_ms": gpu_ms, "host_ms": 0.0,
        "copy_ms": None, "compute_ms": None, "stall_ms": None, "idle_ms": None,
        "h2d_bytes": h2d_bytes, "um_htod_bytes": None,
        "um_dtoh_bytes": None, "um_gpu_faults": None, "um_cpu_faults": None,
        "kernel_ms": None, "memcpy_ms": None, "api_calls": None,
        "input_wait_ms": None, "input_wait_first_ms": None, "slot_wait_ms": None,
        "producer_busy_ms": None, "producer_samples_per_s": None,
        "producer_worker_samples_per_s": None,
        "train_loss": train_loss, "train_acc": train_acc, "test_loss": test_loss,
        "test_acc": test_acc, **(extra or {})}


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
    torch = import_torch()
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"{prog}: torch.cuda.is_available() is False; this needs an NVIDIA GPU "
              "(or --device cpu)", file=err)
        return None
    set_fp32_math(torch)
    return torch


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


def entry_points(build_parser, settings, train_fn, prog: str):
    """A baseline script's `run(argv, out, err) -> (exit code, record or None)` for in-process
    callers and its `main(argv) -> exit code`, both through run_cli."""
    def run(argv: Sequence[str], out=None, err=None) -> tuple[int, dict | None]:
        return run_cli(argv, build_parser(), settings, train_fn, prog, out, err)

    def main(argv: Sequence[str] | None = None) -> int:
        return run(sys.argv[1:] if argv is None else argv)[0]
    return run, main
