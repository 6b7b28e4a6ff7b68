#!/usr/bin/env python3
"""The fastest PyTorch and JAX pipelines for memstrat's stream scenario, each measured three
ways kept apart, every run a process of its own in one seeded shuffled order.

    python3 experiments/baselines/benchmark_pipelines.py --dry-run    # plan, estimate, order
    python3 experiments/baselines/benchmark_pipelines.py              # 10 processes each
    python3 experiments/baselines/benchmark_pipelines.py --resume     # what is still missing
    python3 experiments/baselines/benchmark_pipelines.py --from-records results/pipelines/records.jsonl

Variants (--variants; each a process of its own):
  memstrat-resident          memstrat train --strategy resident: epoch = --scenario stream
                             --augment-device gpu (the data set uploaded once, each batch
                             gathered and augmented by a kernel, then its step, launched batch by
                             batch: the form resident takes in stream); step = --scenario static
                             --launch-form per-batch (the same steps, launched the same way, with
                             no augmentation); pipeline = the epoch's run with --consumer none
                             (each batch gathered and augmented, then only read by one kernel)
  dataloader                 pytorch_dataloader.py --fetch batch: the DataLoader as the stream
                             comparison runs it (--workers host worker processes, pin_memory,
                             persistent workers, one fetch per batch, non-blocking copies) and
                             the eager step: what most PyTorch loops are (epoch only: its
                             pipeline is dataloader-prefetch-graph's loader, its step eager)
  dataloader-prefetch-graph  pytorch_prefetch_graph.py: DataLoader (--workers host worker
                             processes, pin_memory, persistent workers, fetch batch), side-stream
                             prefetcher, CUDA-graphed step
  gpu-resident-graph         pytorch_gpu_resident.py --step graph: u8 data on the GPU, permutation
                             and augmentation by torch ops, CUDA-graphed step
  gpu-resident-compile       the same with --step compile (torch.compile, reduce-overhead)
  jax-gpu-resident           jax_gpu_resident.py: the same in JAX, jax.jit + lax.scan
Measures (--measures; the run tag names it, and config.measure each baseline record): pipeline
(samples/s the input pipeline delivers to a consumer that only touches each batch on the
device; gpu-resident-compile's is gpu-resident-graph's, which runs the same code), step (the
steps with the data already in place; not offered by the DataLoader variants:
dataloader-prefetch-graph's step is the resident graph, dataloader's eager PyTorch's), epoch (end
to end). For each augmentation (--augments,
default light,heavy), batch --batch (256), u8, --epochs (21) epochs, --repeats (default 10)
processes per configuration.

Tables: per augmentation, variant and measure the median over processes of each process's median
ms over its epochs 2..N with its order-statistic interval, and the samples/s it makes; then, per
augmentation and measure, each variant against memstrat-resident: variant / memstrat as the
Hodges-Lehmann ratio with its Moses interval, and whether a Mann-Whitney test, Holm-corrected
over the table's pairs, separates the two (else neither is called faster).

Without jax (the PyTorch python cannot import it) the JAX variant is left out, the reason printed
and kept in the plan record's notes; --dry-run plans it regardless.

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
from analysis.stats import rank_by_tests, summarize  # noqa: E402
from process_stats import (INTERVAL_NOTE, SideBySide, ms_cell, overlap_cell,  # noqa: E402
                           pairs_against, process_values, ratio_cell)

EXIT_OK, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 2, 3
PROG = "benchmark_pipelines.py"
TAG = "pipelines"
# variant -> (script, its fixed options, its framework); records are found by their run tag
MEMSTRAT = "memstrat-resident"
VARIANTS = {
    MEMSTRAT: (None, [], "memstrat"),
    "dataloader": ("pytorch_dataloader.py", ["--fetch", "batch"], "pytorch"),
    "dataloader-prefetch-graph": ("pytorch_prefetch_graph.py", ["--fetch", "batch"], "pytorch"),
    "gpu-resident-graph": ("pytorch_gpu_resident.py", ["--step", "graph"], "pytorch"),
    "gpu-resident-compile": ("pytorch_gpu_resident.py", ["--step", "compile"], "pytorch"),
    "jax-gpu-resident": ("jax_gpu_resident.py", [], "jax"),
}
FRAMEWORK = {v: framework for v, (_, _, framework) in VARIANTS.items()}
MEASURES = ("pipeline", "step", "epoch")
# dataloader-prefetch-graph's step is gpu-resident-graph's; dataloader's pipeline is
# dataloader-prefetch-graph's loader (pytorch_dataloader.py times the epoch only);
# gpu-resident-compile's pipeline is gpu-resident-graph's (the pipeline measure runs no step, so
# the step's form never enters it: the same timed code)
NOT_OFFERED = {("dataloader-prefetch-graph", "step"), ("dataloader", "step"),
               ("dataloader", "pipeline"), ("gpu-resident-compile", "pipeline")}
AUGMENTS = ("none", "light", "heavy")
# For the estimate only (seconds; one process of each at 21 epochs, batch 256, on one H100). A
# process's start: the framework import, the CUDA context, the host's draws of every epoch,
# graph capture; torch.compile and XLA compile add their compile time. An epoch: the DataLoader
# at 8 workers is bound by the numpy augmentation; the resident variants by the step and the
# GPU augmentation.
PROCESS_S = {MEMSTRAT: 1.5, "dataloader": 12.0, "dataloader-prefetch-graph": 12.0,
             "gpu-resident-graph": 14.0, "gpu-resident-compile": 27.0, "jax-gpu-resident": 26.0}
EPOCH_S = {("dataloader", "light"): 0.42, ("dataloader", "heavy"): 0.80,
           ("dataloader", "none"): 0.20,
           ("dataloader-prefetch-graph", "light"): 0.35,
           ("dataloader-prefetch-graph", "heavy"): 0.80,
           ("dataloader-prefetch-graph", "none"): 0.05,
           ("gpu-resident-compile", "light"): 0.35, ("gpu-resident-compile", "heavy"): 0.35}
RESIDENT_EPOCH_S = 0.05


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_process_options(p, "python for the PyTorch and JAX runs (default: this one)")
    p.set_defaults(repeats=10)
    p.add_argument("--variants", type=pr.name_list(tuple(VARIANTS)), default=list(VARIANTS),
                   help="default: all")
    p.add_argument("--measures", type=pr.name_list(MEASURES), default=list(MEASURES),
                   help="default: all")
    p.add_argument("--augments", type=pr.name_list(AUGMENTS), default=["light", "heavy"],
                   help="default light,heavy")
    p.add_argument("--workers", type=int, default=8,
                   help="DataLoader worker processes (default %(default)s)")
    p.add_argument("--batch", type=int, default=256, help="default %(default)s")
    p.add_argument("--epochs", type=int, default=21,
                   help="epochs per run (default %(default)s; median over epochs 2..N)")
    p.add_argument("--out-dir", default=str(REPO_ROOT / "results" / "pipelines"),
                   help="where records and the table go (default %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="run only the processes of the plan that have no ok record in "
                        "OUT_DIR/records.jsonl yet (same options, same order); the table then "
                        "covers the whole file")
    return p


def configurations(a: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(variant, augment, measure) of the plan, less the measures a variant does not offer."""
    return [(v, aug, m) for aug in a.augments for v in a.variants for m in a.measures
            if (v, m) not in NOT_OFFERED]


