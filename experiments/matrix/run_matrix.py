#!/usr/bin/env python3
"""Run an experiment matrix of `memstrat train` runs and collect their records.

    experiments/matrix/run_matrix.py experiments/matrix/matrices/quick.toml --out results/quick

expands the matrix file into cells (one cell = one repeat of one configuration = one
`memstrat train` process), runs each cell once, and appends its JSON record to
``<out>/records.jsonl``; each cell's output goes to ``<out>/logs/<cell-key>.log``.

Order: by default the cells run in a seeded shuffled order (``--order shuffled``, seed
``--shuffle-seed``, default the matrix's seed): repeat 0 of every configuration in a random
order, then repeat 1 in another, and so on, so that slow drift of the machine (clocks,
temperature, other tenants) spreads over all configurations instead of landing on a few
adjacent cells of the cross product. ``--order sequential`` runs them as expanded. The order is
deterministic for a seed and written to ``<out>/manifest.json`` (matrix, order, seed, every
cell key in run order, and what each invocation ran).

Restarting the same command skips every cell that already has a record with
``"status": "ok"`` (identified by ``config.run_tag``, which the runner passes as
``--run-tag <cell-key>``); failed cells are retried, their failed records kept. A cell that
memstrat rejected (exit 2: a bad option or input; exit 3: no GPU, or the strategy waived on
it) is recorded once, as failed, and skipped by a rerun, which says so
(``--retry-rejected`` runs such cells again). The matrix is checked before any cell runs:
its axes and extra arguments against ``memstrat describe --json``, its name (letters, digits,
``.``, ``_``, ``-``), its size (at most 100,000 cells unless ``--allow-large``). A bad
matrix, binary or results folder is a one-line message and exit 2. Cells that ``memstrat
describe`` says cannot run (a launch form the strategy does not run in the scenario, a kernel
form with a step other than the single-launch one) are left out and counted as not runnable;
``--dry-run`` lists them by reason.

Crash safety: memstrat writes each cell's record into a private temporary file; the runner
appends the finished line(s) to records.jsonl with one write + fsync, cut back to the file's
former size when the write fails (a full disk), so no partial line is left. A last line left
torn anyway (a kill during a large write, a foreign writer) is moved to
``records.jsonl.torn`` by the next runner, which says so. Killing the runner at any moment,
kill -9 included, loses at most the cells in progress: each cell runs under
``cell_guard.py``, which stops the cell's whole process group when the runner ends.

One runner at a time per results folder: every runner holds the folder's lock
(``<out>/.run_matrix.lock``) while it runs cells, and every cell holds it too, so that no cell
runs twice and no two timed runs overlap. A second runner exits 2 with a message (after
waiting up to 10 s for the cells of a runner that was killed to stop); an ``--only`` runner
(a Slurm task) waits for the lock instead, so the tasks of one folder run one after another.

Other modes: ``--dry-run`` lists the cells (and which are already recorded),
``--gpus 0,1`` runs one worker per GPU (CUDA_VISIBLE_DEVICES set per worker), ``--nsys``
wraps every run with experiments/scripts/nsys_run, ``--slurm FILE`` writes a Slurm array job
(one task per pending cell) instead of running anything: FILE for the one-GPU cells and
FILE.gpusN for the cells on N GPUs (axes.gpus; --gres=gpu:N on one node, NVLink multicast off).

The matrix file format is documented in experiments/matrix/matrices/quick.toml.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cell_runner import GUARD_GRACE_S, NSYS_RUN, REPO_ROOT, Runner  # noqa: E402
from folder_lock import FolderBusy, acquire  # noqa: E402
from matrix_file import (MAX_CELLS, ORDERS, STREAM_AXES, STREAM_SCENARIO,  # noqa: E402,F401
                         Cell, Matrix, MatrixError, describe, load_matrix, run_order)
from records_file import (RECORDS_FILE, RecordedCells, append_lines,  # noqa: E402,F401
                          recorded_tags, repair_torn_tail, write_manifest)
from slurm_job import ScriptError, slurm_script, slurm_scripts  # noqa: E402
# Cell, Matrix, append_lines, run_order: what other scripts and the tests import from here.
__all__ = ["Cell", "Matrix", "MatrixError", "append_lines", "load_matrix", "run_order",
           "slurm_script", "slurm_scripts", "parse_args", "main"]

DEFAULT_MEMSTRAT = REPO_ROOT / "build" / "memstrat"


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="run_matrix.py",
        description="Run every cell of an experiment matrix with `memstrat train`, one "
                    "record per cell in OUT/records.jsonl; rerun to resume.",
        epilog="Example: experiments/matrix/run_matrix.py experiments/matrix/matrices/quick.toml "
               "--out results/quick --gpus 0,1")
    p.add_argument("matrix", help="matrix file (TOML), e.g. experiments/matrix/matrices/quick.toml")
    p.add_argument("--out", required=True, help="results folder (records.jsonl, logs/)")
    p.add_argument("--memstrat", default=str(DEFAULT_MEMSTRAT),
                   help="memstrat binary (default: %(default)s)")
    p.add_argument("-n", "--dry-run", action="store_true",
                   help="list the cells and their commands, run nothing")
    p.add_argument("--gpus", help="comma-separated GPU ids; one worker per GPU, each with "
                                   "CUDA_VISIBLE_DEVICES set (default: one worker, "
                                   "environment unchanged)")
    p.add_argument("--nsys", action="store_true",
                   help="wrap each run with experiments/scripts/nsys_run (reports in OUT/nsys/)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds per cell before it is killed and recorded as failed; "
                        "0 = no limit (default: %(default)s)")
    p.add_argument("--extra-args", default="",
                   help="extra arguments for every `memstrat train`, one string; write "
                        "it with '=' when it starts with '-', e.g. "
                        "--extra-args=--data=/data/mnist (part of the cell identity; the "
                        "profiler and the launch form are matrix axes)")
    p.add_argument("--only", action="append", metavar="KEY",
                   help="run only the cell with this key (repeatable; used by --slurm); "
                        "waits for the results folder's lock where another runner holds it")
    p.add_argument("--order", choices=ORDERS, default="shuffled",
                   help="shuffled: every repeat of every configuration in a seeded random "
                        "order that interleaves configurations, repeat by repeat; "
                        "sequential: as expanded from the matrix (default: %(default)s)")
    p.add_argument("--shuffle-seed", type=int, metavar="N",
                   help="seed of the shuffled order (default: the matrix's seed)")
    p.add_argument("--retry-rejected", action="store_true",
                   help="run again the cells memstrat rejected before (exit 2: a bad option "
                        "or input; exit 3: no GPU, or the strategy waived on it); a rerun "
                        "skips them otherwise")
    p.add_argument("--allow-large", action="store_true",
                   help=f"expand a matrix of more than {MAX_CELLS:,} cells (refused otherwise)")
    g = p.add_argument_group("slurm")
    g.add_argument("--slurm", metavar="FILE",
                   help="write a Slurm array job script for the pending cells instead of "
                        "running them: FILE for the cells on one GPU, FILE's stem + .gpusN + "
                        "its suffix for the cells on N (axes.gpus), each task granted its GPUs "
                        "on one node")
    g.add_argument("--slurm-partition")
    g.add_argument("--slurm-account")
    g.add_argument("--slurm-time", help="time limit per task (default: timeout + 5 min)")
    g.add_argument("--slurm-cpus", type=int, default=8, help="CPUs per task (default: 8)")
    g.add_argument("--slurm-max-parallel", type=int, default=1, metavar="N",
                   help="at most this many tasks at once (array %%N; default: %(default)s, as "
                        "the tasks of one results folder run one at a time anyway: more only "
                        "holds GPUs while tasks wait for the folder's lock)")
    g.add_argument("--slurm-sbatch", action="append", metavar="OPTION",
                   help="extra #SBATCH line, written with '=', e.g. "
                        "--slurm-sbatch=--constraint=h200 (repeatable)")
    args = p.parse_args(argv)
    if args.timeout is not None and args.timeout <= 0:
        args.timeout = None
    return args


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _check_out(out: Path) -> str | None:
    """Why `out` cannot be a results folder, or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out}: exists and is not a directory"
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "logs").mkdir(exist_ok=True)
    except OSError as e:
        return f"--out {out}: cannot create the results folder: {e.strerror or e}"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out {out}: not writable"
    return None


