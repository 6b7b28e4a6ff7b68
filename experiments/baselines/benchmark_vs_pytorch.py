#!/usr/bin/env python3
"""Time memstrat against the PyTorch eager baseline on one GPU, and check their loss curves.

    python3 experiments/baselines/benchmark_vs_pytorch.py --reproduce    # the results set's preset
    python3 experiments/baselines/benchmark_vs_pytorch.py                # the full default run
    python3 experiments/baselines/benchmark_vs_pytorch.py --quick        # a few configurations
    python3 experiments/baselines/benchmark_vs_pytorch.py --dry-run      # plan, estimate, order
    python3 experiments/baselines/benchmark_vs_pytorch.py --reproduce --resume  # what is missing
    python3 experiments/baselines/benchmark_vs_pytorch.py --from-records results/vs_pytorch/records.jsonl

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
Every configuration runs as --repeats (default 3) separate processes on each side: N
`memstrat train` processes and N python processes of pytorch_mlp.py (each imports torch and
initialises CUDA: part of what independent processes cost), all runs of all configurations in
one seeded shuffled order (--shuffle-seed, default 1; the matrix runner's order: every
configuration's first process in a random order, then every second one, ...). A process's
value is the median wall ms of its epochs 2..N (epoch 1 is warm-up on both sides); a
configuration's is the median over its processes with its order-statistic interval
(docs/methodology.md, "Statistics over processes"). Speed-up = PyTorch / memstrat as the
Hodges-Lehmann ratio with its Moses interval; the last column says whether a Mann-Whitney test,
Holm-corrected over the table's pairs, separates the two sides (else neither is called
faster). memstrat runs with
--no-profile unless --profile (the baseline has no profiler either).

--reproduce is the results set's preset (experiments/scripts/reproduce.sh): batches
64,256,1024, hidden 256, transfers f32,u8, 21 epochs (20 steady), 10 processes per
configuration on each side (a published row's minimum: docs/methodology.md, "Statistics over
processes"), the curve check at hidden 256 and batch 256: 240 memstrat + 90 PyTorch processes
and the curve check's 2, estimated at 19 min on an H200. The estimate is printed before
anything runs (also with --dry-run).

Part 2, loss curves. `memstrat train --strategy resident --transfer f32 --epochs 1
--batch 256 --gemm cublas` (no TF32) exports its initial weights and sample order
(--export-init) and writes its per-batch losses; the baseline loads them (--init) and
writes its own. The check reports the largest absolute and relative difference over the
epoch, over its first --early-batches batches, and at the first and the last batch, and
fails (exit 1) when the first batch differs by more than --first-batch-rtol (1e-5 relative:
it depends only on the forward pass from identical weights), any of the first 20 batches
by more than --early-atol (1e-4), or any batch by more than --curve-atol (5e-3); the
report explains these numbers (measured rounding drift vs. semantic differences). One
process on each side (a comparison of two curves), after the speed runs.

Output: a progress line per run with its elapsed time, then the report (speed table, curve
check), printed and written as Markdown to --out-md; every run record (memstrat's and the
baseline's, schema 1), a plan record (the command, the seed, the run order) and the curve
check's result record are appended to --out-jsonl. --from-records FILE... rebuilds the same
report from such a file, running nothing. Defaults go under results/vs_pytorch/.

--resume: a plan stopped half-way (Ctrl-C, a time limit) or split over sittings continues where
it was: the same options run only the processes that have no ok record in --out-jsonl yet, in
the plan's seeded order (the same as without --resume), then the curve checks that have no ok
record; a process interrupted leaves no record, so it runs again. The report covers every record
of the file. A file that holds runs is refused without --resume (a second plan would mix into
it), and with it when its records are of another plan (another benchmark, shuffle seed or
repeats, a run tag this plan does not have, a curve check at another batch or tolerance).

Exit codes: 0 all runs ok and curves agree; 1 the curve check failed; 2 bad option, missing
memstrat/torch/data or a records file of another plan (before any run); 3 some runs failed (the
report lists which).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
BASELINE = REPO_ROOT / "experiments" / "baselines" / "pytorch_mlp.py"
sys.path.insert(0, str(BASELINE.parent))
import memstrat_inputs  # noqa: E402  (the data-dir search, usage errors)
import process_runs as pr  # noqa: E402  (processes, order, plan record)
from comparison import (CURVE_KIND, CURVE_TAG, PAIRINGS, Tolerance,  # noqa: E402
                        build_rows, compare_curves, curve_markdown, curve_record,
                        curve_sections, read_curve, speed_markdown, speed_verdict)

EXIT_OK, EXIT_CURVE, EXIT_USAGE, EXIT_RUNS_FAILED = 0, 1, 2, 3
PROG = "benchmark_vs_pytorch.py"
TAG = "vs-pytorch"
# For the time estimate only, on an H200, 784-256-10: PyTorch eager ms per epoch (64/256/1024
# measured with this benchmark, 8 extrapolated); memstrat ms per epoch, the mean of its
# four strategies with f32 (docs/results/nvidia-h200); seconds per process besides its epochs
# (a torch import + CUDA init; memstrat's start, data load and set-up).
PYTORCH_MS = {8: 6000.0, 64: 660.0, 256: 190.0, 1024: 70.0}
MEMSTRAT_MS = {8: 182.0, 64: 28.0, 256: 15.0, 1024: 12.0}
PROCESS_S = {"memstrat": 0.8, "pytorch": 3.0}
REPRODUCE_TARGET_S = 1200.0
REPRODUCE_WHY = "--reproduce: so that the preset fits about 20 minutes on an H200"
REPRODUCE = {"batches": [64, 256, 1024], "hiddens": [256], "transfers": ["f32", "u8"],
             "epochs": 21, "repeats": 10, "curve_hiddens": [256], "curve_batch": 256,
             "leave_out": []}


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


def leave_out_item(s: str) -> tuple[str, str]:
    strategies = [m for m, _ in PAIRINGS]
    parts = s.split(":")
    if len(parts) != 2 or parts[0] not in strategies or parts[1] not in ("f32", "u8"):
        raise argparse.ArgumentTypeError(f"{s!r}: expected STRATEGY:TRANSFER, e.g. pageable:u8 "
                                         f"(strategies {', '.join(strategies)})")
    return parts[0], parts[1]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_process_options(p, "python of the PyTorch processes (default: this one)")
    p.add_argument("--reproduce", action="store_true",
                   help="the results set's preset (see above); takes no option that changes "
                        "the plan")
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
    p.add_argument("--leave-out", type=leave_out_item, action="append", default=[],
                   metavar="S:T", help="leave out memstrat strategy S with transfer T "
                   "(repeatable), e.g. --leave-out pageable:u8")
    p.add_argument("--quick", action="store_true",
                   help="batches 64,1024, hidden 256, 3 epochs, f32 only, curve check at "
                        "hidden 256 only")
    p.add_argument("--graphs", choices=("on", "off"), default="on",
                   help="memstrat --graphs (default %(default)s)")
    p.add_argument("--profile", action="store_true",
                   help="keep memstrat's CUPTI counters on (default: --no-profile)")
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
                   help="where records, curves and the report go (default %(default)s)")
    p.add_argument("--out-md", help="Markdown report (default OUT_DIR/benchmark.md)")
    p.add_argument("--out-jsonl",
                   help="records, appended (default OUT_DIR/records.jsonl); a file that holds "
                        "runs already is refused unless --resume continues its plan")
    p.add_argument("--resume", action="store_true",
                   help="run only the processes and curve checks of the plan that have no ok "
                        "record in --out-jsonl yet (same options, same order); the report then "
                        "covers the whole file")
    p.add_argument("--pytorch-device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: the baseline runs on the CPU (self-test of this script only)")
    return p


# options --reproduce fixes: giving one of them with it is a usage error
PRESET_OPTIONS = ("batches", "hiddens", "transfers", "epochs", "repeats", "skip", "leave_out",
                  "quick", "curve_hiddens", "curve_batch", "no_speed", "no_curve_check",
                  "small_batch", "small_batch_epochs")


# ---------------------------------------------------------------------------------------------
# the plan

@dataclass
class Plan:
    configs: list[tuple[int, int, int]]          # (batch, hidden, epochs)
    transfers: list[str]
    curve_hiddens: list[int]
    leave_out: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[int, int]] = field(default_factory=list)
    why: str = ""                                 # why runs were left out, for the notes

    def memstrat_runs(self) -> list[tuple[str, str, int, int, int]]:
        return [(s, t, b, h, e) for b, h, e in self.configs
                for s in dict.fromkeys(m for m, _ in PAIRINGS) for t in self.transfers
                if (s, t) not in self.leave_out]

    def pytorch_runs(self) -> list[tuple[str, int, int, int]]:
        return [(m, b, h, e) for b, h, e in self.configs
                for m in dict.fromkeys(p for _, p in PAIRINGS)]

    def specs(self, repeats: int) -> list[pr.RunSpec]:
        out = []
        for s, t, b, h, e in self.memstrat_runs():
            out += pr.repeated(TAG, "memstrat", (s, t, b, h, e), f"{s}-{t}-b{b}-h{h}-e{e}",
                               f"memstrat {s} {t} b={b} h={h} e={e}", repeats)
        for m, b, h, e in self.pytorch_runs():
            out += pr.repeated(TAG, "pytorch", (m, b, h, e), f"pytorch-{m}-b{b}-h{h}-e{e}",
                               f"pytorch  {m} f32 b={b} h={h} e={e}", repeats)
        return out

    def notes(self) -> list[str]:
        why = f" ({self.why})" if self.why else ""
        out = [f"left out (--leave-out): memstrat {s} with {t}{why}" for s, t in self.leave_out]
        return out + [f"left out (--skip): batch {b} hidden {h}" for b, h in self.skipped]


def make_plan(a: argparse.Namespace) -> Plan:
    batches, hiddens, transfers, epochs = a.batches, a.hiddens, a.transfers, a.epochs
    curve_hiddens = a.curve_hiddens if a.curve_hiddens is not None else [256, 1024]
    if a.quick:
        batches, hiddens, transfers, epochs = [64, 1024], [256], ["f32"], 3
        if a.curve_hiddens is None:
            curve_hiddens = [256]
    if epochs < 2 or a.small_batch_epochs < 2:
        raise ValueError("--epochs and --small-batch-epochs must be >= 2 (epoch 1 is warm-up)")
    if a.curve_batch < 1:
        raise ValueError("--curve-batch must be >= 1")
    configs, skipped = [], []
    for b in batches:
        for h in hiddens:
            if (b, h) in a.skip:
                skipped.append((b, h))
                continue
            configs.append((b, h, a.small_batch_epochs if b <= a.small_batch else epochs))
    return Plan([] if a.no_speed else configs, transfers,
                [] if a.no_curve_check else curve_hiddens, list(a.leave_out), skipped,
                REPRODUCE_WHY if a.reproduce else "")


def _epoch_s(table: dict[int, float], batch: int, hidden: int) -> float:
    """Seconds per epoch from the nearest batch of `table` (an epoch's steps scale as 1/batch);
    wider hidden layers cost more once the batch is large enough to fill the GPU."""
    near = min(table, key=lambda b: abs(b - batch))
    scale = 1.0 if batch <= 64 else max(1.0, hidden / 256 * 0.6)
    return table[near] * near / batch * scale / 1000.0


def estimate_seconds(plan: Plan, repeats: int) -> float:
    """The plan's time on an H200 (PYTORCH_MS, MEMSTRAT_MS, PROCESS_S): every process's start
    plus its epochs, the two checks before the first run, and the curve check."""
    total = PROCESS_S["pytorch"] + PROCESS_S["memstrat"]  # the checks before the first run
    for _, _, b, h, e in plan.memstrat_runs():
        total += repeats * (PROCESS_S["memstrat"] + e * _epoch_s(MEMSTRAT_MS, b, h))
    for _, b, h, e in plan.pytorch_runs():
        total += repeats * (PROCESS_S["pytorch"] + e * _epoch_s(PYTORCH_MS, b, h))
    for h in plan.curve_hiddens:
        total += PROCESS_S["memstrat"] + PROCESS_S["pytorch"] + _epoch_s(PYTORCH_MS, 256, h)
    return total


# ---------------------------------------------------------------------------------------------
# runs

def memstrat_args(a: argparse.Namespace, strategy: str, transfer: str, batch: int,
                  hidden: int, epochs: int) -> list[str]:
    return ["--strategy", strategy, "--transfer", transfer, "--batch", str(batch), "--hidden",
            str(hidden), "--epochs", str(epochs), "--graphs", a.graphs] + \
        ([] if a.profile else ["--no-profile"])


def run_spec(runner: pr.Runner, a: argparse.Namespace, s: pr.RunSpec) -> pr.RunResult:
    if s.side == "memstrat":
        return runner.memstrat(s.tag, s.label, memstrat_args(a, *s.config))
    mode, b, h, e = s.config
    return runner.script(BASELINE, s.tag, s.label,
                         ["--mode", mode, "--transfer", "f32", "--batch", str(b), "--hidden",
                          str(h), "--epochs", str(e), "--device", a.pytorch_device])


def curve_tag(side: str, hidden: int) -> str:
    """The run tag of the curve check's process on `side` (memstrat or pytorch)."""
    return f"{CURVE_TAG}{side}-h{hidden}"


def run_curve_check(runner: pr.Runner, a: argparse.Namespace, hidden: int, curves_dir: Path,
                    tol: Tolerance) -> dict:
    """One memstrat and one PyTorch process from the same initial weights; the check's record."""
    batch = a.curve_batch
    d = curves_dir / f"h{hidden}_b{batch}"
    d.mkdir(parents=True, exist_ok=True)
    init, a_csv, b_csv = d / "init", d / "memstrat.csv", d / "pytorch.csv"
    for f in (a_csv, b_csv):
        f.unlink(missing_ok=True)
    m = runner.memstrat(curve_tag("memstrat", hidden), f"curve memstrat b={batch} h={hidden}",
                        [*memstrat_args(a, "resident", "f32", batch, hidden, 1), "--gemm",
                         "cublas", "--export-init", str(init), "--loss-curve", str(a_csv)])
    if not m.ok:
        return curve_record(hidden, batch, None, "memstrat: " + m.error, "", tol)
    p = runner.script(BASELINE, curve_tag("pytorch", hidden),
                      f"curve pytorch  b={batch} h={hidden}",
                      ["--mode", "resident", "--epochs", "1", "--init", str(init), "--device",
                       a.pytorch_device, "--loss-curve", str(b_csv)])
    if not p.ok:
        return curve_record(hidden, batch, None, "pytorch: " + p.error, "", tol)
    try:
        c = compare_curves(read_curve(a_csv), read_curve(b_csv), tol.early)
    except (OSError, ValueError) as e:
        return curve_record(hidden, batch, None, str(e), "", tol)
    acc = f"{100 * m.record['final']['test_acc']:.2f}% / {100 * p.record['final']['test_acc']:.2f}%"
    return curve_record(hidden, batch, c, "", acc, tol)


# ---------------------------------------------------------------------------------------------
# --resume: what the records file already holds

def foreign_records(records: Sequence[dict], a: argparse.Namespace, plan: Plan,
                    order: Sequence[pr.RunSpec], tol: Tolerance) -> str | None:
    """process_runs.other_plan() for this benchmark's plan: its speed runs, its curve checks'
    runs, and loss-curve-check records at its curve batch, hidden sizes and tolerance."""
    expected: dict[str, dict] = {s.tag: {} for s in order}
    for h in plan.curve_hiddens:
        expected.update({curve_tag(side, h): {"batch": a.curve_batch}
                         for side in ("memstrat", "pytorch")})
    why = pr.other_plan(records, PROG, a.shuffle_seed, a.repeats, expected)
    if why:
        return why
    mine = (a.curve_batch, dataclasses.asdict(tol))
    for r in records:
        if r.get("record") == CURVE_KIND and ((r.get("batch"), r.get("tolerance")) != mine or
                                              r.get("hidden") not in plan.curve_hiddens):
            return (f"a loss-curve check at hidden {r.get('hidden')}, batch {r.get('batch')}, "
                    f"tolerance {r.get('tolerance')}")
    return None


def curves_to_run(records: Sequence[dict], plan: Plan) -> list[int]:
    """The plan's curve-check hidden sizes that have no ok loss-curve-check record."""
    done = {r.get("hidden") for r in records
            if r.get("record") == CURVE_KIND and r.get("status") == "ok"}
    return [h for h in plan.curve_hiddens if h not in done]


def resume_point(a: argparse.Namespace, plan: Plan, order: Sequence[pr.RunSpec],
                 out_jsonl: Path, tol: Tolerance) -> tuple[list[pr.RunSpec], list[int]] | None:
    """(the runs still to do, in the plan's order; the curve checks still to do), as
    pr.resumable() has it; None (the reason on stderr) when the records file cannot take this
    plan."""
    records: list[dict] = []
    if a.resume and out_jsonl.is_file():
        try:
            records = pr.read_records([out_jsonl])
        except (OSError, ValueError) as e:
            usage(str(e))
            return None
        why = foreign_records(records, a, plan, order, tol)
        if why:
            usage(f"{out_jsonl} holds records of another plan ({why}): --resume continues only "
                  "the plan that wrote the file; give the options it ran with, or another "
                  "--out-jsonl")
            return None
    todo = pr.resumable(PROG, order, out_jsonl, a.resume)
    if todo is None:
        return None
    curves = curves_to_run(records, plan)
    if len(curves) < len(plan.curve_hiddens):
        done = [h for h in plan.curve_hiddens if h not in curves]
        print(f"resuming: the curve check at hidden {done} already has an ok record", flush=True)
    return todo, curves


# ---------------------------------------------------------------------------------------------
# the report, from records alone

def _memstrat_settings(records: Sequence[dict]) -> str:
    cfgs = [r["config"] for r in pr.run_records(records)
            if r["config"].get("framework") in (None, "memstrat")]
    graphs = sorted({"on" if c.get("graphs") else "off" for c in cfgs})
    profile = sorted({"CUPTI on" if c.get("profile") else "`--no-profile`" for c in cfgs})
    return f"memstrat `--graphs {'/'.join(graphs)}`, {', '.join(profile)}"


def latest_curve_checks(records: Sequence[dict]) -> list[dict]:
    """The records less each loss-curve check that a later one of the same hidden size, batch
    and tolerance replaces (one that failed, run again by --resume)."""
    def key(r: dict) -> str:
        return json.dumps([r.get("hidden"), r.get("batch"), r.get("tolerance")], sort_keys=True)
    last = {key(r): i for i, r in enumerate(records) if r.get("record") == CURVE_KIND}
    return [r for i, r in enumerate(records)
            if r.get("record") != CURVE_KIND or last[key(r)] == i]


def report(records: Sequence[dict]) -> tuple[str, bool, bool]:
    """(Markdown, memstrat faster in every row with f32, curves agree) from the records."""
    md = ["# memstrat vs PyTorch eager", "", pr.provenance_line(records), ""]
    md += [f"- {ln}" for ln in pr.environment_lines(records)] + [""]
    rows = build_rows(records)
    rows_ok = True
    if rows:
        verdict, rows_ok = speed_verdict(rows)
        md += ["## Speed: ms per epoch, speed-up = PyTorch / memstrat", "",
               "Per process the median wall ms of its epochs 2..N (epoch 1 is warm-up); per "
               "configuration the median over its processes with its order-statistic interval "
               "(n = processes; its coverage printed where below 95%; no interval with fewer "
               "than 3); the speed-up is the Hodges-Lehmann ratio with its Moses interval "
               "(docs/methodology.md, \"Statistics over processes\"). Where a Mann-Whitney "
               "test, Holm-corrected over the table's pairs, does not separate the two, "
               "neither side is called faster. "
               f"{_memstrat_settings(records)}, static scenario; PyTorch: its own process per "
               "run, the data set held in epoch order as float32 (f32), per-batch slices, "
               "labels int64.", "", speed_markdown(rows), ""]
        md += [f"- {v}" for v in verdict]
        md += [f"- {n}" for p in pr.plans(records) for n in p.get("notes", [])] + [""]
    curves_ok = True
    for batch, tol, results in curve_sections(latest_curve_checks(records)):
        text, ok = curve_markdown(results, tol, batch)
        curves_ok &= ok
        md += ["## Loss curves: memstrat vs PyTorch from the same initial weights", "", text, ""]
    missing = pr.missing_runs(records)
    if missing:
        md += ["## Runs without an ok record", ""] + [f"- {m}" for m in missing] + [""]
    md += pr.order_lines(records)
    return "\n".join(md).rstrip() + "\n", rows_ok, curves_ok


def write_report(records: Sequence[dict], out_md: Path) -> tuple[bool, bool]:
    text, rows_ok, curves_ok = report(records)
    print("\n" + text, flush=True)
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(text)
    return rows_ok, curves_ok


# ---------------------------------------------------------------------------------------------

def usage(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    a = parser.parse_args(argv)
    out_dir = Path(a.out_dir)
    out_md = Path(a.out_md) if a.out_md else out_dir / "benchmark.md"
    out_jsonl = Path(a.out_jsonl) if a.out_jsonl else out_dir / "records.jsonl"
    if a.from_records:
        try:
            write_report(pr.load_records(a.from_records), out_md)
        except (OSError, ValueError) as e:
            return usage(str(e))
        print(f"wrote {out_md}")
        return EXIT_OK
    try:
        if a.reproduce:
            pr.apply_preset(a, parser, REPRODUCE, PRESET_OPTIONS, argv)
        plan = make_plan(a)
        order = pr.shuffled(plan.specs(a.repeats), a.shuffle_seed)
    except ValueError as e:
        return usage(str(e))
    tol = Tolerance(a.first_batch_rtol, a.early_atol, a.early_batches, a.curve_atol)
    left = resume_point(a, plan, order, out_jsonl, tol)
    if left is None:
        return EXIT_USAGE
    todo, curves = left
    est = estimate_seconds(plan, a.repeats)
    runs, processes = len(todo) + 2 * len(curves), len(order) + 2 * len(plan.curve_hiddens)
    fresh = runs == processes         # nothing of this plan in the records file yet
    if not fresh:                     # the estimate of what is left (processes > runs >= 0)
        est *= runs / processes
    n_mem = sum(s.side == "memstrat" for s in order)
    print(f"plan: estimated {est / 60:.1f} min ({est:.0f} s) on an H200; {len(plan.configs)} "
          f"configurations (batch, hidden, epochs) {plan.configs}; memstrat transfers "
          f"{plan.transfers}; "
          f"{a.repeats} processes per configuration on each side: {n_mem} memstrat + "
          f"{len(order) - n_mem} PyTorch processes in one shuffled order (seed "
          f"{a.shuffle_seed}); curve check hidden {plan.curve_hiddens} at batch "
          f"{a.curve_batch} (+{2 * len(plan.curve_hiddens)} processes)"
          + ("" if fresh else f"; still to run: {len(todo)} processes, curve check hidden "
             f"{curves}")
          + "".join(f"; {n}" for n in plan.notes()), flush=True)
    try:
        data_dir = memstrat_inputs.resolve_data_dir(a.data)
        if a.dry_run:
            print("\n".join(f"{i:4d}. {s.tag}" for i, s in enumerate(todo, 1)))
            print(f"data: {data_dir}; would write {out_md} and {out_jsonl}")
            return EXIT_OK
        if runs:
            pr.check_memstrat(a.memstrat, [m for m, _ in PAIRINGS])
            pr.check_torch(a.python, a.pytorch_device)
    except memstrat_inputs.UsageError as e:
        return usage(str(e))

    failed = []
    if runs or fresh:
        # the plan record lists the runs of this sitting (all of the plan's unless resumed); a
        # sitting left with curve checks only writes none
        runner = pr.start_plan(a, PROG, argv, data_dir, out_dir, out_jsonl, todo, est,
                               plan.notes(), extra_runs=2 * len(curves)) if todo or fresh \
            else pr.Runner(a, data_dir, out_jsonl, out_dir, runs)
        failed = [r for r in (run_spec(runner, a, s) for s in todo) if not r.ok]
        for h in curves:
            runner.append(run_curve_check(runner, a, h, out_dir / "curves", tol))
        runner.close()

    rows_ok, curves_ok = write_report(pr.read_records([out_jsonl]), out_md)
    print(f"\nwrote {out_md} and {out_jsonl}; curves under {out_dir / 'curves'}")
    for r in failed:
        print(f"failed: {r.label}: {r.error}", file=sys.stderr)
    if not curves_ok:
        print(f"{PROG}: the loss curves differ beyond the tolerance (or the check failed)",
              file=sys.stderr)
        return EXIT_CURVE
    if failed:
        return EXIT_RUNS_FAILED
    if not rows_ok:
        print("note: memstrat was not faster, by the Holm-corrected test, in every f32 "
              "configuration "
              "(see the table)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