def key_of(rec: dict) -> tuple[str, str, str] | None:
    """(variant, augment, measure) from the record's run tag, PIPELINES-VARIANT-AUG-MEASURE-rN;
    None for a record of no configuration of this benchmark."""
    tag = rec["config"].get("run_tag") or ""
    if not tag.startswith(TAG + "-"):
        return None
    parts = tag[len(TAG) + 1:].rsplit("-", 3)
    if len(parts) != 4 or parts[0] not in VARIANTS or parts[1] not in AUGMENTS or \
            parts[2] not in MEASURES or (parts[0], parts[2]) in NOT_OFFERED:
        return None
    return parts[0], parts[1], parts[2]


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


def memstrat_args(a: argparse.Namespace, aug: str, m: str) -> list[str]:
    """memstrat-resident's options for one augmentation and measure; timed with the profiler
    off, as every published timing is (docs/methodology.md, "Profiler on and off")."""
    args = ["--strategy", "resident", "--batch", str(a.batch), "--epochs", str(a.epochs),
            "--transfer", "u8", "--no-profile"]
    if m == "step":
        return args + ["--scenario", "static", "--launch-form", "per-batch"]
    args += ["--scenario", "stream", "--augment", aug, "--augment-device", "gpu"]
    return args + (["--consumer", "none"] if m == "pipeline" else [])


