#!/usr/bin/env python3
"""memstrat's stream scenario against PyTorch's DataLoader, on one GPU, with the same
augmentation, batch, data and sample order.

    python3 experiments/baselines/benchmark_stream.py --reproduce     # the results set's preset
    python3 experiments/baselines/benchmark_stream.py                 # the full default run
    python3 experiments/baselines/benchmark_stream.py --quick         # 1 and 4 workers, light
    python3 experiments/baselines/benchmark_stream.py --dry-run       # plan, estimate, order
    python3 experiments/baselines/benchmark_stream.py --reproduce --resume   # what is missing
    python3 experiments/baselines/benchmark_stream.py --from-records results/vs_dataloader/records.jsonl

For every augmentation (--augments, default light,heavy) and worker count (--workers,
default 0,1,2,4,8) it runs
  memstrat train --scenario stream --augment A --workers W --prefetch 2W   for every
      --strategies entry (default: every strategy that runs host-produced batches), W >= 1
      (memstrat's producers are threads of the training process; there is no "0 workers");
  experiments/baselines/pytorch_dataloader.py --augment A --workers W   with --pin-memory on
      and off (--pin-memory), --fetch (default batch: one __getitem__ per batch, the fastest
      pure-PyTorch form; add sample for the per-sample form users write), persistent workers
      and prefetch_factor 2 (the DataLoader's default) when W > 0,
with batch --batch (256), u8 transfer (both normalise on the GPU), --epochs (5) epochs. Both
sides keep 2 batches per worker ahead (memstrat's --prefetch = 2W slots). Strategies that do
not run host-produced batches are not offered: resident serves the stream scenario with
--augment none only, and zero-copy-staged, pinned-graph and double-buffer-graph stage a fixed
layout (memory_strategies/registry.cpp refuses them; memstrat info lists it per device).

Every configuration runs as --repeats (default 3) processes of its own, all runs of all
configurations in one seeded shuffled order (--shuffle-seed, default 1; the matrix runner's
order). A process's value is the median wall ms of its epochs 2..N (epoch 1 is warm-up on both
sides) and its starvation (the share of an epoch the training loop waited for a batch, the
first batch's wait left out: docs/methodology.md); a configuration's, the median over its
processes with its order-statistic interval. The table pairs, per augmentation and worker
count, every memstrat strategy with every DataLoader setting: both sides' values, DataLoader /
memstrat as the Hodges-Lehmann ratio with its Moses interval, and whether a Mann-Whitney test,
Holm-corrected over the table's pairs, separates the two (else neither is called faster). Below
it, each side's fastest (no other configuration of that side significantly faster). The ratio
includes the training step itself, which is faster in memstrat than in PyTorch eager
(benchmark_vs_pytorch.py measures that); the starvation columns compare the input pipelines alone.

--measure pipeline measures the input pipelines with no step at all (pipeline throughput):
memstrat with --consumer none (each batch acquired, one element of it read on the GPU, released)
against the DataLoader through pytorch_prefetch_graph.py --measure pipeline (each batch copied to
the GPU on a side stream and touched by one small kernel), the same workers, pin_memory, fetch
and prefetch otherwise. Its runs are tagged -pipeline, so both measures can share a records file
(the second measure runs into it with --resume); the table keeps them apart.

--reproduce is the results set's preset (experiments/scripts/reproduce.sh): augment
light,heavy; the DataLoader with 0,1,2,4,8 workers, pin_memory on, fetch batch, persistent
workers, prefetch_factor 2 (its best documented settings; pin_memory off stays available with
--pin-memory); memstrat pinned and double-buffer with 1,2,4,8 workers; batch 256; 10
processes per configuration (a published row's minimum: docs/methodology.md, "Statistics over
processes"), each of up to 21 epochs, with --steady-s 1: a configuration whose epoch is long
(the DataLoader, heavy augmentation, few workers) runs the fewest epochs, 3 at least, that
give it 2 s of steady work by the estimate, the others 21 (20 steady epochs). It leaves out
the DataLoader with heavy at 0 and 1 workers: the numpy warp costs ~110 us per sample in one
process, ~7 s per epoch; with them left out the preset is 160 memstrat + 80 DataLoader
processes, estimated at 15 min per measure on a 16-core H200 host (23 min with them).

Output: a progress line per run; the table printed and written as Markdown to --out-md
(default OUT_DIR/benchmark_stream.md); every record (memstrat's and the DataLoader's, schema
1) and a plan record (command, seed, run order, notes) appended to --out-jsonl (default
OUT_DIR/records.jsonl), from which --from-records rebuilds the same table, running nothing.

--resume: a plan stopped half-way (Ctrl-C, a time limit) or split over sittings continues where
it was: the same options run only the processes that have no ok record in --out-jsonl yet, in
the plan's seeded order (the same as without --resume); a process interrupted leaves no record,
so it runs again. The table covers every record of the file. A file that holds runs is refused
without --resume (a second plan would mix into it), and with it when its records are of another
plan (another benchmark, shuffle seed or repeats, a run tag this plan does not have, a run of
another batch or number of epochs). The other --measure's runs with the same options may share
the file: reproduce.sh runs both measures into one, each with --resume.

Exit codes: 0 every run ok; 2 bad option, missing memstrat/torch/data or a records file of
another plan (before any run); 3 some runs failed (the report lists which).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
DATALOADER = REPO_ROOT / "experiments" / "baselines" / "pytorch_dataloader.py"
# --measure pipeline: the DataLoader whose batches a side stream copies to the GPU, where one
# small kernel touches each (no step), as memstrat's --consumer none
PREFETCH = DATALOADER.parent / "pytorch_prefetch_graph.py"
sys.path.insert(0, str(DATALOADER.parent))
sys.path.insert(0, str(REPO_ROOT))
import memstrat_inputs  # noqa: E402  (the data-dir search)
import process_runs as pr  # noqa: E402  (processes, order, plan record)
from analysis.stats import Summary, summarize  # noqa: E402
from analysis.stream import process_starvation  # noqa: E402  (the one definition)
from process_stats import (fastest, judge, ms_cell, overlap_cell, pct_cell,  # noqa: E402
                           process_values, ratio_cell, side_by_side, tally)

EXIT_OK, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 2, 3
PROG = "benchmark_stream.py"
TAG = "vs-dataloader"
# Every strategy that runs host-produced batches (memory_strategies/registry.cpp: resident
# gathers on the GPU, --augment none only; zero-copy-staged and the graph forms refuse the
# stream scenario).
STRATEGIES = ("pageable", "pinned", "double-buffer", "zero-copy", "um", "um-prefetch",
              "um-advise", "um-prefetch-coarse")
AUGMENTS = ("none", "light", "heavy")
PREFETCH_PER_WORKER = 2  # the DataLoader's default prefetch_factor
DATALOADER_NAME = "pytorch-dataloader"
PREFETCH_NAME = "pytorch-dataloader-prefetch-graph"
MEASURES = ("epoch", "pipeline")
# For the time estimate only. Augmentation, us per sample in one thread/process: numpy heavy
# (the batch form) ~110 us on the H200 host; numpy none/light by the ratios measured in one
# process (0.17 / 3.6 / 23.6 us); memstrat's C++ (experiments/tools/augment_bench, rounded up:
# 0.07 / 0.12 / 8.1 us). The per-sample form (--fetch sample) costs ~6x the batch form. A
# training step's ms per epoch at batch 256 (PyTorch eager; memstrat). Seconds per process
# besides its epochs, and per DataLoader worker started.
NUMPY_US = {"none": 1.0, "light": 17.0, "heavy": 110.0}
MEMSTRAT_US = {"none": 0.1, "light": 0.2, "heavy": 8.0}
FETCH_SAMPLE_FACTOR = 6.0
STEP_MS = {"memstrat": 12.0, "dataloader": 190.0}
PROCESS_S = {"memstrat": 0.8, "dataloader": 3.0}
WORKER_START_S = 0.1
TRAIN_SAMPLES = 60000
MIN_EPOCHS = 3          # --steady-s: epoch 1 is warm-up; two steady epochs at least
STEADY_SAFETY = 2.0     # --steady-s: the estimate's margin, for a host slower than the H200's
REPRODUCE_TARGET_S = 960.0
REPRODUCE = {"augments": ["light", "heavy"], "workers": [0, 1, 2, 4, 8],
             "strategies": ["pinned", "double-buffer"], "pin_memory": ["on"],
             "fetch": ["batch"], "batch": 256, "epochs": 21, "steady_s": 1.0, "repeats": 10,
             "dataloader_skip": [("heavy", 0), ("heavy", 1)]}
REPRODUCE_WHY = ("--reproduce: with 0 or 1 workers the numpy warp takes ~7 s per epoch; left "
                 "out so that the preset fits about 16 minutes (estimated) on a 16-core H200 "
                 "host")


def worker_list(s: str) -> list[int]:
    try:
        v = [int(p) for p in s.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected integers >= 0") from None
    if not v or any(x < 0 or x > 256 for x in v):
        raise argparse.ArgumentTypeError(f"{s!r}: expected worker counts in 0..256")
    return sorted(set(v))


def skip_item(s: str) -> tuple[str, int]:
    parts = s.split(":")
    if len(parts) != 2 or parts[0] not in AUGMENTS or not parts[1].isdigit():
        raise argparse.ArgumentTypeError(f"{s!r}: expected AUGMENT:WORKERS, e.g. heavy:0")
    return parts[0], int(parts[1])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_process_options(p, "python for the DataLoader runs (default: this one)")
    p.add_argument("--reproduce", action="store_true",
                   help="the results set's preset (see above); takes no option that changes "
                        "the plan")
    p.add_argument("--strategies", type=pr.name_list(STRATEGIES), default=list(STRATEGIES),
                   help="memstrat strategies (default: all that run host-produced batches)")
    p.add_argument("--workers", type=worker_list, default=[0, 1, 2, 4, 8],
                   help="worker counts (default 0,1,2,4,8; 0 runs the DataLoader only)")
    p.add_argument("--augments", type=pr.name_list(AUGMENTS), default=["light", "heavy"],
                   help="augmentations (default light,heavy)")
    p.add_argument("--pin-memory", type=pr.name_list(("on", "off")), default=["on", "off"],
                   help="DataLoader pin_memory settings (default on,off)")
    p.add_argument("--fetch", type=pr.name_list(("batch", "sample")), default=["batch"],
                   help="DataLoader fetch forms (default batch; batch,sample adds the "
                        "per-sample form)")
    p.add_argument("--dataloader-skip", type=skip_item, action="append", default=[],
                   metavar="A:W", help="leave out the DataLoader with augmentation A and W "
                   "workers (repeatable), e.g. heavy:0")
    p.add_argument("--measure", choices=MEASURES, default="epoch",
                   help="epoch: end to end, each batch trained (memstrat's step, PyTorch's eager "
                        "step); pipeline: the input pipelines alone, each batch only touched on "
                        "the GPU (memstrat --consumer none; the DataLoader through "
                        "pytorch_prefetch_graph.py --measure pipeline) (default %(default)s)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default %(default)s)")
    p.add_argument("--epochs", type=int, default=5,
                   help="epochs per run (default %(default)s; median over epochs 2..N); with "
                        "--steady-s, the most a run makes")
    p.add_argument("--steady-s", type=float, default=None, metavar="S",
                   help="each configuration runs the fewest epochs (3 at least, --epochs at "
                        "most) whose steady epochs 2..N take STEADY_SAFETY x S seconds by the "
                        "plan's estimate of its epoch: a slow configuration (the DataLoader, "
                        "heavy augmentation, few workers) still gets S s of steady work per "
                        "process, a fast one --epochs (default: every run makes --epochs)")
    p.add_argument("--quick", action="store_true",
                   help="workers 1,4, light only, pinned and double-buffer, pin_memory on, "
                        "3 epochs")
    p.add_argument("--out-dir", default=str(REPO_ROOT / "results" / "vs_dataloader"),
                   help="where records and the table go (default %(default)s)")
    p.add_argument("--out-md", help="Markdown table (default OUT_DIR/benchmark_stream.md)")
    p.add_argument("--out-jsonl",
                   help="records, appended (default OUT_DIR/records.jsonl); a file that holds "
                        "runs already is refused unless --resume continues its plan")
    p.add_argument("--resume", action="store_true",
                   help="run only the processes of the plan that have no ok record in "
                        "--out-jsonl yet (same options, same order; the other --measure's runs "
                        "may share the file); the table then covers the whole file")
    return p


# ---------------------------------------------------------------------------------------------
# the plan

@dataclass
class Plan:
    strategies: list[str]
    workers: list[int]
    augments: list[str]
    pins: list[str]
    fetches: list[str]
    batch: int
    epochs: int
    skip: list[tuple[str, int]] = field(default_factory=list)   # DataLoader (augment, workers)
    why: str = ""
    measure: str = "epoch"
    steady_s: float | None = None     # --steady-s: epochs per configuration from its estimate
    samples: int = TRAIN_SAMPLES      # training samples per epoch (--train-samples)

    def epochs_for(self, side: str, config: tuple) -> int:
        """The epochs a run of `config` makes: --epochs, or with --steady-s the fewest (3 at
        least, --epochs at most) whose steady epochs take STEADY_SAFETY x steady_s seconds by
        epoch_seconds."""
        if self.steady_s is None:
            return self.epochs
        steady = math.ceil(STEADY_SAFETY * self.steady_s / epoch_seconds(self, side, config))
        return max(MIN_EPOCHS, min(self.epochs, 1 + steady))

    @property
    def suffix(self) -> str:
        """The tag and label suffix of the pipeline measure (its runs can share a file)."""
        return "" if self.measure == "epoch" else f"-{self.measure}"

    def memstrat_runs(self) -> list[tuple[str, str, int]]:
        return [(s, a, w) for a in self.augments for w in self.workers if w > 0
                for s in self.strategies]

    def dataloader_runs(self) -> list[tuple[str, int, str, str]]:
        return [(a, w, pin, fetch) for a in self.augments for w in self.workers
                if (a, w) not in self.skip for pin in self.pins for fetch in self.fetches]

    def specs(self, repeats: int) -> list[pr.RunSpec]:
        out = []
        for s, aug, w in self.memstrat_runs():
            out += pr.repeated(TAG, "memstrat", (s, aug, w), f"{s}-{aug}-w{w}{self.suffix}",
                               f"memstrat {s} {aug} w={w}{self.suffix}", repeats)
        for aug, w, pin, fetch in self.dataloader_runs():
            out += pr.repeated(TAG, "dataloader", (aug, w, pin, fetch),
                               f"torch-{aug}-w{w}-pin{pin}-{fetch}{self.suffix}",
                               f"DataLoader {aug} w={w} pin_memory {pin}, fetch {fetch}"
                               f"{self.suffix}", repeats)
        return out

    def notes(self) -> list[str]:
        why = f" ({self.why})" if self.why else ""
        out = []
        if self.steady_s is not None:
            out.append(f"epochs per configuration (--steady-s {self.steady_s:g}): the fewest, "
                       f"{MIN_EPOCHS} to {self.epochs}, whose steady epochs take "
                       f"{STEADY_SAFETY:g} x {self.steady_s:g} s by the plan's estimate")
        for aug in self.augments:
            ws = [str(w) for w in self.workers if (aug, w) in self.skip]
            if ws:
                out.append(f"DataLoader with --augment {aug} and {', '.join(ws)} workers: not "
                           f"run{why}")
        return out


def make_plan(a: argparse.Namespace) -> Plan:
    if a.quick:
        return Plan(["pinned", "double-buffer"], [1, 4], ["light"], ["on"], ["batch"], a.batch,
                    3, measure=a.measure)
    if a.epochs < 2:
        raise ValueError("--epochs must be >= 2 (epoch 1 is warm-up)")
    if a.batch < 1:
        raise ValueError("--batch must be >= 1")
    if a.steady_s is not None and not (0 < a.steady_s < 3600):
        raise ValueError("--steady-s must be a number of seconds above 0 (and below 3600)")
    if a.steady_s is not None and a.epochs < MIN_EPOCHS:
        raise ValueError(f"--steady-s needs --epochs >= {MIN_EPOCHS}")
    return Plan(a.strategies, a.workers, a.augments, a.pin_memory, a.fetch, a.batch, a.epochs,
                list(a.dataloader_skip), REPRODUCE_WHY if a.reproduce else "", a.measure,
                a.steady_s, a.train_samples or TRAIN_SAMPLES)


def epoch_seconds(plan: Plan, side: str, config: tuple, samples: int | None = None) -> float:
    """One epoch of a run on the H200 host (NUMPY_US, MEMSTRAT_US, STEP_MS): the longer of the
    workers' production and the training steps (0 workers: both, one after the other); the
    pipeline measure has no step."""
    scale = (256 / plan.batch) if plan.measure == "epoch" else 0.0
    samples = plan.samples if samples is None else samples
    if side == "memstrat":
        _, aug, w = config
        return max(samples * MEMSTRAT_US[aug] / 1e6 / w, STEP_MS["memstrat"] * scale / 1e3)
    aug, w, _, fetch = config
    make = samples * NUMPY_US[aug] / 1e6 * (FETCH_SAMPLE_FACTOR if fetch == "sample" else 1)
    step = STEP_MS["dataloader"] * scale / 1e3
    return make + step if w == 0 else max(make / w, step)


def estimate_seconds(plan: Plan, repeats: int, samples: int | None = None) -> float:
    """The plan's time on the H200 host (epoch_seconds, PROCESS_S): a process's start plus its
    epochs."""
    total = PROCESS_S["dataloader"]  # the check before the first run
    for c in plan.memstrat_runs():
        total += repeats * (PROCESS_S["memstrat"] + plan.epochs_for("memstrat", c)
                            * epoch_seconds(plan, "memstrat", c, samples))
    for c in plan.dataloader_runs():
        total += repeats * (PROCESS_S["dataloader"] + c[1] * WORKER_START_S
                            + plan.epochs_for("dataloader", c)
                            * epoch_seconds(plan, "dataloader", c, samples))
    return total


# ---------------------------------------------------------------------------------------------
# the table: from records alone, so that a results set can be tabled again

@dataclass
class Entry:
    """One configuration over its processes."""
    side: str                 # "memstrat" | "dataloader"
    measure: str              # "epoch" | "pipeline"
    augment: str
    batch: int
    workers: int
    setting: str              # the strategy, or the DataLoader's settings
    wall: list[float]         # per process: median wall ms of epochs 2..N
    starvation: list[float]   # per process: median starvation of epochs 2..N

    @property
    def ms(self) -> Summary | None:
        return summarize(self.wall)

    @property
    def starving(self) -> Summary | None:
        return summarize(self.starvation)

    @property
    def name(self) -> str:
        return f"{self.setting}, {self.workers} worker{'' if self.workers == 1 else 's'}"


def measure_of(rec: dict) -> str:
    """pipeline for a run whose batches no step took (memstrat's config.consumer none, a
    baseline's config.measure pipeline), else epoch."""
    c = rec["config"]
    return "pipeline" if c.get("consumer") == "none" or c.get("measure") == "pipeline" \
        else "epoch"


def _setting(rec: dict) -> tuple[str, str]:
    c = rec["config"]
    if c["strategy"] in (DATALOADER_NAME, PREFETCH_NAME):
        pin = "on" if c.get("pin_memory") else "off"
        return "dataloader", f"pin_memory {pin}, fetch {c.get('fetch')}"
    return "memstrat", c["strategy"]


def entries(records: Iterable[dict]) -> list[Entry]:
    """Ok stream records (memstrat's and the DataLoader's) -> one Entry per configuration."""
    runs: dict[tuple, list[dict]] = {}
    for r in pr.run_records(records):
        c = r["config"]
        if r.get("status") != "ok" or c.get("scenario") != "stream" or not r.get("epochs"):
            continue
        side, setting = _setting(r)
        runs.setdefault((side, measure_of(r), c["augment"], int(c["batch"]), int(c["workers"]),
                         setting), []).append(r)
    return [Entry(*key, process_values(recs),
                  [v for v in map(process_starvation, recs) if v is not None])
            for key, recs in runs.items()]


def _row(m: Entry | None, d: Entry | None, p) -> str:
    return (f"| {(m or d).workers} | {m.setting if m else '-'} | {ms_cell(p.memstrat, '-')} | "
            f"{pct_cell(m.starving) if m else '-'} | {d.setting if d else '-'} | "
            f"{ms_cell(p.other)} | {pct_cell(d.starving) if d else '-'} | {ratio_cell(p)} | "
            f"{overlap_cell(p, 'DataLoader')} |")


def _fastest(mine: Sequence[Entry], side: str) -> tuple[str, Entry | None]:
    top = fastest([e for e in mine if e.side == side], lambda e: e.wall)
    if not top:
        return "no configuration with 3 processes or more: none named", None
    top.sort(key=lambda e: e.ms.median)
    text = "; ".join(f"{e.name}: {ms_cell(e.ms)}" for e in top)
    return text + (" (not separated by the Holm-corrected tests: not ordered among them)"
                   if len(top) > 1 else ""), top[0]


def ratio_markdown(all_entries: Sequence[Entry]) -> str:
    """Per augmentation and batch: every memstrat strategy against every DataLoader setting at
    each worker count, then each side's fastest tier."""
    order = {s: i for i, s in enumerate(STRATEGIES)}
    lines = []
    for measure, aug, batch in sorted({(e.measure, e.augment, e.batch) for e in all_entries},
                                      key=lambda k: (MEASURES.index(k[0]),
                                                     AUGMENTS.index(k[1]), k[2])):
        mine = [e for e in all_entries if (e.measure, e.augment, e.batch) == (measure, aug, batch)]
        head = "" if measure == "epoch" else "pipeline throughput, "
        lines += [f"### {head}--augment {aug}, batch {batch}", ""]
        if measure == "pipeline":
            lines += ["The input pipelines alone, each batch only touched on the GPU; samples/s "
                      f"= {TRAIN_SAMPLES:,} / ms per epoch.", ""]
        lines += ["| workers | memstrat | ms/epoch [interval] n | starvation | DataLoader | "
                  "ms/epoch [interval] n | starvation | DataLoader / memstrat [interval] | "
                  "test |", "|---:|---|---:|---:|---|---:|---:|---:|---|"]
        cells = []
        for w in sorted({e.workers for e in mine}):
            ms = sorted((e for e in mine if e.side == "memstrat" and e.workers == w),
                        key=lambda e: order.get(e.setting, len(order)))
            ds = sorted((e for e in mine if e.side == "dataloader" and e.workers == w),
                        key=lambda e: e.setting)
            for m in ms or [None]:
                for d in ds or [None]:
                    cells.append((m, d, side_by_side(m.wall if m else [], d.wall if d else [])))
        judge([p for m, d, p in cells if m and d])      # Holm over the table's pairs
        lines += [_row(m, d, p) for m, d, p in cells]
        pairs = [p for m, d, p in cells if m and d]
        m_text, m_best = _fastest(mine, "memstrat")
        d_text, d_best = _fastest(mine, "dataloader")
        lines += ["", f"- same worker count: {tally(pairs, 'DataLoader')}" if pairs else
                  "- no worker count with both sides",
                  f"- memstrat's fastest: {m_text}", f"- DataLoader's fastest: {d_text}"]
        if m_best and d_best:
            p = side_by_side(m_best.wall, d_best.wall)
            lines.append(f"- DataLoader / memstrat, the lowest medians of the fastest ("
                         f"{d_best.name} / {m_best.name}): {ratio_cell(p)}, "
                         f"{overlap_cell(p, 'DataLoader')}")
        lines.append("")
    return "\n".join(lines).rstrip()


def report(records: Sequence[dict]) -> str:
    md = ["# memstrat stream scenario vs PyTorch DataLoader", "", pr.provenance_line(records),
          ""]
    md += [f"- {ln}" for ln in pr.environment_lines(records)]
    md += ["- ms/epoch: per process the median wall ms of its epochs 2..N, per configuration "
           "the median over processes with its order-statistic interval (its coverage printed "
           "where below 95%; n = processes; no interval with fewer than 3); starvation: the "
           "share of an epoch the loop waited for a batch, the first batch's wait left out, the "
           "same statistics (docs/methodology.md). DataLoader / memstrat: the Hodges-Lehmann "
           "ratio with its Moses interval; where a Mann-Whitney test, Holm-corrected over the "
           "table's pairs, does not separate the two, neither side is called faster. End to "
           "end, the ratio includes the training step, which memstrat runs faster than "
           "PyTorch eager, and the starvation columns compare the input pipelines alone; the "
           "pipeline-throughput tables compare the pipelines with no step at all (memstrat "
           "--consumer none; the DataLoader's batches copied on a side stream and touched by "
           "one kernel). u8 transfer, "
           "memstrat --prefetch = 2 x workers, the DataLoader with persistent workers and "
           "prefetch_factor 2.", ""]
    md += [ratio_markdown(entries(records)), ""]
    md += [f"- {n}" for p in pr.plans(records) for n in p.get("notes", [])] + [""]
    missing = pr.missing_runs(records)
    if missing:
        md += ["## Runs without an ok record", ""] + [f"- {m}" for m in missing] + [""]
    md += pr.order_lines(records)
    return "\n".join(md).rstrip() + "\n"


def write_report(records: Sequence[dict], out_md: Path) -> None:
    text = report(records)
    print("\n" + text, flush=True)
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(text)


# ---------------------------------------------------------------------------------------------
# --resume: what the records file already holds

def expected_runs(plan: Plan, repeats: int) -> dict[str, dict]:
    """Every run tag of the plan at either measure (both can share a records file), with the
    config values the tag does not name: the batch and the epochs."""
    out: dict[str, dict] = {}
    for m in MEASURES:
        p = dataclasses.replace(plan, measure=m)
        out.update({s.tag: {"batch": p.batch, "epochs": p.epochs_for(s.side, s.config)}
                    for s in p.specs(repeats)})
    return out


def resume_point(a: argparse.Namespace, plan: Plan, order: Sequence[pr.RunSpec],
                 out_jsonl: Path) -> list[pr.RunSpec] | None:
    """The runs still to do, in the plan's order, as pr.resumable() has them; None (the reason
    on stderr) when the records file cannot take this plan."""
    if a.resume and out_jsonl.is_file():
        try:
            why = pr.other_plan(pr.read_records([out_jsonl]), PROG, a.shuffle_seed, a.repeats,
                                expected_runs(plan, a.repeats))
        except (OSError, ValueError) as e:
            usage(str(e))
            return None
        if why:
            usage(f"{out_jsonl} holds records of another plan ({why}): --resume continues only "
                  "the plan that wrote the file; give the options it ran with, or another "
                  "--out-jsonl")
            return None
    return pr.resumable(PROG, order, out_jsonl, a.resume)


# ---------------------------------------------------------------------------------------------
# runs

def run_spec(runner: pr.Runner, plan: Plan, s: pr.RunSpec) -> pr.RunResult:
    b, e = str(plan.batch), str(plan.epochs_for(s.side, s.config))
    if s.side == "memstrat":
        strategy, aug, w = s.config
        return runner.memstrat(s.tag, s.label,
                               ["--strategy", strategy, "--transfer", "u8", "--batch", b,
                                "--hidden", "256", "--epochs", e, "--graphs", "on",
                                "--no-profile", "--scenario", "stream", "--augment", aug,
                                "--workers", str(w), "--prefetch", str(PREFETCH_PER_WORKER * w)]
                               + (["--consumer", "none"] if plan.measure == "pipeline" else []))
    aug, w, pin, fetch = s.config
    args = ["--augment", aug, "--workers", str(w), "--pin-memory", pin, "--fetch", fetch,
            "--transfer", "u8", "--batch", b, "--epochs", e]
    if w > 0:
        args += ["--persistent-workers", "on", "--prefetch-factor", str(PREFETCH_PER_WORKER)]
    if plan.measure == "pipeline":
        return runner.script(PREFETCH, s.tag, s.label, args + ["--measure", "pipeline"])
    return runner.script(DATALOADER, s.tag, s.label, args)


def usage(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    a = parser.parse_args(argv)
    out_dir = Path(a.out_dir)
    out_md = Path(a.out_md) if a.out_md else out_dir / "benchmark_stream.md"
    out_jsonl = Path(a.out_jsonl) if a.out_jsonl else out_dir / "records.jsonl"
    if a.from_records:
        try:
            write_report(pr.load_records(a.from_records), out_md)
        except (OSError, ValueError) as e:
            return usage(str(e))
        return EXIT_OK
    try:
        if a.reproduce:
            pr.apply_preset(a, parser, REPRODUCE, [*REPRODUCE, "quick"], argv)
        plan = make_plan(a)
        order = pr.shuffled(plan.specs(a.repeats), a.shuffle_seed)
    except ValueError as e:
        return usage(str(e))
    if not order:
        return usage("no run: every DataLoader configuration is left out and memstrat has none "
                     "(it runs 1 worker or more)")
    todo = resume_point(a, plan, order, out_jsonl)
    if todo is None:
        return EXIT_USAGE
    est = estimate_seconds(plan, a.repeats)
    if len(todo) < len(order):        # the estimate of what is left, as benchmark_pipelines.py
        est *= len(todo) / len(order)
    lengths = sorted({plan.epochs_for(s.side, s.config) for s in order})
    epochs = (f"{lengths[0]}" if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]}") \
        if lengths else str(plan.epochs)
    n_mem = sum(s.side == "memstrat" for s in order)
    print(f"plan: estimated {est / 60:.1f} min ({est:.0f} s) on a 16-core H200 host; augments "
          f"{plan.augments}, workers {plan.workers}, memstrat strategies {plan.strategies}, "
          f"DataLoader pin_memory {plan.pins} x fetch {plan.fetches}; {a.repeats} processes per "
          f"configuration: {n_mem} memstrat + {len(order) - n_mem} DataLoader runs of "
          f"{epochs} epochs, batch {plan.batch}, u8, in one shuffled order (seed "
          f"{a.shuffle_seed}), {len(todo)} to run" + "".join(f"; {n}" for n in plan.notes()),
          flush=True)
    try:
        data_dir = memstrat_inputs.resolve_data_dir(a.data)
        if a.dry_run:
            print("\n".join(f"{i:4d}. {s.tag}" for i, s in enumerate(todo, 1)))
            return EXIT_OK
        if todo:
            pr.check_memstrat(a.memstrat, plan.strategies)
            pr.check_torch(a.python, "cuda")
    except memstrat_inputs.UsageError as e:
        return usage(str(e))
    out_md.parent.mkdir(parents=True, exist_ok=True)
    # the runs still to do, their plan record first; then the table of the whole file
    return pr.execute_plan(a, PROG, argv, data_dir, out_dir, out_jsonl, out_md, todo, est,
                           plan.notes(), lambda runner, s: run_spec(runner, plan, s), report)


if __name__ == "__main__":
    sys.exit(main())
