#!/usr/bin/env python3
"""memstrat's stream scenario against PyTorch's DataLoader, on one GPU, with the same
augmentation, batch, data and sample order.

    python3 experiments/baselines/benchmark_stream.py                 # the full default run
    python3 experiments/baselines/benchmark_stream.py --quick         # 1 and 4 workers, light
    python3 experiments/baselines/benchmark_stream.py --dry-run       # the plan, nothing run
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
each in its own process, with batch --batch (256), u8 transfer (both normalise on the GPU),
--epochs (5) epochs. Both sides keep 2 batches per worker ahead (memstrat's --prefetch = 2W
slots).

The table: per augmentation and worker count, memstrat's fastest strategy against the
DataLoader's fastest setting, by the median wall ms of epochs 2..N (epoch 1 is warm-up on both
sides), their starvation (the share of an epoch the training loop waited for a batch, the
first batch's wait left out: docs/methodology.md), and the ratio DataLoader / memstrat. The
ratio includes the training step itself, which is faster in memstrat than in PyTorch eager
(docs/results/vs_pytorch.md); the starvation columns compare the input pipelines alone. With
--repeats N every configuration runs N times and the median of the N medians is compared.

Output: a progress line per run; the table printed and written as Markdown to --out-md
(default OUT_DIR/benchmark_stream.md); every record (memstrat's and the DataLoader's, schema
1) appended to --out-jsonl (default OUT_DIR/records.jsonl), from which --from-records rebuilds
the table without running anything.

Exit codes: 0 every run ok; 2 bad option or missing memstrat/torch/data; 3 some runs failed or
were waived (the table says which; strategies waived on this GPU are left out of "best").
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
DATALOADER = REPO_ROOT / "experiments" / "baselines" / "pytorch_dataloader.py"
sys.path.insert(0, str(DATALOADER.parent))
sys.path.insert(0, str(REPO_ROOT))
import memstrat_inputs  # noqa: E402  (the data-dir search)
from analysis.stream import process_starvation  # noqa: E402  (the one definition)
from benchmark_vs_pytorch import Runner, add_runner_options  # noqa: E402
from comparison import RunResult  # noqa: E402

EXIT_OK, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 2, 3
# Every strategy that runs host-produced batches (resident serves the stream scenario only
# with --augment none, by a GPU gather).
STRATEGIES = ("pageable", "pinned", "double-buffer", "zero-copy", "zero-copy-staged", "um",
              "um-prefetch", "um-advise", "um-prefetch-coarse")
AUGMENTS = ("none", "light", "heavy")
PREFETCH_PER_WORKER = 2  # the DataLoader's default prefetch_factor
DATALOADER_NAME = "pytorch-dataloader"


def name_list(choices: Sequence[str]):
    def parse(s: str) -> list[str]:
        v = [p.strip() for p in s.split(",") if p.strip()]
        bad = [x for x in v if x not in choices]
        if not v or bad:
            raise argparse.ArgumentTypeError(f"{s!r}: expected a comma-separated subset of "
                                             f"{', '.join(choices)}")
        return list(dict.fromkeys(v))
    return parse


def worker_list(s: str) -> list[int]:
    try:
        v = [int(p) for p in s.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected integers >= 0") from None
    if not v or any(x < 0 or x > 256 for x in v):
        raise argparse.ArgumentTypeError(f"{s!r}: expected worker counts in 0..256")
    return sorted(set(v))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchmark_stream.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_runner_options(p, "python for the DataLoader runs (default: this one)")
    p.add_argument("--strategies", type=name_list(STRATEGIES), default=list(STRATEGIES),
                   help="memstrat strategies (default: all that run host-produced batches)")
    p.add_argument("--workers", type=worker_list, default=[0, 1, 2, 4, 8],
                   help="worker counts (default 0,1,2,4,8; 0 runs the DataLoader only)")
    p.add_argument("--augments", type=name_list(AUGMENTS), default=["light", "heavy"],
                   help="augmentations (default light,heavy)")
    p.add_argument("--pin-memory", type=name_list(("on", "off")), default=["on", "off"],
                   help="DataLoader pin_memory settings (default on,off)")
    p.add_argument("--fetch", type=name_list(("batch", "sample")), default=["batch"],
                   help="DataLoader fetch forms (default batch; batch,sample adds the "
                        "per-sample form)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default %(default)s)")
    p.add_argument("--epochs", type=int, default=5,
                   help="epochs per run (default %(default)s; median over epochs 2..N)")
    p.add_argument("--repeats", type=int, default=1,
                   help="processes per configuration (default %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="workers 1,4, light only, pinned and double-buffer, pin_memory on, "
                        "3 epochs")
    p.add_argument("--out-dir", default=str(REPO_ROOT / "results" / "vs_dataloader"),
                   help="where records and the table go (default %(default)s)")
    p.add_argument("--out-md", help="Markdown table (default OUT_DIR/benchmark_stream.md)")
    p.add_argument("--out-jsonl", help="run records, appended (default OUT_DIR/records.jsonl)")
    p.add_argument("--from-records", nargs="+", metavar="JSONL",
                   help="build the table from these records; run nothing")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    return p


# ---------------------------------------------------------------------------------------------
# the table: from records alone, so that a results set can be tabled again

@dataclass
class Entry:
    """One configuration's result: the median over its processes."""
    side: str          # "memstrat" | "dataloader"
    augment: str
    workers: int
    setting: str       # the strategy, or the DataLoader's settings
    ms: float          # median wall ms of epochs 2..N (median over processes)
    starvation: float | None
    processes: int