def _summary(matrix: Matrix, cells: Sequence[Cell], pending: Sequence[Cell], done: RecordedCells,
             skipped: Sequence[Cell], args: argparse.Namespace, seed: int) -> str:
    retried = sum(c.key in done.failed for c in pending)
    rejected_again = sum(c.key in done.rejected for c in pending)
    return (f"matrix {matrix.name}: {len(cells)} cells ({len(cells) - len(pending) - len(skipped)}"
            f" recorded, {len(pending)} to run"
            + (f", {retried} of them failed before" if retried else "")
            + (f", {rejected_again} of them rejected before (--retry-rejected)"
               if rejected_again else "")
            + (f"; {len(skipped)} rejected by memstrat before, not run again: --retry-rejected "
               "runs them" if skipped else "")
            + f"); {matrix.excluded} excluded, {matrix.collapsed} collapsed "
            "(an axis that is a strategy's own option collapses where it does not apply, "
            f"{'/'.join(STREAM_AXES)} outside the {STREAM_SCENARIO} scenario)"
            + (f", {len(matrix.not_runnable)} not runnable (a launch form that `memstrat "
               "describe` says the strategy or the step cannot run"
               + ("; --dry-run lists why" if not args.dry_run else "") + ")"
               if matrix.not_runnable else "")
            + "; "
            + (f"order {args.order}, seed {seed}" if args.order == "shuffled"
               else "order sequential"))


