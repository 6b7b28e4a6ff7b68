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
``--run-tag <cell-key>``); failed cells are retried, their failed records kept.

Crash safety: memstrat writes each cell's record into a private temporary file; the
runner appends the finished line(s) to records.jsonl with one write + fsync, under a
POSIX lock. Killing the runner at any moment loses at most the cells in progress and
never leaves a partial or duplicated line.

Other modes: ``--dry-run`` lists the cells (and which are already recorded),
``--gpus 0,1`` runs one worker per GPU (CUDA_VISIBLE_DEVICES set per worker), ``--nsys``
wraps every run with experiments/scripts/nsys_run, ``--slurm FILE`` writes a Slurm array job
(one task per pending cell) instead of running anything.

The matrix file format is documented in experiments/matrix/matrices/quick.toml.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import fcntl
import hashlib
import itertools
import json
import os
import queue
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MEMSTRAT = REPO_ROOT / "build" / "memstrat"
NSYS_RUN = REPO_ROOT / "experiments" / "scripts" / "nsys_run"

# depth and copy_streams are strategies' own options: `memstrat describe` lists which strategy
# reads which; for a strategy that does not read one, the axis collapses to a single cell.
# The stream scenario's options: in the other scenarios these axes collapse to a single cell
# that does not pass them (memstrat refuses them there).
STREAM_SCENARIO = "stream"
STREAM_AXES = ("workers", "prefetch", "augment")

# Axis name in the file -> allowed alternative spellings. An axis is the `memstrat train`
# option of the same name (copy_streams: --copy-streams); its allowed values and default come
# from `memstrat describe --json` (see describe()).
AXES = ("strategy", "scenario", "transfer", "batch", "hidden", "epochs", "gemm",
        "depth", "copy_streams", "epoch_launch", "profile", "fused") + STREAM_AXES + ("cpus",)
# Axes the runner applies itself rather than passing to `memstrat train`: cpus = "all" (the
# default: no restriction) or a CPU list for `taskset -c` (e.g. "0", "0-3"), the process and
# every thread it starts confined to those cores.
RUNNER_AXES = {"cpus": {"name": "cpus", "kind": "text", "default": "all"}}
AXIS_ALIASES = {"copy-streams": "copy_streams", "streams": "copy_streams",
                "epoch-launch": "epoch_launch"}
# Axes a cell passes to memstrat only when they differ from the option's default (a cell holds
# None for the default, so the keys of matrices without these axes stay what they were). A
# matrix that sets such an axis must not set the same option in extra_args as well.
AXIS_FLAGS = {"epoch_launch": ("--epoch-launch",), "profile": ("--profile", "--no-profile"),
              "fused": ("--fused",), "cpus": ()}
# [[exclude]] keys besides the axes: "repeat" (0-based), e.g. to profile only repeat 0.
RULE_KEYS = AXES + ("repeat",)
RUN_KEYS = ("repeats", "seed", "vary_seed")
TOP_KEYS = ("name", "description", "axes", "exclude", "extra_args")

RECORDS_FILE = "records.jsonl"
MANIFEST_FILE = "manifest.json"
ORDERS = ("shuffled", "sequential")


class MatrixError(Exception):
    """A matrix file that cannot be expanded; the message names the file and the key."""


