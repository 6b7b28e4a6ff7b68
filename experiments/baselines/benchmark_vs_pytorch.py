#!/usr/bin/env python3
"""Time memstrat against the PyTorch eager baseline on one GPU, and check their loss curves.

    python3 experiments/baselines/benchmark_vs_pytorch.py                # the full default run
    python3 experiments/baselines/benchmark_vs_pytorch.py --quick        # a few configurations
    python3 experiments/baselines/benchmark_vs_pytorch.py --dry-run      # the plan + a time estimate

Part 1, speed. For every batch size (--batches, default 8,64,256,1024) and hidden size
(--hiddens, default 256,1024) it runs `memstrat train` and
experiments/baselines/pytorch_mlp.py with the same epochs, batch, hidden layer, data,
learning rate and momentum, for these pairings (memstrat strategy -> PyTorch's nearest
equivalent):

    resident      -> pytorch resident   (data set on the GPU once, batches are slices)
    pinned        -> pytorch pinned     (pin_memory once, per batch .to(non_blocking=True))
    double-buffer -> pytorch pinned     (PyTorch has no built-in copy/compute overlap)
    pageable      -> pytorch pageable   (per batch .to("cuda") from a plain CPU tensor)

memstrat runs with every --transfers value (default f32,u8; f32 moves the same float32
bytes as the PyTorch pipeline, so f32 is the nearest equivalent; u8 moves 4x fewer bytes).
The figure compared is the median wall ms per epoch over epochs 2..N from each run's JSON
record (epoch 1 is warm-up on both sides). Speed-up = PyTorch ms / memstrat ms. memstrat
runs with --no-profile unless --profile (the baseline has no profiler either). The
PyTorch runs happen in this process by default (one torch import and data load for all of
them; each run builds its own model, optimiser and data tensors); --pytorch-subprocess
runs each in its own process instead.

Part 2, loss curves. `memstrat train --strategy resident --transfer f32 --epochs 1
--batch 256 --gemm cublas` (no TF32) exports its initial weights and sample order
(--export-init) and writes its per-batch losses; the baseline loads them (--init) and
writes its own. The check reports the largest absolute and relative difference over the
epoch, over its first --early-batches batches, and at the first and the last batch, and
fails (exit 1) when the first batch differs by more than --first-batch-rtol (1e-5 relative:
it depends only on the forward pass from identical weights), any of the first 20 batches
by more than --early-atol (1e-4), or any batch by more than --curve-atol (5e-3); the
report explains these numbers (measured rounding drift vs. semantic differences).

Output: a progress line per run with its elapsed time, then the speed table and the curve
report, printed and written as Markdown to --out-md; every run record (memstrat's and the
baseline's, schema 1) is appended to --out-jsonl. Defaults go under results/vs_pytorch/.

Exit codes: 0 all runs ok and curves agree; 1 the curve check failed; 2 bad option or
missing memstrat/torch/data; 3 some runs failed (the table shows which).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
BASELINE = REPO_ROOT / "experiments" / "baselines" / "pytorch_mlp.py"
sys.path.insert(0, str(BASELINE.parent))
import baseline_record  # noqa: E402  (the record writer)
import memstrat_inputs  # noqa: E402  (the data-dir search, usage errors)
import pytorch_mlp  # noqa: E402  (the baseline)
import pytorch_run  # noqa: E402  (torch, imported when needed)
from comparison import (PAIRINGS, CurveComparison, RunResult, Tolerance,  # noqa: E402
                        build_rows, compare_curves, curve_markdown, read_curve,
                        speed_markdown, speed_verdict)

EXIT_OK, EXIT_CURVE, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 1, 2, 3
# PyTorch 2.11 eager on an H200, 784-256-10, ms per epoch (measured; docs/results/vs_pytorch.md);
# only used for --dry-run's time estimate.
PYTORCH_MS_GUESS = {8: 4600.0, 64: 610.0, 256: 160.0, 1024: 45.0}
RUN_OVERHEAD_S_GUESS = {"memstrat": 2.0, "pytorch": 1.0, "pytorch-subprocess": 4.0}


# ---------------------------------------------------------------------------------------------
# options

def int_list(s: str) -> list[int]:
    try:
        v = [int(p) for p in s.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected integers separated by commas") \
            from None
    if not v or any(x <= 0 for x in v):
        raise argparse.ArgumentTypeError(f"{s!r}: expected positive integers")
    return v


def transfer_list(s: str) -> list[str]:
    v = [p.strip() for p in s.split(",") if p.strip()]
    if not v or any(t not in ("f32", "u8") for t in v):
        raise argparse.ArgumentTypeError(f"{s!r}: expected f32 and/or u8, comma separated")
    return list(dict.fromkeys(v))


def skip_item(s: str) -> tuple[int, int]:
    try:
        b, h = s.split(":")
        return int(b), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected BATCH:HIDDEN, e.g. 8:1024") from None


def add_runner_options(p: argparse.ArgumentParser, python_help: str) -> None:
    """What Runner reads: the binary, the data, the python of PyTorch processes, the time limit
    of a run and the smoke-test sample limits."""
    p.add_argument("--memstrat", default=str(REPO_ROOT / "build" / "memstrat"),
                   help="the memstrat binary (default: %(default)s)")
    p.add_argument("--data", help="MNIST directory for both (default: $MEMSTRAT_DATA, "
                   "data/mnist)")
    p.add_argument("--python", default=sys.executable, help=python_help)
    p.add_argument("--timeout", type=int, default=900, help="seconds per run (default "
                   "%(default)s)")
    p.add_argument("--train-samples", type=int, default=0,
                   help="both sides use only the first N training samples (0 = all; for "
                        "smoke tests, not for figures)")
    p.add_argument("--test-samples", type=int, default=0,
                   help="both sides use only the first N test samples (0 = all)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchmark_vs_pytorch.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_runner_options(p, "python for --pytorch-subprocess (default: this one)")
    p.add_argument("--batches", type=int_list, default=[8, 64, 256, 1024],
                   help="batch sizes, comma separated (default 8,64,256,1024)")
    p.add_argument("--hiddens", type=int_list, default=[256, 1024],
                   help="hidden layer sizes (one hidden layer each), comma separated "
                        "(default 256,1024)")
    p.add_argument("--epochs", type=int, default=5,
                   help="epochs per run (default %(default)s; median over epochs 2..N)")
    p.add_argument("--small-batch", type=int, default=8,
                   help="batches <= this use --small-batch-epochs (default %(default)s)")
    p.add_argument("--small-batch-epochs", type=int, default=3,
                   help="epochs for small batches, where a PyTorch epoch takes seconds "
                        "(default %(default)s)")
    p.add_argument("--transfers", type=transfer_list, default=["f32", "u8"],
                   help="memstrat --transfer values (default f32,u8; f32 is the nearest "
                        "equivalent of the PyTorch pipeline)")
    p.add_argument("--skip", type=skip_item, action="append", default=[], metavar="B:H",
                   help="leave out batch B with hidden H (repeatable), e.g. --skip 8:1024")
    p.add_argument("--quick", action="store_true",
                   help="batches 64,1024, hidden 256, 3 epochs, f32 only, curve check at "
                        "hidden 256 only")
    p.add_argument("--graphs", choices=("on", "off"), default="on",
                   help="memstrat --graphs (default %(default)s)")
    p.add_argument("--profile", action="store_true",
                   help="keep memstrat's CUPTI counters on (default: --no-profile)")
    p.add_argument("--pytorch-subprocess", action="store_true",
                   help="run each PyTorch configuration in its own python process")
    p.add_argument("--no-speed", action="store_true", help="skip part 1 (speed)")
    p.add_argument("--no-curve-check", action="store_true", help="skip part 2 (loss curves)")
    p.add_argument("--curve-hiddens", type=int_list, default=None,
                   help="hidden sizes for the curve check (default: 256,1024; --quick: 256)")
    p.add_argument("--curve-batch", type=int, default=256, help="batch of the curve check "
                   "(default %(default)s)")
    p.add_argument("--curve-atol", type=float, default=5e-3,
                   help="largest allowed |memstrat - pytorch| loss of any batch of epoch 1 "
                        "(default %(default)g)")
    p.add_argument("--early-batches", type=int, default=20,
                   help="the first N batches get the tighter --early-atol (default %(default)s)")
    p.add_argument("--early-atol", type=float, default=1e-4,
                   help="largest allowed |difference| over the first --early-batches batches "
                        "(default %(default)g)")
    p.add_argument("--first-batch-rtol", type=float, default=1e-5,
                   help="largest allowed relative difference of the first batch's loss "
                        "(same weights, forward only; default %(default)g)")
    p.add_argument("--out-dir", default=str(REPO_ROOT / "results" / "vs_pytorch"),
                   help="where records, curves and the table go (default %(default)s)")
    p.add_argument("--out-md", help="Markdown report (default OUT_DIR/benchmark.md)")
    p.add_argument("--out-jsonl", help="run records, appended (default OUT_DIR/records.jsonl)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and a time estimate")
    p.add_argument("--pytorch-device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: the baseline runs on the CPU (self-test of this script only)")
    return p


# ---------------------------------------------------------------------------------------------
# runs

@dataclass
class Plan:
    configs: list[tuple[int, int, int]]          # (batch, hidden, epochs)
    transfers: list[str]
    curve_hiddens: list[int]
    skipped: list[tuple[int, int]] = field(default_factory=list)

    def memstrat_strategies(self) -> list[str]:
        return list(dict.fromkeys(m for m, _ in PAIRINGS))

    def pytorch_modes(self) -> list[str]:
        return list(dict.fromkeys(p for _, p in PAIRINGS))

    def run_count(self) -> tuple[int, int]:
        n = len(self.configs)
        return (n * len(self.memstrat_strategies()) * len(self.transfers) + len(self.curve_hiddens),
                n * len(self.pytorch_modes()) + len(self.curve_hiddens))


def make_plan(a: argparse.Namespace) -> Plan:
    batches, hiddens, transfers, epochs = a.batches, a.hiddens, a.transfers, a.epochs
    curve_hiddens = a.curve_hiddens if a.curve_hiddens is not None else [256, 1024]
    if a.quick:
        batches, hiddens, transfers, epochs = [64, 1024], [256], ["f32"], 3
        if a.curve_hiddens is None:
            curve_hiddens = [256]
    if epochs < 2 or a.small_batch_epochs < 2:
        raise ValueError("--epochs and --small-batch-epochs must be >= 2 (epoch 1 is warm-up)")
    configs, skipped = [], []
    for b in batches:
        for h in hiddens:
            if (b, h) in a.skip:
                skipped.append((b, h))
                continue
            configs.append((b, h, a.small_batch_epochs if b <= a.small_batch else epochs))
    if a.no_speed:
        configs = []
    if a.no_curve_check:
        curve_hiddens = []
    return Plan(configs, transfers, curve_hiddens, skipped)


def estimate_seconds(plan: Plan, subprocess_pytorch: bool) -> float:
    """A rough guess from the DEVICE.md figures, for --dry-run only."""
    total = 0.0
    over = RUN_OVERHEAD_S_GUESS["pytorch-subprocess" if subprocess_pytorch else "pytorch"]
    for b, h, e in plan.configs:
        base = PYTORCH_MS_GUESS.get(b, 160.0 * 256 / b) / 1000.0
        scale = 1.0 if b <= 64 else max(1.0, h / 256 * 0.6)
        total += len(plan.pytorch_modes()) * (e * base * scale * 1.1 + over)
        total += len(plan.memstrat_strategies()) * len(plan.transfers) * \
            (RUN_OVERHEAD_S_GUESS["memstrat"] + e * 0.15)
    total += len(plan.curve_hiddens) * (RUN_OVERHEAD_S_GUESS["memstrat"] + over + 1.0)
    return total


class Runner:
    def __init__(self, a: argparse.Namespace, data_dir: Path, out_jsonl: Path, work: Path):
        self.a, self.data_dir, self.out_jsonl, self.work = a, data_dir, out_jsonl, work
        self.t0 = time.monotonic()
        self.done = 0
        self.total = 0

    def _progress(self, r: RunResult, label: str) -> None:
        self.done += 1
        what = f"{r.median_ms:10.2f} ms/epoch" if r.ok else f"FAILED: {r.error[:160]}"
        print(f"[{self.done:3d}/{self.total}] {label:<44s} {what}  ({r.seconds:6.1f} s; "
              f"total {time.monotonic() - self.t0:7.1f} s)", flush=True)

    def _samples(self) -> list[str]:
        out = []
        if self.a.train_samples:
            out += ["--train-samples", str(self.a.train_samples)]
        if self.a.test_samples:
            out += ["--test-samples", str(self.a.test_samples)]
        return out

    def _append(self, rec: dict) -> None:
        baseline_record.append_jsonl(str(self.out_jsonl), rec)

    def memstrat(self, strategy: str, transfer: str, batch: int, hidden: int, epochs: int,
                 tag: str, extra: Sequence[str] = ()) -> RunResult:
        r = RunResult("memstrat", strategy, transfer, batch, hidden, epochs)
        tmp = self.work / f"{tag}.jsonl"
        tmp.unlink(missing_ok=True)
        cmd = [self.a.memstrat, "train", "--strategy", strategy, "--transfer", transfer,
               "--batch", str(batch), "--hidden", str(hidden), "--epochs", str(epochs),
               "--graphs", self.a.graphs, "--data", str(self.data_dir), "--quiet",
               "--json", str(tmp), "--run-tag", tag, *self._samples(), *extra]
        if not self.a.profile:
            cmd.append("--no-profile")
        return self.run_command(r, cmd, tmp,
                                f"memstrat {strategy} {transfer} b={batch} h={hidden} e={epochs}")

    def run_command(self, r: RunResult, cmd: Sequence[str], tmp: Path, label: str) -> RunResult:
        """Runs `cmd`, which writes its record to `tmp`; the record goes to the results file
        and into `r` (ok, or the error with the command's last lines), and a progress line."""
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout,
                               cwd=REPO_ROOT, stdin=subprocess.DEVNULL, check=False)
            rc, stderr = p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            rc, stderr = None, f"timed out after {self.a.timeout} s"
        except OSError as e:
            rc, stderr = None, f"could not start {cmd[0]}: {e}"
        r.seconds = time.monotonic() - t
        rec = _last_record(tmp)
        if rec is not None:
            self._append(rec)
        if rc == 0 and rec is not None and rec.get("status") == "ok":
            r.ok, r.record = True, rec
        else:
            tail = (stderr or "").strip().splitlines()[-3:]
            r.error = f"exit {rc}: " + " | ".join(tail) if tail else f"exit {rc}"
            if rec is not None and rec.get("error"):
                r.error += f" ({rec['error']})"
            r.error += "; command: " + shlex.join(cmd)
        self._progress(r, label)
        return r

    def pytorch(self, mode: str, batch: int, hidden: int, epochs: int, tag: str,
                extra: Sequence[str] = (), transfer: str = "f32") -> RunResult:
        r = RunResult("pytorch", mode, transfer, batch, hidden, epochs)
        args = ["--mode", mode, "--transfer", transfer, "--epochs", str(epochs),
                "--data", str(self.data_dir), "--quiet", "--run-tag", tag,
                "--device", self.a.pytorch_device, *self._samples(), *extra]
        if not any(x == "--init" for x in extra):
            args += ["--batch", str(batch), "--hidden", str(hidden)]
        t = time.monotonic()
        if self.a.pytorch_subprocess:
            tmp = self.work / f"{tag}.jsonl"
            tmp.unlink(missing_ok=True)
            cmd = [self.a.python, str(BASELINE), *args, "--json", str(tmp)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout,
                                   cwd=REPO_ROOT, stdin=subprocess.DEVNULL, check=False)
                rc, errtext = p.returncode, p.stderr
            except subprocess.TimeoutExpired:
                rc, errtext = None, f"timed out after {self.a.timeout} s"
            rec = _last_record(tmp)
        else:
            out, err = io.StringIO(), io.StringIO()
            try:
                rc, rec = pytorch_mlp.run(args, out=out, err=err)
            except Exception as e:  # noqa: BLE001 -- one failed configuration, not the benchmark
                rc, rec = None, None
                err.write(f"{type(e).__name__}: {e}")
            errtext = err.getvalue()
            _free_cuda_cache()
        r.seconds = time.monotonic() - t
        if rec is not None:
            self._append(rec)
        if rc == 0 and rec is not None and rec.get("status") == "ok":
            r.ok, r.record = True, rec
        else:
            tail = (errtext or "").strip().splitlines()[-3:]
            r.error = f"exit {rc}: " + " | ".join(tail)
            r.error += "; args: " + shlex.join(args)
        self._progress(r, f"pytorch  {mode} {transfer} b={batch} h={hidden} e={epochs}")
        return r