def run_spec(runner: pr.Runner, a: argparse.Namespace, s: pr.RunSpec) -> pr.RunResult:
    v, aug, m = s.config
    if v == MEMSTRAT:
        return runner.memstrat(s.tag, s.label, memstrat_args(a, aug, m))
    script = VARIANTS[v][0]
    return runner.script(HERE / script, s.tag, s.label, script_args(a, v, aug, m))


def script_args(a: argparse.Namespace, v: str, aug: str, m: str) -> list[str]:
    """A PyTorch or JAX variant's options for one augmentation and measure."""
    script, fixed, _ = VARIANTS[v]
    args = [*fixed, "--augment", aug, "--batch", str(a.batch), "--epochs", str(a.epochs)]
    if v != "dataloader":  # it times the epoch only, and has no --measure
        args += ["--measure", m]
    if script != "jax_gpu_resident.py":
        args += ["--transfer", "u8"]
    if v in ("dataloader", "dataloader-prefetch-graph"):
        args += ["--workers", str(a.workers), "--pin-memory", "on", "--persistent-workers", "on",
                 "--prefetch-factor", "2"]
    if v == "dataloader":
        args += ["--non-blocking", "on"]
    return args


def groups(records: Iterable[dict]) -> dict[tuple, list[dict]]:
    """(augment, batch, variant, measure) -> its ok run records."""
    out: dict[tuple, list[dict]] = {}
    for r in pr.run_records(records):
        k = key_of(r)
        if r.get("status") != "ok" or k is None:
            continue
        v, aug, m = k
        out.setdefault((aug, int(r["config"]["batch"]), v, m), []).append(r)
    return out


def _order(key: tuple) -> tuple:
    aug, b, v, m = key
    return AUGMENTS.index(aug), b, MEASURES.index(m), list(VARIANTS).index(v)


def pairs(by_key: dict[tuple, list[dict]]) -> list[tuple[tuple, SideBySide]]:
    """Every other variant against memstrat-resident at the same augmentation, batch and
    measure, Holm-corrected over all of them (one family)."""
    return pairs_against(by_key, MEMSTRAT, 2, _order)


def strongest(by_key: dict[tuple, list[dict]], aug: str, batch: int, measure: str,
              frameworks: Sequence[str]) -> str | None:
    """The variant of `frameworks` no other of them beats by the Holm-corrected pairwise tests
    (rank 1; the lowest median among several), at one augmentation, batch and measure."""
    cands = [v for v in VARIANTS if FRAMEWORK[v] in frameworks and (aug, batch, v, measure)
             in by_key]
    # rank_by_tests sorts by rank, then median: the first is rank 1 with the lowest median (or,
    # none tested, the lowest median)
    ranked = rank_by_tests(cands, lambda v: process_values(by_key[(aug, batch, v, measure)]))
    return ranked[0].item if ranked else None


def comparison(by_key: dict[tuple, list[dict]]) -> list[str]:
    rows = pairs(by_key)
    if not rows:
        return []
    lines = ["", "## Each variant against memstrat-resident", "",
             "variant / memstrat: the Hodges-Lehmann ratio of the processes' values with its "
             "Moses interval; the test: two-sided Mann-Whitney U, Holm-corrected over the rows "
             "of this table (a pair it does not separate is not ordered).", "",
             "| augment | batch | measure | variant | memstrat ms | variant ms | "
             "variant / memstrat | test |", "|---|---:|---|---|---:|---:|---:|---|"]
    for (aug, b, v, m), p in rows:
        lines.append(f"| {aug} | {b} | {m} | {v} | {ms_cell(p.memstrat)} | {ms_cell(p.other)} "
                     f"| {ratio_cell(p)} | {overlap_cell(p, v)} |")
    return lines


