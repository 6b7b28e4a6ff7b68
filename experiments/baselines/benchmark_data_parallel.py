#!/usr/bin/env python3
"""memstrat's data-parallel training beside PyTorch DDP and JAX on the same GPUs, every run a
process of its own in one seeded shuffled order.

    NCCL_NVLS_ENABLE=0 python3 experiments/baselines/benchmark_data_parallel.py --dry-run
    NCCL_NVLS_ENABLE=0 python3 experiments/baselines/benchmark_data_parallel.py   # 10 each
    NCCL_NVLS_ENABLE=0 python3 experiments/baselines/benchmark_data_parallel.py --resume
    python3 experiments/baselines/benchmark_data_parallel.py --from-records results/data_parallel/records.jsonl

Variants (--variants; each a process of its own, the same model, init, order and data: u8 MNIST
resident on every GPU, --batch rows per GPU, a global batch of N x --batch):
  memstrat-per-gpu      memstrat train --strategy resident --gpus N --processes per-gpu: one
                        process per GPU (memstrat starts them), each step replayed as a CUDA
                        graph, the gradients gathered and summed in rank order (--reduce exact)
  memstrat-per-gpu-ring the same with --reduce ring (ncclAllReduce over fixed buckets)
  memstrat-one-process  memstrat train --strategy resident --gpus N: one process, a host thread
                        per GPU, steps enqueued eagerly (--reduce exact)
  pytorch-ddp-graph     pytorch_ddp.py --step graph: DistributedDataParallel, one process per
                        GPU, the whole step as one CUDA graph
  pytorch-ddp-eager     pytorch_ddp.py --step eager
  jax-data-parallel     jax_data_parallel.py: shard_map with psum, jit of a scan over the epoch
For each --gpus-list value (default 2), --batch (256) per GPU, --epochs (21), --repeats (10)
processes per configuration. The measure is the end-to-end epoch (wall time of epochs 2..N; the
data is resident, so this is the step cost of N GPUs, the reduction included).

Tables: per GPU count and variant, the median over processes of each process's median ms over its
epochs 2..N with its order-statistic interval, and the samples/s it makes; then every variant
against memstrat-per-gpu at the same GPU count: variant / memstrat as the Hodges-Lehmann ratio
with its Moses interval, and whether a Mann-Whitney test, Holm-corrected over the table's pairs,
separates them (else neither is called faster).

Without jax (the python cannot import it) the JAX variant is left out, the reason printed and
kept in the plan record's notes; --dry-run plans it regardless. Every run needs
NCCL_NVLS_ENABLE=0 (memstrat and the anchors refuse to start without it): refused at once here.

Exit codes: 0 every run ok; 2 bad option, NVLink multicast not off, or missing torch/data (before
any run); 3 some runs failed (the report lists which).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = REPO_ROOT / "experiments" / "baselines"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO_ROOT))
import memstrat_inputs  # noqa: E402
import process_runs as pr  # noqa: E402
from analysis.stats import summarize  # noqa: E402
from process_stats import (INTERVAL_NOTE, SideBySide, ms_cell, overlap_cell,  # noqa: E402
                           pairs_against, process_values, ratio_cell)

EXIT_OK, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 2, 3
PROG = "benchmark_data_parallel.py"
TAG = "dp"
MEMSTRAT = "memstrat-per-gpu"
# variant -> (script, its fixed options) for the anchors; memstrat's options for memstrat's
VARIANTS = {
    MEMSTRAT: (None, ["--processes", "per-gpu"]),
    "memstrat-per-gpu-ring": (None, ["--processes", "per-gpu", "--reduce", "ring"]),
    "memstrat-one-process": (None, []),
    "pytorch-ddp-graph": ("pytorch_ddp.py", ["--step", "graph"]),
    "pytorch-ddp-eager": ("pytorch_ddp.py", ["--step", "eager"]),
    "jax-data-parallel": ("jax_data_parallel.py", []),
}
# For the estimate only (seconds; one process of each at 2 GPUs, 21 epochs, batch 256 per GPU,
# on two H100s): a process's start (CUDA contexts, NCCL's communicator, the framework's import,
# graph capture or XLA compile), and an epoch.
PROCESS_S = {MEMSTRAT: 2.5, "memstrat-per-gpu-ring": 2.5, "memstrat-one-process": 2.0,
             "pytorch-ddp-graph": 20.0, "pytorch-ddp-eager": 15.0, "jax-data-parallel": 25.0}
EPOCH_S = {MEMSTRAT: 0.011, "memstrat-per-gpu-ring": 0.012, "memstrat-one-process": 0.017,
           "pytorch-ddp-graph": 0.020, "pytorch-ddp-eager": 0.060, "jax-data-parallel": 0.009}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_process_options(p, "python for the PyTorch and JAX runs (default: this one)")
    p.set_defaults(repeats=10)
    p.add_argument("--variants", type=pr.name_list(tuple(VARIANTS)), default=list(VARIANTS),
                   help="default: all")
    p.add_argument("--gpus-list", type=pr.name_list(tuple(str(n) for n in range(2, 9))),
                   default=["2"], help="GPU counts, comma separated (default 2)")
    p.add_argument("--batch", type=int, default=256, help="rows per GPU (default %(default)s)")
    p.add_argument("--epochs", type=int, default=21,
                   help="epochs per run (default %(default)s; median over epochs 2..N)")
    p.add_argument("--out-dir", default=str(REPO_ROOT / "results" / "data_parallel"),
                   help="where records and the table go (default %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="run only the processes of the plan that have no ok record in "
                        "OUT_DIR/records.jsonl yet (same options, same order)")
    return p


def configurations(a: argparse.Namespace) -> list[tuple[str, int]]:
    return [(v, int(n)) for n in a.gpus_list for v in a.variants]


def key_of(rec: dict) -> tuple[str, int] | None:
    """(variant, gpus) from the record's run tag, DP-VARIANT-gN-rR; None for another run."""
    tag = rec["config"].get("run_tag") or ""
    if not tag.startswith(TAG + "-"):
        return None
    parts = tag[len(TAG) + 1:].rsplit("-", 2)
    if len(parts) != 3 or parts[0] not in VARIANTS or not parts[1][1:].isdigit() or \
            parts[1][0] != "g" or not parts[2].startswith("r"):
        return None
    return parts[0], int(parts[1][1:])