def _last_record(path: Path) -> dict | None:
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def _free_cuda_cache() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def run_curve_check(runner: Runner, hidden: int, batch: int, curves_dir: Path,
                    runs: list[RunResult], early: int) -> tuple[CurveComparison | None, str, dict]:
    d = curves_dir / f"h{hidden}_b{batch}"
    d.mkdir(parents=True, exist_ok=True)
    init, a_csv, b_csv = d / "init", d / "memstrat.csv", d / "pytorch.csv"
    for f in (a_csv, b_csv):
        f.unlink(missing_ok=True)
    m = runner.memstrat("resident", "f32", batch, hidden, 1, f"vs-pytorch-curve-h{hidden}",
                        extra=["--gemm", "cublas", "--export-init", str(init),
                               "--loss-curve", str(a_csv)])
    runs.append(m)
    if not m.ok:
        return None, "memstrat: " + m.error, {}
    p = runner.pytorch("resident", batch, hidden, 1, f"vs-pytorch-curve-h{hidden}",
                       extra=["--init", str(init), "--loss-curve", str(b_csv)])
    runs.append(p)
    if not p.ok:
        return None, "pytorch: " + p.error, {}
    try:
        c = compare_curves(read_curve(a_csv), read_curve(b_csv), early)
    except (OSError, ValueError) as e:
        return None, str(e), {}
    acc = f"{100 * m.record['final']['test_acc']:.2f}% / {100 * p.record['final']['test_acc']:.2f}%"
    return c, "", {"acc": acc, "dir": str(d)}