def _setting(rec: dict) -> tuple[str, str]:
    c = rec["config"]
    if c["strategy"] == DATALOADER_NAME:
        pin = "on" if c.get("pin_memory") else "off"
        return "dataloader", f"pin_memory {pin}, fetch {c.get('fetch')}"
    return "memstrat", c["strategy"]


def entries(records: Iterable[dict]) -> list[Entry]:
    """Ok stream records (memstrat's and the DataLoader's) -> one Entry per configuration."""
    runs: dict[tuple, list[dict]] = {}
    for r in records:
        c = r.get("config") or {}
        if r.get("status") != "ok" or c.get("scenario") != "stream" or not r.get("summary"):
            continue
        side, setting = _setting(r)
        runs.setdefault((side, c["augment"], int(c["workers"]), setting), []).append(r)
    out = []
    for (side, aug, w, setting), recs in runs.items():
        starv = [v for v in map(process_starvation, recs) if v is not None]
        out.append(Entry(side, aug, w, setting,
                         statistics.median(r["summary"]["wall_ms_median"] for r in recs),
                         statistics.median(starv) if starv else None, len(recs)))
    return out


def best(items: Iterable[Entry]) -> Entry | None:
    return min(items, key=lambda e: e.ms, default=None)


def _fmt_pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def ratio_markdown(all_entries: Sequence[Entry]) -> str:
    """Per augmentation: one row per worker count, memstrat's best against the DataLoader's."""
    lines = []
    for aug in [a for a in AUGMENTS if any(e.augment == a for e in all_entries)]:
        mine = [e for e in all_entries if e.augment == aug]
        lines += [f"### --augment {aug}", "",
                  "| workers | memstrat best | ms/epoch | starvation | DataLoader best | "
                  "ms/epoch | starvation | DataLoader / memstrat |",
                  "|---:|---|---:|---:|---|---:|---:|---:|"]
        for w in sorted({e.workers for e in mine}):
            m = best(e for e in mine if e.side == "memstrat" and e.workers == w)
            d = best(e for e in mine if e.side == "dataloader" and e.workers == w)
            ratio = f"{d.ms / m.ms:.2f}x" if m and d else "-"
            lines.append(
                f"| {w} | {m.setting if m else '-'} | {f'{m.ms:.2f}' if m else '-'} | "
                f"{_fmt_pct(m.starvation) if m else '-'} | {d.setting if d else '-'} | "
                f"{f'{d.ms:.2f}' if d else '-'} | {_fmt_pct(d.starvation) if d else '-'} | "
                f"{ratio} |")
        m = best(e for e in mine if e.side == "memstrat")
        d = best(e for e in mine if e.side == "dataloader")
        if m and d:
            lines += ["", f"Best of each side with --augment {aug}: memstrat {m.setting} with "
                          f"{m.workers} workers, {m.ms:.2f} ms/epoch; DataLoader "
                          f"{d.setting} with {d.workers} workers, {d.ms:.2f} ms/epoch: "
                          f"DataLoader / memstrat = {d.ms / m.ms:.2f}x."]
        lines.append("")
    return "\n".join(lines).rstrip()