def specs(a: argparse.Namespace) -> list[pr.RunSpec]:
    out = []
    for v, n in configurations(a):
        out += pr.repeated(TAG, v, (v, n), f"{v}-g{n}", f"{v} x{n}", a.repeats)
    return out


def estimate_seconds(a: argparse.Namespace) -> float:
    return sum(a.repeats * (PROCESS_S[v] + a.epochs * EPOCH_S[v] * 256 / a.batch)
               for v, _ in configurations(a))


def run_args(a: argparse.Namespace, v: str, n: int) -> list[str]:
    """The variant's options at N GPUs (the runner adds data, record, tag and quiet)."""
    script, fixed = VARIANTS[v]
    common = ["--gpus", str(n), "--batch", str(a.batch), "--epochs", str(a.epochs),
              "--transfer", "u8"]
    if script is None:
        return ["--strategy", "resident", *common, "--no-profile", *fixed]
    return [*fixed, *common]


def run_spec(runner: pr.Runner, a: argparse.Namespace, s: pr.RunSpec) -> pr.RunResult:
    v, n = s.config
    script = VARIANTS[v][0]
    if script is None:
        return runner.memstrat(s.tag, s.label, run_args(a, v, n))
    return runner.script(HERE / script, s.tag, s.label, run_args(a, v, n))


def groups(records: Iterable[dict]) -> dict[tuple, list[dict]]:
    """(gpus, batch, variant) -> its ok run records."""
    out: dict[tuple, list[dict]] = {}
    for r in pr.run_records(records):
        k = key_of(r)
        if r.get("status") != "ok" or k is None:
            continue
        v, n = k
        out.setdefault((n, int(r["config"]["batch"]), v), []).append(r)
    return out


def _order(key: tuple) -> tuple:
    n, b, v = key
    return n, b, list(VARIANTS).index(v)


def pairs(by_key: dict[tuple, list[dict]]) -> list[tuple[tuple, SideBySide]]:
    """Every variant against memstrat-per-gpu at the same GPU count and batch, Holm-corrected
    over all of them (one family)."""
    return pairs_against(by_key, MEMSTRAT, 2, _order)


