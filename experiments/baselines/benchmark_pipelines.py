#!/usr/bin/env python3
"""The fastest PyTorch and JAX pipelines for memstrat's stream scenario, each measured three
ways kept apart, every run a process of its own in one seeded shuffled order.

    python3 experiments/baselines/benchmark_pipelines.py --dry-run    # plan, estimate, order
    python3 experiments/baselines/benchmark_pipelines.py              # 10 processes each
    python3 experiments/baselines/benchmark_pipelines.py --from-records results/pipelines/records.jsonl

Variants (--variants; each a script of its own):
  dataloader-prefetch-graph  pytorch_prefetch_graph.py: DataLoader (--workers host worker
                             processes, pin_memory, persistent workers, fetch batch), side-stream
                             prefetcher, CUDA-graphed step
  gpu-resident-graph         pytorch_gpu_resident.py --step graph: u8 data on the GPU, permutation
                             and augmentation by torch ops, CUDA-graphed step
  gpu-resident-compile       the same with --step compile (torch.compile, reduce-overhead)
  jax-gpu-resident           jax_gpu_resident.py: the same in JAX, jax.jit + lax.scan
Measures (--measures; config.measure in each record): pipeline (samples/s the input pipeline
delivers to a consumer that only touches each batch on the device), step (the steps with the
data already in place; not offered by the DataLoader variant, whose step is the resident graph),
epoch (end to end). For each augmentation (--augments, default light,heavy), batch --batch (256),
u8, --epochs (21) epochs, --repeats (default 10) processes per configuration.

Table: per augmentation, variant and measure the median over processes of each process's median
ms over its epochs 2..N with its order-statistic interval, and the samples/s it makes.

Exit codes: 0 every run ok; 2 bad option or missing torch/data (before any run); 3 some runs
failed (the report lists which).
"""
from __future__ import annotations

import argparse
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
from process_stats import ms_cell, process_values  # noqa: E402

EXIT_OK, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 2, 3
PROG = "benchmark_pipelines.py"
TAG = "pipelines"
# variant -> (script, its fixed options, config.strategy the script writes)
VARIANTS = {
    "dataloader-prefetch-graph": ("pytorch_prefetch_graph.py", ["--fetch", "batch"],
                                  "pytorch-dataloader-prefetch-graph"),
    "gpu-resident-graph": ("pytorch_gpu_resident.py", ["--step", "graph"],
                           "pytorch-gpu-resident-graph"),
    "gpu-resident-compile": ("pytorch_gpu_resident.py", ["--step", "compile"],
                             "pytorch-gpu-resident-compile"),
    "jax-gpu-resident": ("jax_gpu_resident.py", [], "jax-gpu-resident-jit"),
}
STRATEGY_VARIANT = {v[2]: k for k, v in VARIANTS.items()}
MEASURES = ("pipeline", "step", "epoch")
AUGMENTS = ("none", "light", "heavy")
# For the estimate only (not measured yet: rough figures, seconds). A process's start: the
# framework import and CUDA context, plus graph capture; torch.compile and XLA compile add
# their compile time. An epoch at batch 256: the DataLoader at 8 workers is bound by the numpy
# augmentation (~17 us light, ~110 us heavy per sample over 8 workers); the resident variants
# by the step (~235 graph launches) and the GPU augmentation.
PROCESS_S = {"dataloader-prefetch-graph": 6.0, "gpu-resident-graph": 5.0,
             "gpu-resident-compile": 45.0, "jax-gpu-resident": 20.0}
EPOCH_S = {("dataloader-prefetch-graph", "light"): 0.15,
           ("dataloader-prefetch-graph", "heavy"): 0.85,
           ("dataloader-prefetch-graph", "none"): 0.05}
RESIDENT_EPOCH_S = 0.03


def name_list(choices: Sequence[str]):
    def parse(s: str) -> list[str]:
        v = [p.strip() for p in s.split(",") if p.strip()]
        bad = [x for x in v if x not in choices]
        if not v or bad:
            raise argparse.ArgumentTypeError(f"{s!r}: expected a comma-separated subset of "
                                             f"{', '.join(choices)}")
        return list(dict.fromkeys(v))
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_process_options(p, "python for the PyTorch and JAX runs (default: this one)")
    p.set_defaults(repeats=10)
    p.add_argument("--variants", type=name_list(tuple(VARIANTS)), default=list(VARIANTS),
                   help="default: all")
    p.add_argument("--measures", type=name_list(MEASURES), default=list(MEASURES),
                   help="default: all")
    p.add_argument("--augments", type=name_list(AUGMENTS), default=["light", "heavy"],
                   help="default light,heavy")
    p.add_argument("--workers", type=int, default=8,
                   help="DataLoader worker processes (default %(default)s)")
    p.add_argument("--batch", type=int, default=256, help="default %(default)s")
    p.add_argument("--epochs", type=int, default=21,
                   help="epochs per run (default %(default)s; median over epochs 2..N)")
    p.add_argument("--out-dir", default=str(REPO_ROOT / "results" / "pipelines"),
                   help="where records and the table go (default %(default)s)")
    return p