# ---------------------------------------------------------------------------------------------

def preflight(a: argparse.Namespace, plan: Plan) -> Path:
    """Everything that can fail before the first run; returns the data directory."""
    data_dir = memstrat_inputs.resolve_data_dir(a.data)
    if a.dry_run:
        return data_dir
    exe = Path(a.memstrat)
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise memstrat_inputs.UsageError(
            f"--memstrat {a.memstrat}: not an executable file; build it first (cmake -S . -B "
            "build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j) or pass --memstrat PATH")
    try:
        listed = subprocess.run([str(exe), "list"], capture_output=True, text=True, timeout=60,
                                check=False).stdout.split()
    except (OSError, subprocess.TimeoutExpired) as e:
        raise memstrat_inputs.UsageError(f"`{exe} list` failed: {e}") from None
    missing = [s for s in plan.memstrat_strategies() if s not in listed]
    if missing:
        raise memstrat_inputs.UsageError(f"`{exe} list` does not offer {missing}")
    if a.pytorch_device == "cpu":
        pytorch_run.import_torch()
    elif a.pytorch_subprocess:
        check = subprocess.run([a.python, "-c", "import torch,sys; sys.exit(0 if "
                                "torch.cuda.is_available() else 3)"], capture_output=True,
                               text=True, check=False)
        if check.returncode != 0:
            raise memstrat_inputs.UsageError(f"{a.python}: torch with CUDA is not available "
                                             f"({check.stderr.strip()[-200:]})")
    else:
        if _gpu_exclusive():
            print("note: the GPU is in an exclusive compute mode, so this process must not hold "
                  "a CUDA context while memstrat runs: using --pytorch-subprocess", flush=True)
            a.pytorch_subprocess = True
            return preflight(a, plan)
        torch = pytorch_run.import_torch()
        if not torch.cuda.is_available():
            raise memstrat_inputs.UsageError("torch.cuda.is_available() is False: this "
                                             "benchmark needs the GPU")
    return data_dir