def report(records: Iterable[dict]) -> str:
    """The tables, from the records alone."""
    records = list(records)
    by_key = groups(records)
    lines = ["# Fastest PyTorch and JAX pipelines beside memstrat's, stream scenario", "",
             f"ms: per process the median of its epochs 2..N, per configuration {INTERVAL_NOTE}. "
             "pipeline: the input pipeline alone; step: the steps with the data in place; "
             "epoch: end to end.", "",
             "| augment | batch | variant | measure | ms/epoch [interval] n | samples/s |",
             "|---|---:|---|---|---:|---:|"]
    for (aug, b, v, m), recs in sorted(by_key.items(), key=lambda kv: _order(kv[0])):
        s = summarize(process_values(recs))
        n_train = recs[0]["config"]["dataset"]["train_samples"]
        rate = f"{n_train / (s.median / 1000.0) / 1e6:.2f} M" if s and s.median > 0 else "-"
        lines.append(f"| {aug} | {b} | {v} | {m} | {ms_cell(s)} | {rate} |")
    lines += comparison(by_key)
    lines += pr.report_footer(records)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    out_dir = Path(a.out_dir)
    out_md, out_jsonl = out_dir / "benchmark_pipelines.md", out_dir / "records.jsonl"
    if a.from_records:
        return pr.from_records_main(PROG, a.from_records, report)
    if a.batch < 1 or a.epochs < 2 or a.workers < 1:
        print(f"{PROG}: --batch must be >= 1, --epochs >= 2 (epoch 1 is warm-up), --workers >= 1",
              file=sys.stderr)
        return EXIT_USAGE
    notes: list[str] = []
    if not pr.drop_jax_without_it(a, "jax-gpu-resident", PROG, notes):
        return EXIT_USAGE
    order = pr.shuffled(specs(a), a.shuffle_seed)
    if not order:
        print(f"{PROG}: no configuration: {', '.join(a.variants)} offer none of the measures "
              f"{', '.join(a.measures)}", file=sys.stderr)
        return EXIT_USAGE
    if a.resume and out_jsonl.is_file():
        try:
            why = pr.other_plan(pr.read_records([out_jsonl]), PROG, a.shuffle_seed, a.repeats,
                                {s.tag: {"batch": a.batch, "epochs": a.epochs} for s in order})
        except (OSError, ValueError) as e:
            why = str(e)
        if why:
            print(f"{PROG}: {out_jsonl} holds records of another plan ({why}): --resume "
                  "continues only the plan that wrote the file; give the options it ran with, "
                  "or another --out-dir", file=sys.stderr)
            return EXIT_USAGE
    todo = pr.resumable(PROG, order, out_jsonl, a.resume)
    if todo is None:
        return EXIT_USAGE
    est = estimate_seconds(a) * len(todo) / len(order)   # order is not empty
    print(f"plan: estimated {est / 60:.1f} min ({est:.0f} s) of device time (from one process "
          f"of each on one H100); {len(configurations(a))} configurations x "
          f"{a.repeats} processes = {len(order)} runs ({len(todo)} to run) of {a.epochs} epochs, "
          f"batch {a.batch}, "
          f"augments {a.augments}, variants {a.variants}, measures {a.measures}, in one "
          f"shuffled order (seed {a.shuffle_seed})", flush=True)
    try:
        data_dir = memstrat_inputs.resolve_data_dir(a.data)
        if a.dry_run:
            print("\n".join(f"{i:4d}. {s.tag}" for i, s in enumerate(todo, 1)))
            return EXIT_OK
        if MEMSTRAT in a.variants:
            pr.check_memstrat(a.memstrat, ["resident"])
        if set(a.variants) - {MEMSTRAT}:
            pr.check_torch(a.python, "cuda")
    except memstrat_inputs.UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_USAGE
    return pr.execute_plan(a, PROG, argv, data_dir, out_dir, out_jsonl, out_md, todo, est, notes,
                           lambda runner, s: run_spec(runner, a, s), report)


if __name__ == "__main__":
    sys.exit(main())