def configurations(a: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(variant, augment, measure) of the plan; the DataLoader variant has no step measure."""
    return [(v, aug, m) for aug in a.augments for v in a.variants for m in a.measures
            if not (v == "dataloader-prefetch-graph" and m == "step")]


def specs(a: argparse.Namespace) -> list[pr.RunSpec]:
    out = []
    for v, aug, m in configurations(a):
        out += pr.repeated(TAG, v, (v, aug, m), f"{v}-{aug}-{m}", f"{v} {aug} {m}", a.repeats)
    return out


def estimate_seconds(a: argparse.Namespace) -> float:
    total = 0.0
    for v, aug, _ in configurations(a):
        epoch = EPOCH_S.get((v, aug), RESIDENT_EPOCH_S) * 256 / a.batch
        total += a.repeats * (PROCESS_S[v] + a.epochs * epoch)
    return total


def run_spec(runner: pr.Runner, a: argparse.Namespace, s: pr.RunSpec) -> pr.RunResult:
    v, aug, m = s.config
    script, fixed, _ = VARIANTS[v]
    args = [*fixed, "--augment", aug, "--measure", m, "--batch", str(a.batch),
            "--epochs", str(a.epochs)]
    if script != "jax_gpu_resident.py":
        args += ["--transfer", "u8"]
    if v == "dataloader-prefetch-graph":
        args += ["--workers", str(a.workers), "--pin-memory", "on", "--persistent-workers", "on",
                 "--prefetch-factor", "2"]
    return runner.script(HERE / script, s.tag, s.label, args)


def report(records: Iterable[dict]) -> str:
    """The table, from the records alone."""
    groups: dict[tuple, list[dict]] = {}
    for r in pr.run_records(records):
        c = r["config"]
        if r.get("status") != "ok" or c.get("strategy") not in STRATEGY_VARIANT:
            continue
        key = (c["augment"], int(c["batch"]), STRATEGY_VARIANT[c["strategy"]], c["measure"])
        groups.setdefault(key, []).append(r)
    lines = ["# Fastest PyTorch and JAX pipelines, stream scenario", "",
             "ms: per process the median of its epochs 2..N, per configuration the median over "
             "processes with its order-statistic interval (n = processes). pipeline: the input "
             "pipeline alone; step: the steps with the data in place; epoch: end to end.", "",
             "| augment | batch | variant | measure | ms/epoch [interval] n | samples/s |",
             "|---|---:|---|---|---:|---:|"]
    for (aug, b, v, m), recs in sorted(groups.items(), key=lambda kv: (
            AUGMENTS.index(kv[0][0]), kv[0][1], list(VARIANTS).index(kv[0][2]),
            MEASURES.index(kv[0][3]))):
        s = summarize(process_values(recs))
        n_train = recs[0]["config"]["dataset"]["train_samples"]
        rate = f"{n_train / (s.median / 1000.0) / 1e6:.2f} M" if s and s.median > 0 else "-"
        lines.append(f"| {aug} | {b} | {v} | {m} | {ms_cell(s)} | {rate} |")
    missing = pr.missing_runs(list(records)) if isinstance(records, list) else []
    if missing:
        lines += ["", "## Runs without an ok record", ""] + [f"- {x}" for x in missing]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    out_dir = Path(a.out_dir)
    out_md, out_jsonl = out_dir / "benchmark_pipelines.md", out_dir / "records.jsonl"
    if a.from_records:
        try:
            text = report(pr.load_records(a.from_records))
        except (OSError, ValueError) as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(text)
        return EXIT_OK
    if a.batch < 1 or a.epochs < 2 or a.workers < 1:
        print(f"{PROG}: --batch must be >= 1, --epochs >= 2 (epoch 1 is warm-up), --workers >= 1",
              file=sys.stderr)
        return EXIT_USAGE
    order = pr.shuffled(specs(a), a.shuffle_seed)
    est = estimate_seconds(a)
    print(f"plan: estimated {est / 60:.1f} min ({est:.0f} s) of device time (rough: no run of "
          f"these variants measured yet); {len(configurations(a))} configurations x "
          f"{a.repeats} processes = {len(order)} runs of {a.epochs} epochs, batch {a.batch}, "
          f"augments {a.augments}, variants {a.variants}, measures {a.measures}, in one "
          f"shuffled order (seed {a.shuffle_seed})", flush=True)
    try:
        data_dir = memstrat_inputs.resolve_data_dir(a.data)
        if a.dry_run:
            print("\n".join(f"{i:4d}. {s.tag}" for i, s in enumerate(order, 1)))
            return EXIT_OK
        pr.check_torch(a.python, "cuda")
    except memstrat_inputs.UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_USAGE
    runner = pr.start_plan(a, PROG, argv, data_dir, out_dir, out_jsonl, order, est, [])
    failed = [r for r in (run_spec(runner, a, s) for s in order) if not r.ok]
    runner.close()
    text = report(runner.records)
    print("\n" + text)
    out_md.write_text(text)
    print(f"wrote {out_md} and {out_jsonl}")
    for r in failed:
        print(f"failed: {r.label}: {r.error}", file=sys.stderr)
    return EXIT_RUNS_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