def _gpu_exclusive() -> bool:
    """True when nvidia-smi reports an exclusive/prohibited compute mode (then two processes
    cannot both hold a context, and the in-process PyTorch runs would lock memstrat out)."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    modes = r.stdout.lower() if r.returncode == 0 else ""
    return "exclusive" in modes or "prohibited" in modes


def environment_lines(results: list[RunResult]) -> list[str]:
    mem = next((r.record for r in results if r.kind == "memstrat" and r.record), None)
    pt = next((r.record for r in results if r.kind == "pytorch" and r.record), None)
    lines = []
    if mem:
        e = mem["env"]
        lines.append(f"GPU: {e.get('gpu_name')} (cc {e.get('compute_capability')}, driver "
                     f"{e.get('driver_release') or e.get('driver_version')}, CUDA runtime "
                     f"{e.get('runtime_version')}, PCIe gen {e.get('pcie_gen')} x"
                     f"{e.get('pcie_width')}), host {e.get('host')}")
        lines.append(f"memstrat {e.get('memstrat_version')} git {e.get('git_sha')}"
                     f"{' (dirty)' if e.get('git_dirty') else ''}")
    if pt:
        e = pt["env"]
        lines.append(f"PyTorch {e.get('torch_version')} (CUDA {e.get('runtime_version')}), "
                     f"Python {e.get('python_version')}, eager, fp32 (TF32 off), "
                     "torch.optim.SGD defaults")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        plan = make_plan(a)
    except ValueError as e:
        print(f"benchmark_vs_pytorch.py: {e}", file=sys.stderr)
        return EXIT_USAGE
    out_dir = Path(a.out_dir)
    out_md = Path(a.out_md) if a.out_md else out_dir / "benchmark.md"
    out_jsonl = Path(a.out_jsonl) if a.out_jsonl else out_dir / "records.jsonl"
    n_mem, n_pt = plan.run_count()
    est = estimate_seconds(plan, a.pytorch_subprocess)
    print(f"plan: {len(plan.configs)} configurations (batch, hidden, epochs): "
          f"{plan.configs}; memstrat transfers {plan.transfers}; curve check hidden "
          f"{plan.curve_hiddens} at batch {a.curve_batch}; {n_mem} memstrat + {n_pt} PyTorch "
          f"runs; rough estimate {est / 60:.1f} min on an H200"
          + (f"; skipped {plan.skipped}" if plan.skipped else ""), flush=True)
    try:
        data_dir = preflight(a, plan)
    except memstrat_inputs.UsageError as e:
        print(f"benchmark_vs_pytorch.py: {e}", file=sys.stderr)
        return EXIT_USAGE
    if a.dry_run:
        print(f"data: {data_dir}; would write {out_md} and {out_jsonl}")
        return EXIT_OK
    for p in (out_md.parent, out_jsonl.parent, out_dir):
        p.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="vs_pytorch_", dir=out_dir))
    runner = Runner(a, data_dir, out_jsonl, work)
    runner.total = n_mem + n_pt
    results: list[RunResult] = []
    for b, h, e in plan.configs:
        for s in plan.memstrat_strategies():
            for t in plan.transfers:
                results.append(runner.memstrat(s, t, b, h, e, f"vs-pytorch-{s}-{t}-b{b}-h{h}"))
        for mode in plan.pytorch_modes():
            results.append(runner.pytorch(mode, b, h, e, f"vs-pytorch-pytorch-{mode}-b{b}-h{h}"))

    curve_results, curve_runs = [], []
    for h in plan.curve_hiddens:
        c, error, extra = run_curve_check(runner, h, a.curve_batch, out_dir / "curves",
                                          curve_runs, a.early_batches)
        curve_results.append((h, c, error, extra))

    # ---- report -------------------------------------------------------------------------
    md = [f"# memstrat vs PyTorch eager ({time.strftime('%Y-%m-%d %H:%M %Z')})", ""]
    command = shlex.join(["python3", "experiments/baselines/benchmark_vs_pytorch.py",
                          *(argv if argv is not None else sys.argv[1:])])
    md += [f"- {ln}" for ln in environment_lines(results + curve_runs)]
    md += [f"- command: `{command}`", f"- records: `{out_jsonl}`", ""]
    rows_ok = True
    if plan.configs:
        rows = build_rows(results, plan.transfers)
        verdict, rows_ok = speed_verdict(rows, plan.transfers)
        md += ["## Speed: median wall ms per epoch (epochs 2..N), speed-up = PyTorch / memstrat",
               "", "Epochs per run: " + ", ".join(f"batch {b}: {e}" for b, e in
                                                  dict.fromkeys((b, e) for b, _, e in
                                                                plan.configs)) +
               f". memstrat `--graphs {a.graphs}`, " +
               ("CUPTI on" if a.profile else "`--no-profile`") + ", static scenario; "
               "PyTorch: the data set held in epoch order as float32 (f32), per-batch slices, "
               "labels int64.", "", speed_markdown(rows, plan.transfers), ""]
        md += [f"- {v}" for v in verdict]
        if plan.skipped:
            left = ", ".join(f"batch {b} hidden {h}" for b, h in plan.skipped)
            md.append(f"- left out (--skip): {left}")
        md.append("")
    curves_ok = True
    if curve_results:
        tol = Tolerance(a.first_batch_rtol, a.early_atol, a.early_batches, a.curve_atol)
        text, curves_ok = curve_markdown(curve_results, tol, a.curve_batch)
        md += ["## Loss curves: memstrat vs PyTorch from the same initial weights", "", text, ""]
    failed = [r for r in results if not r.ok]
    if failed:
        md += ["## Failed runs", ""] + [f"- {r.kind} {r.strategy} {r.transfer} batch "
                                        f"{r.batch} hidden {r.hidden}: {r.error}"
                                        for r in failed] + [""]
    report = "\n".join(md)
    print("\n" + report, flush=True)
    out_md.write_text(report + "\n")
    print(f"\nwrote {out_md} and {out_jsonl}; curves under {out_dir / 'curves'}")
    with contextlib.suppress(OSError):
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    if not curves_ok:
        print("benchmark_vs_pytorch.py: the loss curves differ beyond the tolerance",
              file=sys.stderr)
        return EXIT_CURVE
    if failed:
        return EXIT_RUNS_FAILED
    if not rows_ok:
        print("note: memstrat was not faster in every configuration (see the table)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