def read_records(paths: Iterable[str | Path]) -> list[dict]:
    out = []
    for p in paths:
        for line in Path(p).read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


# ---------------------------------------------------------------------------------------------
# runs

class StreamRunner(Runner):
    """benchmark_vs_pytorch's Runner (memstrat runs, records, progress) plus DataLoader runs."""

    def stream(self, strategy: str, augment: str, workers: int) -> RunResult:
        a = self.a
        tag = f"vs-dataloader-{strategy}-{augment}-w{workers}"
        return self.memstrat(strategy, "u8", a.batch, 256, a.epochs, tag,
                             ["--scenario", "stream", "--augment", augment,
                              "--workers", str(workers),
                              "--prefetch", str(PREFETCH_PER_WORKER * workers)])

    def dataloader(self, augment: str, workers: int, pin: str, fetch: str) -> RunResult:
        a = self.a
        setting = f"pin_memory {pin}, fetch {fetch}"
        r = RunResult(DATALOADER_NAME, setting, "u8", a.batch, 256, a.epochs)
        tag = f"vs-dataloader-torch-{augment}-w{workers}-pin{pin}-{fetch}"
        tmp = self.work / f"{tag}.jsonl"
        tmp.unlink(missing_ok=True)
        cmd = [a.python, str(DATALOADER), "--augment", augment, "--workers", str(workers),
               "--pin-memory", pin, "--fetch", fetch, "--transfer", "u8",
               "--batch", str(a.batch), "--epochs", str(a.epochs), "--data", str(self.data_dir),
               "--quiet", "--run-tag", tag, "--json", str(tmp), *self._samples()]
        if workers > 0:
            cmd += ["--persistent-workers", "on", "--prefetch-factor", str(PREFETCH_PER_WORKER)]
        return self.run_command(r, cmd, tmp, f"DataLoader {augment} w={workers} {setting}")


@dataclass
class Plan:
    strategies: list[str]
    workers: list[int]
    augments: list[str]
    pins: list[str]
    fetches: list[str]

    def counts(self, repeats: int) -> tuple[int, int]:
        mem = len(self.strategies) * len([w for w in self.workers if w > 0]) * len(self.augments)
        dl = len(self.workers) * len(self.augments) * len(self.pins) * len(self.fetches)
        return mem * repeats, dl * repeats


def make_plan(a: argparse.Namespace) -> Plan:
    if a.quick:
        a.epochs = 3
        return Plan(["pinned", "double-buffer"], [1, 4], ["light"], ["on"], ["batch"])
    if a.epochs < 2:
        raise ValueError("--epochs must be >= 2 (epoch 1 is warm-up)")
    if a.repeats < 1 or a.batch < 1:
        raise ValueError("--repeats and --batch must be >= 1")
    return Plan(a.strategies, a.workers, a.augments, a.pin_memory, a.fetch)


def preflight(a: argparse.Namespace) -> Path:
    """Everything that can fail before the first run; returns the data directory."""
    data_dir = memstrat_inputs.resolve_data_dir(a.data)
    exe = Path(a.memstrat)
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise memstrat_inputs.UsageError(f"--memstrat {a.memstrat}: not an executable file; "
                                         "build it first or pass --memstrat PATH")
    check = subprocess.run([a.python, "-c", "import torch,sys; sys.exit(0 if "
                            "torch.cuda.is_available() else 3)"], capture_output=True,
                           text=True, check=False)
    if check.returncode != 0:
        raise memstrat_inputs.UsageError(f"{a.python}: torch with CUDA is not available "
                                         f"({check.stderr.strip()[-200:]})")
    return data_dir