# --------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Cell:
    strategy: str
    scenario: str
    transfer: str
    batch: int
    hidden: tuple[int, ...]
    epochs: int
    gemm: str
    depth: int | None          # None for a strategy that does not read --depth
    copy_streams: int | None   # None for a strategy that does not read --copy-streams
    seed: int
    repeat: int                # 0-based repeat index
    extra_args: tuple[str, ...] = ()
    nsys: bool = False
    epoch_launch: str | None = None  # --epoch-launch; None: memstrat's default, not passed
    profile: bool | None = None      # --profile / --no-profile; None: memstrat's default
    workers: int | None = None       # --workers, --prefetch, --augment: stream cells only
    prefetch: int | None = None
    augment: str | None = None
    fused: str | None = None         # --fused; None: memstrat's default, not passed
    cpus: str | None = None          # taskset -c CPUS around the process; None: no restriction

    @property
    def key(self) -> str:
        """Stable, file-name-safe identity of the cell (stored as config.run_tag)."""
        parts = [self.strategy, self.scenario, self.transfer, f"b{self.batch}",
                 "h" + "x".join(str(h) for h in self.hidden), f"e{self.epochs}", self.gemm]
        if self.depth is not None and self.copy_streams is not None:
            parts.append(f"d{self.depth}c{self.copy_streams}")
        elif self.depth is not None:
            parts.append(f"d{self.depth}")
        elif self.copy_streams is not None:
            parts.append(f"c{self.copy_streams}")
        if self.workers is not None:  # stream cells: the input pipeline, always spelled out
            parts.append(f"w{self.workers}p{self.prefetch}-{self.augment}")
        # Only values other than memstrat's defaults appear, so that the keys of matrices
        # without these axes stay what they were.
        if self.epoch_launch is not None:
            parts.append(f"elaunch-{self.epoch_launch}")
        if self.profile is not None:
            parts.append("profile" if self.profile else "noprofile")
        if self.fused is not None:
            parts.append(f"fused-{self.fused}")
        if self.cpus is not None:
            parts.append("cpus" + self.cpus.replace(",", "+"))
        parts += [f"seed{self.seed}", f"r{self.repeat}"]
        if self.extra_args:
            digest = hashlib.sha1("\0".join(self.extra_args).encode()).hexdigest()[:8]
            parts.append(f"x{digest}")
        if self.nsys:
            parts.append("nsys")
        return "_".join(parts)

    def axis_value(self, axis: str) -> Any:
        return getattr(self, axis)

    def train_args(self) -> list[str]:
        """Arguments after `memstrat train` (without --json / --run-tag)."""
        args = ["--strategy", self.strategy, "--scenario", self.scenario,
                "--transfer", self.transfer, "--batch", str(self.batch),
                "--hidden", ",".join(str(h) for h in self.hidden),
                "--epochs", str(self.epochs), "--gemm", self.gemm, "--seed", str(self.seed)]
        if self.depth is not None:
            args += ["--depth", str(self.depth)]
        if self.copy_streams is not None:
            args += ["--copy-streams", str(self.copy_streams)]
        if self.workers is not None:
            args += ["--workers", str(self.workers), "--prefetch", str(self.prefetch),
                     "--augment", self.augment]
        if self.epoch_launch is not None:
            args += ["--epoch-launch", self.epoch_launch]
        if self.profile is not None:
            args.append("--profile" if self.profile else "--no-profile")
        if self.fused is not None:
            args += ["--fused", self.fused]
        return args + list(self.extra_args)

    def config_stub(self) -> dict[str, Any]:
        """The record's `config` as far as the runner knows it (for synthesized failures)."""
        return {"strategy": self.strategy, "scenario": self.scenario,
                "transfer": self.transfer, "batch": self.batch, "hidden": list(self.hidden),
                "epochs": self.epochs, "seed": self.seed, "gemm": self.gemm,
                "depth": self.depth, "streams": self.copy_streams, "workers": self.workers,
                "prefetch": self.prefetch, "augment": self.augment, "run_tag": self.key}


@dataclasses.dataclass
class Matrix:
    path: Path
    name: str
    description: str
    cells: list[Cell]
    excluded: int          # cells removed by [[exclude]] rules
    collapsed: int         # duplicate cells removed because depth/copy_streams do not apply
    extra_args: tuple[str, ...]
    seed: int              # the runs' seed (repeat 0); the default shuffle seed
    schema_version: int    # of the records the binary writes