def report(records: Iterable[dict]) -> str:
    """The tables, from the records alone."""
    records = list(records)
    by_key = groups(records)
    lines = ["# Data-parallel training: memstrat beside PyTorch DDP and JAX", "",
             "ms: per process the median of its epochs 2..N (end to end, the data resident on "
             f"every GPU), per configuration {INTERVAL_NOTE}. batch: rows per GPU.", "",
             "| GPUs | batch | variant | ms/epoch [interval] n | samples/s |",
             "|---:|---:|---|---:|---:|"]
    for (n, b, v), recs in sorted(by_key.items(), key=lambda kv: _order(kv[0])):
        s = summarize(process_values(recs))
        n_train = recs[0]["config"]["dataset"]["train_samples"]
        rate = f"{n_train / (s.median / 1000.0) / 1e6:.2f} M" if s and s.median > 0 else "-"
        lines.append(f"| {n} | {b} | {v} | {ms_cell(s)} | {rate} |")
    rows = pairs(by_key)
    if rows:
        lines += ["", f"## Each variant against {MEMSTRAT}", "",
                  "variant / memstrat: the Hodges-Lehmann ratio of the processes' values with its "
                  "Moses interval; the test: two-sided Mann-Whitney U, Holm-corrected over the "
                  "rows of this table (a pair it does not separate is not ordered).", "",
                  "| GPUs | batch | variant | memstrat ms | variant ms | variant / memstrat | "
                  "test |", "|---:|---:|---|---:|---:|---:|---|"]
        for (n, b, v), p in rows:
            lines.append(f"| {n} | {b} | {v} | {ms_cell(p.memstrat)} | {ms_cell(p.other)} | "
                         f"{ratio_cell(p)} | {overlap_cell(p, v)} |")
    lines += pr.report_footer(records)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None, environ=os.environ) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    out_dir = Path(a.out_dir)
    out_md, out_jsonl = out_dir / "benchmark_data_parallel.md", out_dir / "records.jsonl"
    if a.from_records:
        return pr.from_records_main(PROG, a.from_records, report)
    if a.batch < 1 or a.epochs < 2:
        print(f"{PROG}: --batch must be >= 1 and --epochs >= 2 (epoch 1 is warm-up)",
              file=sys.stderr)
        return EXIT_USAGE
    if environ.get("NCCL_NVLS_ENABLE") != "0":
        print(f"{PROG}: set NCCL_NVLS_ENABLE=0: several GPUs need NVLink multicast (NVLink "
              "SHARP) off, and every run here refuses to start without it", file=sys.stderr)
        return EXIT_USAGE
    notes: list[str] = []
    if not pr.drop_jax_without_it(a, "jax-data-parallel", PROG, notes):
        return EXIT_USAGE
    order = pr.shuffled(specs(a), a.shuffle_seed)
    todo = pr.resumable(PROG, order, out_jsonl, a.resume)
    if todo is None:
        return EXIT_USAGE
    est = estimate_seconds(a) * len(todo) / len(order)
    print(f"plan: estimated {est / 60:.1f} min ({est:.0f} s) of device time (from one process "
          f"of each on two H100s); {len(configurations(a))} configurations x {a.repeats} "
          f"processes = {len(order)} runs ({len(todo)} to run) of {a.epochs} epochs, batch "
          f"{a.batch} per GPU, GPUs {a.gpus_list}, variants {a.variants}, in one shuffled order "
          f"(seed {a.shuffle_seed})", flush=True)
    try:
        data_dir = memstrat_inputs.resolve_data_dir(a.data)
        if a.dry_run:
            print("\n".join(f"{i:4d}. {s.tag}" for i, s in enumerate(todo, 1)))
            return EXIT_OK
        if any(VARIANTS[v][0] is None for v in a.variants):
            pr.check_memstrat(a.memstrat, ["resident"])
        if any(VARIANTS[v][0] == "pytorch_ddp.py" for v in a.variants):
            pr.check_torch(a.python, "cuda")
    except memstrat_inputs.UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_USAGE
    return pr.execute_plan(a, PROG, argv, data_dir, out_dir, out_jsonl, out_md, todo, est, notes,
                           lambda runner, s: run_spec(runner, a, s), report)


if __name__ == "__main__":
    sys.exit(main())