def _not_runnable_lines(matrix: Matrix) -> list[str]:
    """The cells left out as not runnable, counted by reason (configurations and cells)."""
    if not matrix.not_runnable:
        return []
    by_reason: dict[str, list[Cell]] = {}
    for cell, why in matrix.not_runnable:
        by_reason.setdefault(why, []).append(cell)
    lines = [f"not runnable, never run: {len(matrix.not_runnable)} cells "
             "(by `memstrat describe`)"]
    for why, cells in by_reason.items():
        # a configuration: its cells but for the repeat (and its seed) and the profiler
        configs = len({dataclasses.replace(c, repeat=0, seed=0, profile=None) for c in cells})
        lines.append(f"  {len(cells):>6} cells ({configs} configurations): {why}")
    return lines


def _several_gpu_refusal(cells: Sequence[Cell], workers_per_gpu: bool) -> str | None:
    """Why cells that train on several GPUs (axes.gpus > 1) cannot run here, or None: each
    needs every GPU it names (a runner with --gpus gives a worker one), and memstrat refuses
    them unless NVLink multicast is off (NCCL_NVLS_ENABLE=0) in the environment it inherits."""
    several = [c for c in cells if c.several_gpus]
    if not several:
        return None
    if workers_per_gpu:
        return (f"{len(several)} cells train on several GPUs (axes.gpus), and --gpus gives "
                "each worker one GPU; run them without --gpus")
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        return (f"{len(several)} cells train on several GPUs (axes.gpus), which memstrat runs "
                "only with NVLink multicast off; set NCCL_NVLS_ENABLE=0 in the environment")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Absolute once: the path checked is the path run (a relative "./memstrat" passed on as
    # "memstrat" would be looked up on $PATH).
    memstrat = Path(os.path.abspath(args.memstrat))
    out = Path(args.out)
    try:
        extra = tuple(shlex.split(args.extra_args)) if args.extra_args else ()
    except ValueError as e:  # an unclosed quote
        return _error(f"--extra-args: {e}")

    try:
        matrix = load_matrix(args.matrix, describe(memstrat), extra, args.nsys,
                             max_cells=None if args.allow_large else MAX_CELLS)
    except MatrixError as e:
        return _error(str(e))
    if out.exists() and not out.is_dir():
        return _error(f"--out {out}: exists and is not a directory")

    seed = matrix.seed if args.shuffle_seed is None else args.shuffle_seed
    cells = run_order(matrix.cells, args.order, seed)
    ordered = cells
    if args.only:
        by_key = {c.key: c for c in cells}
        unknown = [k for k in args.only if k not in by_key]
        if unknown:
            return _error(f"--only: no such cell in {matrix.path}: {', '.join(unknown)}")
        cells = [by_key[k] for k in dict.fromkeys(args.only)]

    def pending_cells(done: RecordedCells) -> tuple[list[Cell], list[Cell]]:
        """(cells to run, cells skipped because memstrat rejected them before)"""
        todo = [c for c in cells if c.key not in done.ok]
        if args.retry_rejected:
            return todo, []
        return ([c for c in todo if c.key not in done.rejected],
                [c for c in todo if c.key in done.rejected])

    if args.dry_run or args.slurm:
        try:
            done = recorded_tags(out / RECORDS_FILE)
        except OSError as e:
            return _error(f"--out {out}: cannot read {RECORDS_FILE}: {e.strerror or e}")
    if args.dry_run:
        pending, skipped = pending_cells(done)
        print(_summary(matrix, cells, pending, done, skipped, args, seed))
        for line in _not_runnable_lines(matrix):
            print(line)
        runner = Runner(matrix, out, memstrat, args.timeout, args.nsys, [None])
        width = len(str(len(cells)))
        skipped_keys = {c.key for c in skipped}
        for i, c in enumerate(cells, 1):
            state = ("done" if c.key in done.ok else "skip" if c.key in skipped_keys else
                     "retry" if c.key in done.failed or c.key in done.rejected else "todo")
            cmd = runner.command(c, out / "tmp" / f"{c.key}.jsonl")
            print(f"[{i:>{width}}/{len(cells)}] {state:<5} {c.key}\n"
                  f"{'':>{2 * width + 4}}{shlex.join(cmd)}")
        return 0

    if args.slurm:
        pending, skipped = pending_cells(done)
        summary = _summary(matrix, cells, pending, done, skipped, args, seed)
        if not pending:
            print(summary + "\nnothing to run: no Slurm script written")
            return 0
        try:
            scripts = slurm_scripts(matrix, pending, out, memstrat, args)
        except ScriptError as e:
            return _error(str(e))
        if (why := _check_out(out)):
            return _error(why)
        try:
            write_manifest(out, matrix, args.order, seed, ordered, pending, ["slurm"])
            for path, script, _, _ in scripts:
                path.write_text(script)
                os.chmod(path, 0o755)
        except OSError as e:
            return _error(f"--slurm {args.slurm}: cannot write the script: {e.strerror or e}")
        print(summary + "".join(
            f"\nwrote {path}: a Slurm array of {n} tasks on {gpus} GPU{'s' if gpus > 1 else ''} "
            f"each; submit with `sbatch {path}`"
            for path, _, n, gpus in scripts))
        return 0

    if args.nsys and not NSYS_RUN.exists():
        return _error(f"--nsys needs {NSYS_RUN}")
    gpus: list[str | None]
    if args.gpus:
        gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
        if not gpus:
            return _error("--gpus needs at least one id, e.g. --gpus 0,1")
    else:
        gpus = [None]
    if (why := _several_gpu_refusal(cells, bool(args.gpus))):
        return _error(why)
    if (why := _check_out(out)):
        return _error(why)

    # Every runner takes the folder's lock, --only runners (Slurm tasks) included: they wait
    # for it; a full runner refuses to start beside another one (or beside the cells of one that
    # has ended, once their guards had time to stop them).
    try:
        lock_fd = acquire(out, wait=bool(args.only), orphan_wait_s=GUARD_GRACE_S + 5.0)
    except FolderBusy as e:
        return _error(str(e))
    except OSError as e:
        return _error(f"--out {out}: cannot lock the results folder: {e.strerror or e}")
    try:
        # Under the lock: a torn last record is set aside, and the recorded cells are read
        # only now (a task that waited may find its cell recorded by the one before).
        repaired = repair_torn_tail(out / RECORDS_FILE)
        if repaired:
            print(f"warning: {repaired}", file=sys.stderr)
        done = recorded_tags(out / RECORDS_FILE)
        pending, skipped = pending_cells(done)
        summary = _summary(matrix, cells, pending, done, skipped, args, seed)
        if not pending:
            print(summary + "\nnothing to run")
            return 1 if skipped else 0
        if not args.only:
            saved = out / "matrix.toml"
            text = matrix.path.read_text(encoding="utf-8")
            if not saved.exists():
                saved.write_text(text, encoding="utf-8")
            elif saved.read_text(encoding="utf-8", errors="replace") != text:
                print(f"warning: {matrix.path} differs from the matrix first run into {saved}",
                      file=sys.stderr)
            write_manifest(out, matrix, args.order, seed, ordered, pending, gpus)
        print(summary, flush=True)
        runner = Runner(matrix, out, memstrat, args.timeout, args.nsys, gpus,
                        hold_fds=(lock_fd,))

        def _term(signum, frame):  # SIGTERM behaves like Ctrl-C: stop cleanly
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, _term)
        already = len(cells) - len(pending) - len(skipped)
        rc = runner.run(pending, already)
        return 1 if skipped and rc == 0 else rc   # rejected cells: the matrix is not complete
    except OSError as e:
        return _error(f"--out {out}: {e.strerror or e}" + (f": {e.filename}" if e.filename
                                                              else ""))
    finally:
        os.close(lock_fd)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `--dry-run | head`
        sys.stderr.close()
        sys.exit(0)