def describe(memstrat: Path) -> dict[str, Any]:
    """`memstrat describe --json`: the strategies and every train option (allowed values,
    default), the one declaration the matrix is checked against. Raises MatrixError."""
    if not (memstrat.is_file() and os.access(memstrat, os.X_OK)):
        raise MatrixError(f"memstrat binary {memstrat} not found or not executable; build it "
                          "(cmake -S . -B build && cmake --build build -j) or pass --memstrat "
                          "PATH")
    try:
        res = subprocess.run([str(memstrat), "describe", "--json"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MatrixError(f"`{memstrat} describe --json` failed: {e}") from None
    try:
        if res.returncode != 0:
            raise ValueError(f"exit {res.returncode}: {res.stderr.strip()}")
        return json.loads(res.stdout)
    except ValueError as e:
        raise MatrixError(f"`{memstrat} describe --json` gave no description ({e}); is "
                          f"{memstrat} a current memstrat?") from None


def _axis_options(description: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Axis name -> its option in the description (copy_streams -> --copy-streams)."""
    by_name = {o["name"]: o for o in description["train_options"]}
    return {a: RUNNER_AXES.get(a) or by_name["--" + a.replace("_", "-")] for a in AXES}


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _parse_hidden(value: Any, where: str) -> tuple[int, ...]:
    """One hidden-layer alternative: 256, "512,256", "512x256" or [512, 256]."""
    if isinstance(value, bool):
        raise MatrixError(f"{where}: hidden sizes must be integers, got {value!r}")
    if isinstance(value, int):
        layers = [value]
    elif isinstance(value, str):
        try:
            layers = [int(p) for p in value.replace("x", ",").split(",") if p.strip()]
        except ValueError:
            raise MatrixError(f"{where}: cannot read hidden sizes from {value!r}; "
                              "write e.g. 256 or \"512,256\"") from None
    elif isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                         for v in value):
        layers = list(value)
    else:
        raise MatrixError(f"{where}: cannot read hidden sizes from {value!r}")
    if not layers or any(h <= 0 for h in layers):
        raise MatrixError(f"{where}: hidden sizes must be positive integers, got {value!r}")
    return tuple(layers)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MatrixError(f"{where}: expected a positive integer, got {value!r}")
    return value


def _axis_values(axis: str, raw: Any, where: str, strategies: Sequence[str],
                 option: dict[str, Any]) -> list[Any]:
    values = _as_list(raw)
    if not values:
        raise MatrixError(f"{where}: the axis is empty")
    out: list[Any] = []
    for v in values:
        if axis == "strategy":
            if v == "all":
                out.extend(s for s in strategies if s not in out)
                continue
            if not isinstance(v, str) or v not in strategies:
                raise MatrixError(f"{where}: unknown strategy {v!r}; known: "
                                  + ", ".join(strategies) + " (or \"all\")")
        elif option["kind"] == "flag":
            if not isinstance(v, bool):
                raise MatrixError(f"{where}: expected true or false, got {v!r}")
        elif option["kind"] == "choice":
            if v not in option["choices"]:
                raise MatrixError(f"{where}: {v!r} is not one of {', '.join(option['choices'])}")
        elif axis == "hidden":
            v = _parse_hidden(v, where)
        elif axis == "cpus":
            if not isinstance(v, str) or not (v == "all" or re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", v)):
                raise MatrixError(f"{where}: cpus is \"all\" or a CPU list for taskset -c "
                                  f"(\"0\", \"0-3\", \"0,2\"), got {v!r}")
        else:  # batch, epochs, depth, copy_streams
            v = _positive_int(v, where)
            lo, hi = option.get("min"), option.get("max")
            if lo is not None and v < lo:
                raise MatrixError(f"{where}: {axis} must be >= {lo:g} ({option['name']}), got {v}")
            if hi is not None and v > hi:
                raise MatrixError(f"{where}: {axis} must be <= {hi:g} ({option['name']}), got {v}")
        if v not in out:
            out.append(v)
    return out


def _normalise_rule_value(axis: str, value: Any, where: str) -> list[Any]:
    alts = _as_list(value)
    if axis == "hidden":
        return [_parse_hidden(v, where) for v in alts]
    if axis == "repeat" and not all(isinstance(v, int) and not isinstance(v, bool)
                                    and v >= 0 for v in alts):
        raise MatrixError(f"{where}: repeat indices are integers from 0, got {value!r}")
    return alts


def load_matrix(path: str | Path, description: dict[str, Any],
                extra_args: Sequence[str] = (), nsys: bool = False) -> Matrix:
    """Parse and expand a matrix file against `description` (`memstrat describe --json`).
    Raises MatrixError with a readable message."""
    path = Path(path)
    strategies = [s["name"] for s in description["strategies"]]
    # strategy -> the options it reads ("--depth", ...): where its own axes apply
    strategy_options = {s["name"]: set(s.get("options", ())) for s in description["strategies"]}
    options = _axis_options(description)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise MatrixError(f"{path}: no such matrix file") from None
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"{path}: not valid TOML: {e}") from None

    for key in doc:
        if key not in TOP_KEYS:
            raise MatrixError(f"{path}: unknown top-level key {key!r} "
                              f"(allowed: {', '.join(TOP_KEYS)})")
    axes_doc = doc.get("axes")
    if not isinstance(axes_doc, dict):
        raise MatrixError(f"{path}: missing the [axes] table")

    axes: dict[str, list[Any]] = {}
    run: dict[str, Any] = {"repeats": 1, "seed": 1, "vary_seed": False}
    for raw_key, raw in axes_doc.items():
        key = AXIS_ALIASES.get(raw_key, raw_key)
        where = f"{path}: axes.{raw_key}"
        if key in AXES:
            axes[key] = _axis_values(key, raw, where, strategies, options[key])
        elif key in RUN_KEYS:
            if key == "vary_seed":
                if not isinstance(raw, bool):
                    raise MatrixError(f"{where}: expected true or false")
                run[key] = raw
            elif key == "seed":
                if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
                    raise MatrixError(f"{where}: expected a non-negative integer")
                run[key] = raw
            else:
                run[key] = _positive_int(raw, where)
        else:
            raise MatrixError(f"{where}: unknown axis (allowed: "
                              f"{', '.join(AXES + RUN_KEYS)})")
    if "strategy" not in axes:
        raise MatrixError(f"{path}: axes.strategy is required (a list, or \"all\")")
    given_axes = set(axes)
    for axis in AXES[1:]:  # every axis but strategy defaults to its option's default
        default = options[axis]["default"]
        axes.setdefault(axis, [_parse_hidden(default, axis) if axis == "hidden" else default])
    for axis in AXIS_FLAGS:  # the option's default is not passed: None in the cell
        axes[axis] = [None if v == options[axis]["default"] else v for v in axes[axis]]

    rules: list[dict[str, list[Any]]] = []
    excl = doc.get("exclude", [])
    if not isinstance(excl, list):
        raise MatrixError(f"{path}: exclude must be written as [[exclude]] tables")
    for i, rule in enumerate(excl):
        where = f"{path}: exclude #{i + 1}"
        if not isinstance(rule, dict) or not rule:
            raise MatrixError(f"{where}: an exclusion needs at least one axis = value")
        norm: dict[str, list[Any]] = {}
        for raw_key, value in rule.items():
            key = AXIS_ALIASES.get(raw_key, raw_key)
            if key not in RULE_KEYS:
                raise MatrixError(f"{where}: unknown axis {raw_key!r} "
                                  f"(allowed: {', '.join(RULE_KEYS)})")
            norm[key] = _normalise_rule_value(key, value, f"{where}.{raw_key}")
            if key in AXIS_FLAGS:  # as in the cells: the option's default is None
                norm[key] = [None if v == options[key]["default"] else v for v in norm[key]]
        rules.append(norm)

    file_extra = doc.get("extra_args", [])
    if isinstance(file_extra, str):
        file_extra = shlex.split(file_extra)
    if not isinstance(file_extra, list) or not all(isinstance(a, str) for a in file_extra):
        raise MatrixError(f"{path}: extra_args must be a string or a list of strings")
    all_extra = tuple(file_extra) + tuple(extra_args)
    for axis, flags in AXIS_FLAGS.items():
        given = [a for a in all_extra if a.split("=", 1)[0] in flags]
        if axis in given_axes and given:
            raise MatrixError(f"{path}: axes.{axis} and the extra arguments "
                              f"({' '.join(given)}) both set {'/'.join(flags)}; set it in "
                              "one place")

    cells: list[Cell] = []
    seen: set[Cell] = set()
    excluded = collapsed = 0
    rule_hits = [0] * len(rules)
    # Repeats outermost: every configuration runs once before any runs twice, so slow
    # drift (clocks, temperature) spreads over all configurations instead of a few.
    for rep in range(run["repeats"]):
        seed = run["seed"] + (rep if run["vary_seed"] else 0)
        for (strategy, scenario, transfer, batch, hidden, epochs, gemm, depth, streams,
             epoch_launch, profile, fused, workers, prefetch, augment, cpus) in \
                itertools.product(*(axes[a] for a in AXES)):
            reads = strategy_options[strategy]
            stream = scenario == STREAM_SCENARIO
            cell = Cell(strategy=strategy, scenario=scenario, transfer=transfer, batch=batch,
                        hidden=hidden, epochs=epochs, gemm=gemm,
                        depth=depth if "--depth" in reads else None,
                        copy_streams=streams if "--copy-streams" in reads else None,
                        seed=seed, repeat=rep, extra_args=all_extra, nsys=nsys,
                        epoch_launch=epoch_launch, profile=profile,
                        workers=workers if stream else None,
                        prefetch=prefetch if stream else None,
                        augment=augment if stream else None, fused=fused, cpus=cpus)
            if cell in seen:
                collapsed += 1
                continue
            seen.add(cell)
            hit = False
            for i, rule in enumerate(rules):
                if all(cell.axis_value(a) in alts for a, alts in rule.items()):
                    rule_hits[i] += 1
                    hit = True
            if hit:
                excluded += 1
                continue
            cells.append(cell)
    for i, hits in enumerate(rule_hits):
        if hits == 0:
            print(f"warning: {path}: exclude #{i + 1} matches no cell", file=sys.stderr)
    stream_flags = [a for a in all_extra
                    if a.split("=", 1)[0] in ("--" + x for x in STREAM_AXES)]
    if stream_flags and any(c.workers is not None for c in cells):
        raise MatrixError(f"{path}: the extra arguments ({' '.join(stream_flags)}) set what "
                          "the runner passes to every stream cell; use the axes "
                          f"{', '.join(STREAM_AXES)} instead")
    name = doc.get("name", path.stem)
    return Matrix(path=path, name=str(name), description=str(doc.get("description", "")),
                  cells=cells, excluded=excluded, collapsed=collapsed, extra_args=all_extra,
                  seed=run["seed"], schema_version=description["record_schema_version"])


def run_order(cells: Sequence[Cell], order: str, seed: int) -> list[Cell]:
    """The cells in the order they run; deterministic for (order, seed).

    sequential: as expanded. shuffled: repeat blocks in turn (every configuration runs
    once before any runs twice), each block in its own random order drawn from one
    random.Random(seed), so that every (configuration, repeat) runs exactly once and
    drift over time is spread over all configurations.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if order == "sequential":
        return list(cells)
    rng = random.Random(seed)
    blocks: dict[int, list[Cell]] = {}
    for c in cells:
        blocks.setdefault(c.repeat, []).append(c)
    out: list[Cell] = []
    for rep in sorted(blocks):
        block = list(blocks[rep])
        rng.shuffle(block)
        out.extend(block)
    return out


# --------------------------------------------------------------------------------------
# Records file
# --------------------------------------------------------------------------------------
def recorded_tags(records_path: Path) -> tuple[set[str], set[str]]:
    """(run_tags with an ok record, run_tags with only failed records) in records_path.

    Unreadable lines are reported on stderr and ignored (the runner never writes them).
    """
    ok: set[str] = set()
    failed: set[str] = set()
    if not records_path.exists():
        return ok, failed
    with open(records_path, "r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                tag = rec["config"]["run_tag"]
                status = rec.get("status", "ok")
            except (json.JSONDecodeError, KeyError, TypeError):
                print(f"warning: {records_path}:{lineno}: not a record with config.run_tag; "
                      "ignored for restart", file=sys.stderr)
                continue
            if not isinstance(tag, str):
                continue
            (ok if status == "ok" else failed).add(tag)
    return ok, failed - ok


def append_lines(records_path: Path, lines: Sequence[str]) -> None:
    """Append complete lines with one write, then fsync; serialised by a POSIX lock.

    If the file does not end with a newline (a foreign partial line), a newline is
    written first so that our record stays on a line of its own.
    """
    data = "".join(l if l.endswith("\n") else l + "\n" for l in lines).encode("utf-8")
    if not data:
        return
    fd = os.open(records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size > 0:
                with open(records_path, "rb") as rf:
                    rf.seek(size - 1)
                    if rf.read(1) != b"\n":
                        data = b"\n" + data
            view = memoryview(data)
            while view:  # one write in practice; loop only guards against short writes
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_manifest(out: Path, matrix: Matrix, order: str, seed: int,
                   ordered: Sequence[Cell], pending: Sequence[Cell],
                   gpus: Sequence[str | None]) -> Path:
    """Record the run order in OUT/manifest.json: the matrix, the order and its seed, every
    cell key in run order, and one entry per invocation with the cells it ran (in order).
    Earlier invocations are kept, so a resumed or re-seeded run stays traceable."""
    path = out / MANIFEST_FILE
    invocations: list[Any] = []
    if path.exists():
        try:
            invocations = json.loads(path.read_text(encoding="utf-8")).get("invocations", [])
        except (json.JSONDecodeError, AttributeError):
            print(f"warning: {path} was not readable JSON; starting it again",
                  file=sys.stderr)
    invocations.append({"started_at": _utc_now(), "order": order, "shuffle_seed": seed,
                        "gpus": [g if g is not None else "default" for g in gpus],
                        "cells": [c.key for c in pending]})
    doc = {"matrix": str(matrix.path.resolve()), "name": matrix.name, "order": order,
           "shuffle_seed": seed, "cells": [c.key for c in ordered],
           "invocations": invocations}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def synthesized_failure(cell: Cell, argv: Sequence[str], error: str,
                        schema_version: int) -> dict[str, Any]:
    """A failed record for a cell whose memstrat run left no record (crash, timeout)."""
    now = _dt.datetime.now(_dt.timezone.utc)
    return {
        "schema_version": schema_version,
        "run_id": now.strftime("%Y%m%dT%H%M%SZ") + "-runner-" + uuid.uuid4().hex[:8],
        "started_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "status": "failed",
        "error": "run_matrix: " + error,
        "argv": list(argv),
        "env": None,
        "config": cell.config_stub(),
        "setup": None,
        "epochs": [],
        "summary": None,
        "final": None,
    }


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------
def _fmt_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


class Runner:
    def __init__(self, matrix: Matrix, out: Path, memstrat: Path, timeout: float | None,
                 nsys: bool, gpus: list[str | None]):
        self.matrix = matrix
        self.out = out
        self.memstrat = memstrat
        self.timeout = timeout
        self.nsys = nsys
        self.gpus = gpus
        self.records = out / RECORDS_FILE
        self.logs = out / "logs"
        self.tmp = out / "tmp"
        self.nsys_dir = out / "nsys"
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self._stop = threading.Event()
        self.done = 0
        self.total = 0
        self.ran = 0
        self.failed: list[tuple[Cell, str]] = []
        self.internal_error = False
        self.t0 = time.monotonic()

    # The command for one cell; the record goes to `json_path`.
    def command(self, cell: Cell, json_path: Path) -> list[str]:
        cmd = [str(self.memstrat), "train", *cell.train_args(),
               "--run-tag", cell.key, "--json", str(json_path)]
        if cell.cpus is not None:
            cmd = ["taskset", "-c", cell.cpus, *cmd]
        if self.nsys:
            cmd = [str(NSYS_RUN), "-o", str(self.nsys_dir / cell.key), "--", *cmd]
        return cmd

    def _progress(self, cell: Cell, outcome: str, seconds: float) -> None:
        with self._lock:
            self.done += 1
            self.ran += 1
            elapsed = time.monotonic() - self.t0
            remaining = self.total - self.done
            eta = elapsed / self.ran * remaining if self.ran else 0.0
            width = len(str(self.total))
            print(f"[{self.done:>{width}}/{self.total}] {outcome:<6} {seconds:6.1f} s | "
                  f"elapsed {_fmt_duration(elapsed)} | ETA {_fmt_duration(eta)} | "
                  f"{cell.key}", flush=True)

    def run_cell(self, cell: Cell, gpu: str | None) -> None:
        tmp = self.tmp / f"{cell.key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.jsonl"
        cmd = self.command(cell, tmp)
        env = os.environ.copy()
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        log_path = self.logs / f"{cell.key}.log"
        t0 = time.monotonic()
        rc: int | None = None
        timed_out = False
        error = ""
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"=== {_utc_now()} gpu={gpu if gpu is not None else 'default'} "
                      f"cmd: {shlex.join(cmd)}\n")
            log.flush()
            try:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        start_new_session=True)
            except OSError as e:
                proc = None
                log.write(f"=== could not start: {e}\n")
                error = f"could not start {cmd[0]}: {e}"
            if proc is not None:
                with self._lock:
                    self._procs.add(proc)
                try:
                    rc = proc.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(proc)
                    rc = proc.wait()
                finally:
                    with self._lock:
                        self._procs.discard(proc)
                if timed_out:
                    error = f"timed out after {self.timeout:g} s"
                elif rc != 0:
                    error = f"exited with code {rc}"
            seconds = time.monotonic() - t0
            log.write(f"=== {error or 'exit 0'} after {seconds:.1f} s\n")

        if self._stop.is_set():   # interrupted: the cell in progress is dropped, not recorded
            tmp.unlink(missing_ok=True)
            return

        lines: list[str] = []
        bad = False
        if tmp.exists():
            for raw in tmp.read_text(encoding="utf-8", errors="replace").splitlines():
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    bad = True
                    continue
                if not isinstance(rec, dict):
                    bad = True
                    continue
                cfg = rec.get("config")
                if isinstance(cfg, dict) and cfg.get("run_tag") != cell.key:
                    # memstrat without --run-tag support in the record: tag it here so
                    # restart-skip still works.
                    cfg["run_tag"] = cell.key
                    raw = json.dumps(rec, separators=(",", ":"))
                lines.append(raw)
        statuses = [json.loads(l).get("status", "ok") for l in lines]
        if not lines:
            why = error or "exited with code 0"
            if bad:
                why += " and wrote an unreadable record"
            else:
                why += " and wrote no record"
            lines = [json.dumps(synthesized_failure(
                cell, cmd, f"{why} (log: logs/{cell.key}.log)", self.matrix.schema_version),
                separators=(",", ":"))]
            statuses = ["failed"]
        append_lines(self.records, lines)
        tmp.unlink(missing_ok=True)
        outcome = "ok" if "ok" in statuses else "FAILED"
        if outcome != "ok":
            with self._lock:
                self.failed.append((cell, str(log_path)))
        self._progress(cell, outcome, seconds)

    def _worker(self, gpu: str | None, work: "queue.Queue[Cell]") -> None:
        while not self._stop.is_set():
            try:
                cell = work.get_nowait()
            except queue.Empty:
                return
            try:
                self.run_cell(cell, gpu)
            except Exception as e:  # e.g. disk full: stop rather than spin through cells
                print(f"error: {cell.key}: {type(e).__name__}: {e}; stopping",
                      file=sys.stderr, flush=True)
                self.internal_error = True
                self._stop.set()
                return

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            procs = list(self._procs)
        for p in procs:
            _kill_group(p)

    def run(self, pending: list[Cell], already: int) -> int:
        for d in (self.logs, self.tmp) + ((self.nsys_dir,) if self.nsys else ()):
            d.mkdir(parents=True, exist_ok=True)
        _remove_stale_temp_files(self.tmp)
        self.total = len(pending) + already
        self.done = already
        work: queue.Queue[Cell] = queue.Queue()
        for c in pending:
            work.put(c)
        threads = [threading.Thread(target=self._worker, args=(g, work), daemon=True)
                   for g in self.gpus]
        self.t0 = time.monotonic()
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            print("\ninterrupted: stopping the cells in progress (they are not recorded)",
                  file=sys.stderr, flush=True)
            self.stop()
            for t in threads:
                t.join(timeout=30)
            print(f"{self.done}/{self.total} cells recorded in {self.records}; run the same "
                  "command again to continue", file=sys.stderr)
            return 130
        elapsed = time.monotonic() - self.t0
        if self.internal_error:
            return 3
        print(f"done: {self.ran} cells run in {_fmt_duration(elapsed)}, "
              f"{len(self.failed)} failed; records in {self.records}", flush=True)
        if self.failed:
            print("failed cells (rerun the same command to retry them):", file=sys.stderr)
            for cell, log in self.failed:
                print(f"  {cell.key}  log: {log}", file=sys.stderr)
            return 1
        return 0


def _remove_stale_temp_files(tmp_dir: Path) -> None:
    """Delete per-cell temp files (KEY.PID.RANDOM.jsonl) left by runners that died.

    They never hold anything that counts: a cell is recorded only once its line is in
    records.jsonl, and a rerun runs such a cell again.
    """
    for f in tmp_dir.glob("*.jsonl"):
        parts = f.name.rsplit(".", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            f.unlink(missing_ok=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """Terminate the process group of `proc` (nsys and its children included)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if grace is None:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


# --------------------------------------------------------------------------------------
# Slurm
# --------------------------------------------------------------------------------------
def slurm_script(matrix: Matrix, pending: Sequence[Cell], out: Path, memstrat: Path,
                 args: argparse.Namespace) -> str:
    """A Slurm array job: task i runs pending cell i through `run_matrix.py --only KEY`."""
    out = out.resolve()
    runner_cmd = [str(Path(__file__).resolve()), str(matrix.path.resolve()),
                  "--out", str(out), "--memstrat", str(memstrat.resolve())]
    if args.timeout:
        runner_cmd += ["--timeout", f"{args.timeout:g}"]
    if args.extra_args:
        runner_cmd.append(f"--extra-args={args.extra_args}")
    if args.nsys:
        runner_cmd.append("--nsys")
    array = f"0-{len(pending) - 1}"
    if args.slurm_max_parallel:
        array += f"%{args.slurm_max_parallel}"
    time_limit = args.slurm_time or _fmt_duration((args.timeout or 1800) + 300)
    lines = [
        "#!/bin/bash",
        f"# Slurm array job generated by experiments/matrix/run_matrix.py on {_utc_now()}",
        f"# matrix: {matrix.path.resolve()} ({matrix.name}); {len(pending)} cells to run "
        f"of {len(matrix.cells)}.",
        "# Submit with: sbatch " + (args.slurm or "THIS_FILE"),
        "# Each task runs one cell and appends its record to "
        f"{out / RECORDS_FILE} (a POSIX lock",
        "# serialises the appends; the results folder must be on a file system shared by",
        "# the nodes). Resubmitting is safe: cells already recorded are skipped; regenerate",
        "# the script to drop them from the array.",
        f"#SBATCH --job-name=memstrat-{matrix.name}",
        f"#SBATCH --array={array}",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --cpus-per-task={args.slurm_cpus}",
        f"#SBATCH --time={time_limit}",
        f"#SBATCH --output={out / 'logs' / 'slurm-%A_%a.out'}",
    ]
    if args.slurm_partition:
        lines.append(f"#SBATCH --partition={args.slurm_partition}")
    if args.slurm_account:
        lines.append(f"#SBATCH --account={args.slurm_account}")
    for extra in args.slurm_sbatch or []:
        lines.append(f"#SBATCH {extra}")
    lines += [
        "set -euo pipefail",
        "",
        "CELLS=(",
        *(f"  {c.key}" for c in pending),
        ")",
        'KEY="${CELLS[$SLURM_ARRAY_TASK_ID]}"',
        "# Slurm sets CUDA_VISIBLE_DEVICES to the GPU granted by --gres.",
        'exec "${PYTHON:-python3}" ' + shlex.join(runner_cmd) + ' --only "$KEY"',
        "",
    ]
    return "\n".join(lines)


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
                        "profiler and the epoch launch are matrix axes)")
    p.add_argument("--only", action="append", metavar="KEY",
                   help="run only the cell with this key (repeatable; used by --slurm)")
    p.add_argument("--order", choices=ORDERS, default="shuffled",
                   help="shuffled: every repeat of every configuration in a seeded random "
                        "order that interleaves configurations, repeat by repeat; "
                        "sequential: as expanded from the matrix (default: %(default)s)")
    p.add_argument("--shuffle-seed", type=int, metavar="N",
                   help="seed of the shuffled order (default: the matrix's seed)")
    g = p.add_argument_group("slurm")
    g.add_argument("--slurm", metavar="FILE",
                   help="write a Slurm array job script for the pending cells instead of "
                        "running them")
    g.add_argument("--slurm-partition")
    g.add_argument("--slurm-account")
    g.add_argument("--slurm-time", help="time limit per task (default: timeout + 5 min)")
    g.add_argument("--slurm-cpus", type=int, default=8, help="CPUs per task (default: 8)")
    g.add_argument("--slurm-max-parallel", type=int,
                   help="at most this many tasks at once (array %%N)")
    g.add_argument("--slurm-sbatch", action="append", metavar="OPTION",
                   help="extra #SBATCH line, written with '=', e.g. "
                        "--slurm-sbatch=--constraint=h200 (repeatable)")
    args = p.parse_args(argv)
    if args.timeout is not None and args.timeout <= 0:
        args.timeout = None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    memstrat = Path(args.memstrat)
    out = Path(args.out)
    extra = tuple(shlex.split(args.extra_args)) if args.extra_args else ()

    try:
        matrix = load_matrix(args.matrix, describe(memstrat), extra, args.nsys)
    except MatrixError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    seed = matrix.seed if args.shuffle_seed is None else args.shuffle_seed
    cells = run_order(matrix.cells, args.order, seed)
    ordered = cells
    if args.only:
        by_key = {c.key: c for c in cells}
        unknown = [k for k in args.only if k not in by_key]
        if unknown:
            print(f"error: --only: no such cell in {matrix.path}: {', '.join(unknown)}",
                  file=sys.stderr)
            return 2
        cells = [by_key[k] for k in dict.fromkeys(args.only)]

    ok_tags, failed_tags = recorded_tags(out / RECORDS_FILE)
    pending = [c for c in cells if c.key not in ok_tags]
    already = len(cells) - len(pending)
    summary = (f"matrix {matrix.name}: {len(cells)} cells ({already} recorded, "
               f"{len(pending)} to run"
               + (f", {sum(c.key in failed_tags for c in pending)} of them failed before"
                  if failed_tags else "")
               + f"); {matrix.excluded} excluded, {matrix.collapsed} collapsed "
               "(an axis that is a strategy's own option collapses where it does not apply, "
               f"{'/'.join(STREAM_AXES)} outside the {STREAM_SCENARIO} scenario); "
               + (f"order {args.order}, seed {seed}" if args.order == "shuffled"
                  else "order sequential"))

    if args.dry_run:
        print(summary)
        runner = Runner(matrix, out, memstrat, args.timeout, args.nsys, [None])
        width = len(str(len(cells)))
        for i, c in enumerate(cells, 1):
            state = ("done" if c.key in ok_tags else
                     "retry" if c.key in failed_tags else "todo")
            cmd = runner.command(c, out / "tmp" / f"{c.key}.jsonl")
            print(f"[{i:>{width}}/{len(cells)}] {state:<5} {c.key}\n"
                  f"{'':>{2 * width + 4}}{shlex.join(cmd)}")
        return 0

    if args.slurm:
        if not pending:
            print(summary + "\nnothing to run: no Slurm script written")
            return 0
        out.mkdir(parents=True, exist_ok=True)
        (out / "logs").mkdir(exist_ok=True)
        write_manifest(out, matrix, args.order, seed, ordered, pending, ["slurm"])
        Path(args.slurm).write_text(slurm_script(matrix, pending, out, memstrat, args))
        os.chmod(args.slurm, 0o755)
        print(summary + f"\nwrote {args.slurm}: a Slurm array of {len(pending)} tasks; "
              f"submit with `sbatch {args.slurm}`")
        return 0

    if not pending:
        print(summary + "\nnothing to run")
        return 0
    if args.nsys and not NSYS_RUN.exists():
        print(f"error: --nsys needs {NSYS_RUN}", file=sys.stderr)
        return 2

    gpus: list[str | None]
    if args.gpus:
        gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
        if not gpus:
            print("error: --gpus needs at least one id, e.g. --gpus 0,1", file=sys.stderr)
            return 2
    else:
        gpus = [None]

    out.mkdir(parents=True, exist_ok=True)
    lock_fd = None
    if not args.only:  # Slurm tasks (--only) share the folder on purpose
        lock_fd = os.open(out / ".run_matrix.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"error: another run_matrix.py is running on {out}", file=sys.stderr)
            return 2
        saved = out / "matrix.toml"
        text = matrix.path.read_text()
        if not saved.exists():
            saved.write_text(text)
        elif saved.read_text() != text:
            print(f"warning: {matrix.path} differs from the matrix first run into {saved}",
                  file=sys.stderr)
        write_manifest(out, matrix, args.order, seed, ordered, pending, gpus)
    print(summary, flush=True)
    runner = Runner(matrix, out, memstrat, args.timeout, args.nsys, gpus)

    def _term(signum, frame):  # SIGTERM behaves like Ctrl-C: stop cleanly
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _term)
    try:
        return runner.run(pending, already)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `--dry-run | head`
        sys.stderr.close()
        sys.exit(0)