def write_report(a: argparse.Namespace, records: list[dict], failed: list[RunResult],
                 out_md: Path, argv: Sequence[str]) -> str:
    env = next((r["env"] for r in records if r.get("env") and r["config"]["strategy"]
                != DATALOADER_NAME), None) or {}
    md = [f"# memstrat stream scenario vs PyTorch DataLoader ({time.strftime('%Y-%m-%d %H:%M %Z')})",
          "", f"- GPU: {env.get('gpu_name', 'n/a')} (driver {env.get('driver_release') or env.get('driver_version', 'n/a')}), "
          f"host {env.get('host', 'n/a')}, memstrat {env.get('git_sha', 'n/a')}",
          "- command: `" + shlex.join(["python3", "experiments/baselines/benchmark_stream.py",
                                        *argv]) + "`",
          "- ms/epoch: median wall ms of epochs 2..N; starvation: the share of an epoch the "
          "loop waited for a batch, the first batch's wait left out (docs/methodology.md). "
          "The ratio includes the training step, which memstrat runs faster than PyTorch "
          "eager; the starvation columns compare the input pipelines alone.", "",
          ratio_markdown(entries(records))]
    if failed:
        md += ["", "## Failed or waived runs", ""] + [f"- {r.kind} {r.strategy}: {r.error}"
                                                     for r in failed]
    text = "\n".join(md) + "\n"
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(text)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    out_dir = Path(a.out_dir)
    out_md = Path(a.out_md) if a.out_md else out_dir / "benchmark_stream.md"
    out_jsonl = Path(a.out_jsonl) if a.out_jsonl else out_dir / "records.jsonl"
    if a.from_records:
        try:
            records = read_records(a.from_records)
        except (OSError, ValueError) as e:
            print(f"benchmark_stream.py: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(write_report(a, records, [], out_md, argv))
        return EXIT_OK
    try:
        plan = make_plan(a)
    except ValueError as e:
        print(f"benchmark_stream.py: {e}", file=sys.stderr)
        return EXIT_USAGE
    n_mem, n_dl = plan.counts(a.repeats)
    print(f"plan: augments {plan.augments}, workers {plan.workers}, memstrat strategies "
          f"{plan.strategies}, DataLoader pin_memory {plan.pins} x fetch {plan.fetches}; "
          f"{n_mem} memstrat + {n_dl} DataLoader runs of {a.epochs} epochs, batch {a.batch}, "
          f"u8", flush=True)
    if a.dry_run:
        return EXIT_OK
    try:
        data_dir = preflight(a)
    except memstrat_inputs.UsageError as e:
        print(f"benchmark_stream.py: {e}", file=sys.stderr)
        return EXIT_USAGE
    out_dir.mkdir(parents=True, exist_ok=True)
    # Runner's options that this benchmark fixes: per-batch graphs on, no CUPTI.
    a.graphs, a.profile = "on", False
    work = Path(tempfile.mkdtemp(prefix="vs_dataloader_", dir=out_dir))
    runner = StreamRunner(a, data_dir, out_jsonl, work)
    runner.total = n_mem + n_dl
    results: list[RunResult] = []
    for _ in range(a.repeats):
        for aug in plan.augments:
            for w in plan.workers:
                if w > 0:
                    results += [runner.stream(s, aug, w) for s in plan.strategies]
                results += [runner.dataloader(aug, w, pin, fetch)
                            for pin in plan.pins for fetch in plan.fetches]
    failed = [r for r in results if not r.ok]
    print("\n" + write_report(a, [r.record for r in results if r.record], failed, out_md, argv))
    print(f"wrote {out_md} and {out_jsonl}")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    return EXIT_RUNS_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
