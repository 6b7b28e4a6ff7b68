"""A matrix file (TOML) expanded into cells: one cell = one repeat of one configuration = one
`memstrat train` process; and the order the cells run in.

The axes' allowed values and defaults come from `memstrat describe --json` (describe()); the
file format is documented in experiments/matrix/matrices/quick.toml. run_matrix.py is the
command line that runs the cells.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import random
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Sequence

from train_args import check_train_args, in_range, train_arg_values, value_problem

# depth, copy_streams and advise are strategies' own options: `memstrat describe` lists which
# strategy reads which; for a strategy that does not read one, the axis collapses to a single
# cell.
OWN_AXES = {"depth": "--depth", "copy_streams": "--copy-streams", "advise": "--advise"}
# The stream scenario's options: in the other scenarios these axes collapse to a single cell
# that does not pass them (memstrat refuses them there).
STREAM_SCENARIO = "stream"
STREAM_AXES = ("workers", "prefetch", "augment")

# Axis name in the file -> allowed alternative spellings. An axis is the `memstrat train`
# option of the same name (copy_streams: --copy-streams); its allowed values and default come
# from `memstrat describe --json` (see describe()).
# The data-path and scale options: where refresh and stream augment, the copies of the training
# set, the device memory the data path may use, and data-parallel training (GPUs, how their
# gradients are combined, or the shards emulated on one GPU); and um-advise's hints (--advise:
# a comma-separated subset of its hints, or none).
DATA_AXES = ("augment_device", "replicate", "device_budget", "gpus", "reduce", "emulate_gpus",
             "processes", "advise", "thread_placement")
AXES = ("strategy", "scenario", "transfer", "batch", "hidden", "epochs", "gemm",
        "depth", "copy_streams", "epoch_launch", "launch_form", "profile", "fused") \
    + STREAM_AXES + ("cpus",) + DATA_AXES
# Axes the runner applies itself rather than passing to `memstrat train`: cpus = "all" (the
# default: no restriction) or a CPU list for `taskset -c` (e.g. "0", "0-3"), the process and
# every thread it starts confined to those cores.
RUNNER_AXES = {"cpus": {"name": "cpus", "kind": "text", "default": "all"}}
AXIS_ALIASES = {"copy-streams": "copy_streams", "streams": "copy_streams",
                "epoch-launch": "epoch_launch", "launch-form": "launch_form"}
# Axes a cell passes to memstrat only when they differ from the option's default (a cell holds
# None for the default, so the keys of matrices without these axes stay what they were). A
# matrix that sets such an axis must not set the same option in extra_args as well.
# --epoch-launch is the older spelling of --launch-form (on = auto, off = per-batch): the two
# axes are one option, so a matrix sets at most one of them, and neither beside the other
# spelling in extra_args.
AXIS_FLAGS = {"epoch_launch": ("--epoch-launch", "--launch-form"),
              "launch_form": ("--launch-form", "--epoch-launch"),
              "profile": ("--profile", "--no-profile"), "fused": ("--fused",), "cpus": (),
              **{a: ("--" + a.replace("_", "-"),) for a in DATA_AXES}}
EPOCH_LAUNCH_FORMS = {"on": None, "off": "per-batch"}  # --epoch-launch X = --launch-form Y
# DATA_AXES -> the cell key's part where the axis is not memstrat's default
DATA_KEY_PARTS = {"augment_device": "aug-{}", "replicate": "rep{}", "device_budget": "budget{:g}g",
                  "gpus": "gpus{}", "reduce": "reduce-{}", "emulate_gpus": "emu{}",
                  "processes": "procs-{}", "advise": "advise-{}",
                  "thread_placement": "threads-{}"}
# DATA_AXES -> the record's config key (config_stub of a cell that wrote no record): the axis's
# own name but for the budget
DATA_RECORD_KEYS = {**{a: a for a in DATA_AXES}, "device_budget": "device_budget_gib"}
# The step the kernel forms need (`memstrat describe`: launch_forms[].needs_step) and the rule
# by which a cell takes it (experiments/core/step_choice.cpp): --fused on takes it only up to
# batch x hidden = SINGLE_LAUNCH_MAX_WORK (kSingleLaunchMaxWork, experiments/core/mlp_config.h)
# and never for a strategy whose batches are read in place from host memory; --fused single
# takes it at any size; lt and off never; nor --tf32, --gemm tiled, or more than one hidden
# layer.
SINGLE_LAUNCH = "single-launch"
SINGLE_LAUNCH_MAX_WORK = 262144
# [[exclude]] keys besides the axes: "repeat" (0-based), e.g. to profile only repeat 0.
RULE_KEYS = AXES + ("repeat",)
RUN_KEYS = ("repeats", "seed", "vary_seed")
TOP_KEYS = ("name", "description", "axes", "exclude", "extra_args")

ORDERS = ("shuffled", "sequential")

# A matrix's name goes into job names and generated shell scripts: letters, digits, ".", "_"
# and "-" only.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Cells a matrix may expand to (before exclusions) unless the caller allows more
# (run_matrix.py --allow-large): a typo such as repeats = 1000000 is refused at once instead of
# expanding for minutes.
MAX_CELLS = 100_000


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
    launch_form: str | None = None   # --launch-form; None: auto (the default), not passed
    profile: bool | None = None      # --profile / --no-profile; None: memstrat's default
    workers: int | None = None       # --workers, --prefetch, --augment: stream cells only
    prefetch: int | None = None
    augment: str | None = None
    fused: str | None = None         # --fused; None: memstrat's default, not passed
    cpus: str | None = None          # taskset -c CPUS around the process; None: no restriction
    # DATA_AXES: None for memstrat's default (not passed); reduce and processes only where
    # gpus > 1
    augment_device: str | None = None    # --augment-device
    replicate: int | None = None         # --replicate K
    device_budget: float | None = None   # --device-budget GiB
    gpus: int | None = None              # --gpus N
    reduce: str | None = None            # --reduce
    emulate_gpus: int | None = None      # --emulate-gpus N
    processes: str | None = None         # --processes (per-gpu: memstrat starts one per GPU)
    advise: str | None = None            # --advise HINTS (um-advise's own option)
    thread_placement: str | None = None  # --thread-placement (static, one GPU)

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
        if self.launch_form is not None:
            parts.append(f"launch-{self.launch_form}")
        if self.profile is not None:
            parts.append("profile" if self.profile else "noprofile")
        if self.fused is not None:
            parts.append(f"fused-{self.fused}")
        if self.cpus is not None:
            parts.append("cpus" + self.cpus.replace(",", "+"))
        # (a list of hints is comma-separated: "+" keeps the key one word, as for cpus)
        parts += [DATA_KEY_PARTS[axis].format(getattr(self, axis)).replace(",", "+")
                  for axis in DATA_AXES if getattr(self, axis) is not None]
        parts += [f"seed{self.seed}", f"r{self.repeat}"]
        if self.extra_args:
            digest = hashlib.sha1("\0".join(self.extra_args).encode()).hexdigest()[:8]
            parts.append(f"x{digest}")
        if self.nsys:
            parts.append("nsys")
        return "_".join(parts)

    def axis_value(self, axis: str) -> Any:
        return getattr(self, axis)

    @property
    def gpu_count(self) -> int:
        """The GPUs the cell trains on (--gpus N; 1 where the axis is not given)."""
        return self.gpus or 1

    @property
    def several_gpus(self) -> bool:
        """Whether the cell trains on several GPUs (--gpus N > 1)."""
        return self.gpu_count > 1

    @property
    def asked_form(self) -> str | None:
        """The launch form the cell asks for by name (--launch-form X, or --epoch-launch off:
        per-batch); None for auto."""
        if self.launch_form is not None:
            return self.launch_form
        return EPOCH_LAUNCH_FORMS.get(self.epoch_launch) if self.epoch_launch else None

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
        if self.launch_form is not None:
            args += ["--launch-form", self.launch_form]
        if self.profile is not None:
            args.append("--profile" if self.profile else "--no-profile")
        if self.fused is not None:
            args += ["--fused", self.fused]
        for axis in DATA_AXES:
            value = getattr(self, axis)
            if value is not None:
                args += [AXIS_FLAGS[axis][0], f"{value:g}" if axis == "device_budget"
                         else str(value)]
        return args + list(self.extra_args)

    def config_stub(self) -> dict[str, Any]:
        """The record's `config` as far as the runner knows it (for synthesized failures)."""
        return {"strategy": self.strategy, "scenario": self.scenario,
                "transfer": self.transfer, "batch": self.batch, "hidden": list(self.hidden),
                "epochs": self.epochs, "seed": self.seed, "gemm": self.gemm,
                "depth": self.depth, "streams": self.copy_streams, "workers": self.workers,
                "prefetch": self.prefetch, "augment": self.augment,
                "launch_form": self.asked_form or "auto", "run_tag": self.key,
                **{key: getattr(self, axis) for axis, key in DATA_RECORD_KEYS.items()
                   if getattr(self, axis) is not None}}


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
    # Cells memstrat cannot run, by what `memstrat describe` says (a launch form the strategy
    # does not run in the scenario, a kernel form with a step that cannot run it), with why:
    # never run, counted apart from the [[exclude]] rules'.
    not_runnable: list[tuple[Cell, str]] = dataclasses.field(default_factory=list)


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
    """Axis name -> its option in the description (copy_streams -> --copy-streams); an axis
    whose option the binary does not declare (an older memstrat) is left out."""
    by_name = {o["name"]: o for o in description["train_options"]}
    options = {}
    for a in AXES:
        option = RUNNER_AXES.get(a) or by_name.get("--" + a.replace("_", "-"))
        if option is not None:
            options[a] = option
    return options


def _step_refusal(cell: Cell, fused: Any, tf32: bool, in_host_memory: bool) -> str | None:
    """Why `cell` does not take the single-launch step (SINGLE_LAUNCH's rule), or None where it
    does or where only memstrat can tell (the shape: --fused single at a hidden size the step
    cannot hold is memstrat's to refuse)."""
    if fused == "off":
        return "--fused off takes the layer-by-layer step"
    if fused == "lt":
        return "--fused lt takes the cuBLASLt step"
    if len(cell.hidden) != 1:
        return "the single-launch step needs exactly one hidden layer"
    if cell.gemm != "cublas":
        return f"the single-launch step stands in for --gemm cublas only, not {cell.gemm}"
    if tf32:
        return "--tf32 asks for tensor-core GEMMs; the single-launch step is fp32 only"
    if fused != "on":
        return None
    if in_host_memory:
        return (f"{cell.strategy} reads its batches in place from host memory, where --fused "
                "on takes the layer-by-layer step (--fused single asks for the single-launch "
                "one)")
    work = cell.batch * cell.hidden[0]
    if work > SINGLE_LAUNCH_MAX_WORK:
        return (f"batch x hidden = {work} > {SINGLE_LAUNCH_MAX_WORK}, where --fused on takes "
                "the cuBLASLt step (--fused single asks for the single-launch one)")
    return None


class _Runnable:
    """What `memstrat describe` declares a strategy runs, asked cell by cell: `refusal(cell)` is
    why memstrat cannot run the cell, or None. Declared per strategy and scenario: the launch
    forms, --augment-device gpu and --gpus N > 1, and where --thread-placement runs; a
    description without one of these (an older memstrat) refuses nothing by it. Auto is refused
    only where the strategy runs no form at all in the scenario; elsewhere memstrat falls back
    to a form the strategy and the step allow. Other combinations memstrat refuses when the
    cell runs (exit 2: "rejected")."""

    def __init__(self, description: dict[str, Any], extra: dict[str, Any]):
        self.strategies = {s["name"]: s for s in description["strategies"]}
        # Where --thread-placement other than os runs: {"scenarios": [...], "several_gpus": bool}.
        self.thread_placement = description.get("thread_placement_runs")
        self.needs = {f["name"]: f.get("needs_step")
                      for f in description.get("launch_forms", ())}
        fused_default = next((o["default"] for o in description["train_options"]
                              if o["name"] == "--fused"), None)
        self.fused = extra.get("--fused", fused_default)
        self.tf32 = bool(extra.get("--tf32", False))
        # A form the extra arguments ask for (no axis sets one then).
        form = extra.get("--launch-form")
        self.extra_form = (form if form not in (None, "auto")
                           else EPOCH_LAUNCH_FORMS.get(extra.get("--epoch-launch", "on")))

    def refusal(self, cell: Cell) -> str | None:
        form = cell.asked_form or self.extra_form
        entry = self.strategies[cell.strategy]
        gpu_augment = entry.get("augment_device_gpu")
        if cell.augment_device == "gpu" and gpu_augment is not None and \
                cell.scenario not in gpu_augment:
            return (f"{cell.strategy} takes --augment-device gpu "
                    + (f"in {', '.join(gpu_augment)} only" if gpu_augment else "in no scenario")
                    + f", not in {cell.scenario}")
        several = entry.get("several_gpus")
        if cell.several_gpus and several is not None and \
                cell.scenario not in several:
            return (f"{cell.strategy} runs on several GPUs "
                    + (f"in {', '.join(several)} only" if several else "in no scenario yet")
                    + f", not in {cell.scenario} (--emulate-gpus runs every strategy on one GPU)")
        placed = self.thread_placement
        if cell.thread_placement not in (None, "os") and placed is not None and \
                (cell.scenario not in placed["scenarios"] or
                 (cell.several_gpus and not placed["several_gpus"])):
            return (f"--thread-placement {cell.thread_placement} runs in "
                    + (", ".join(placed["scenarios"]) or "no scenario")
                    + ("" if placed["several_gpus"] else " on one GPU")
                    + f", not in {cell.scenario}"
                    + (" on several GPUs" if cell.several_gpus else ""))
        if cell.several_gpus and cell.augment_device == "gpu":
            return ("several GPUs augment on the host (--gpus N with --augment-device gpu is "
                    "refused; --emulate-gpus runs it on one GPU)")
        if cell.several_gpus and cell.scenario == "stream" and cell.augment == "none":
            return ("several GPUs run the stream scenario with host workers (--gpus N with "
                    "--augment none is refused; --emulate-gpus runs it on one GPU)")
        forms = (entry.get("launch_forms") or {}).get(cell.scenario)
        if forms is None:
            return None
        if not forms:  # not even auto: the strategy does not run in the scenario
            return f"{cell.strategy} runs no launch form in the {cell.scenario} scenario"
        if form is None:
            return None
        if form not in forms:
            return f"{cell.strategy} runs only {', '.join(forms)} in the {cell.scenario} scenario"
        if self.needs.get(form) == SINGLE_LAUNCH:
            why = _step_refusal(cell, cell.fused or self.fused, self.tf32,
                                bool(entry.get("batch_in_host_memory")))
            if why:
                needing = [f for f, step in self.needs.items() if step == SINGLE_LAUNCH]
                return f"{' and '.join(needing)} need the single-launch step: {why}"
        return None


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
                 option: dict[str, Any], same_as: Sequence[str] = ()) -> list[Any]:
    """`same_as`: the strategies "all" leaves out (describe's one_gpu_as: a data path across
    GPUs that is another strategy's on one GPU, so it would repeat that strategy's cells); a
    matrix that names one runs it."""
    values = _as_list(raw)
    if not values:
        raise MatrixError(f"{where}: the axis is empty")
    out: list[Any] = []
    for v in values:
        if axis == "strategy":
            if v == "all":
                out.extend(s for s in strategies if s not in out and s not in same_as)
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
            lo, hi = option.get("min"), option.get("max")  # per layer, where describe says
            if any((lo is not None and h < lo) or (hi is not None and h > hi) for h in v):
                raise MatrixError(f"{where}: hidden sizes must be in {lo or 1:g}.."
                                  f"{hi if hi is not None else math.inf:g} ({option['name']}), "
                                  f"got {v}")
        elif axis == "device_budget":
            if v == "none":
                v = None
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise MatrixError(f"{where}: a device budget is a number of GiB or \"none\", "
                                  f"got {v!r}")
            else:
                problem = in_range(option, float(v))
                if problem:
                    raise MatrixError(f"{where}: {v!r} {problem} ({option['name']})")
                v = float(v)
        elif option["kind"] == "hints":
            problem = value_problem(option, v) if isinstance(v, str) else "not a string"
            if problem:
                raise MatrixError(f"{where}: {v!r}: {problem} ({option['name']})")
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


def _cell_count(axes: dict[str, list[Any]], strategy_options: dict[str, set[str]],
                repeats: int) -> int:
    """The cells the axes expand to before exclusions, counted without expanding them: an
    axis a cell does not read (depth and copy_streams for the strategies without them, the
    stream axes outside the stream scenario) collapses to one value. (reduce, which collapses
    on one GPU, is counted whole, as is processes: a bound, which is what the limit needs.)"""
    per_repeat = 0
    for strategy in axes["strategy"]:
        for scenario in axes["scenario"]:
            n = 1
            for axis in AXES[2:]:
                if (axis in OWN_AXES and OWN_AXES[axis] not in strategy_options[strategy]) or \
                        (axis in STREAM_AXES and scenario != STREAM_SCENARIO):
                    continue
                n *= len(axes[axis])
            per_repeat += n
    return per_repeat * repeats


def _matrix_name(doc: dict[str, Any], path: Path) -> str:
    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        given = "name" if "name" in doc else "the file name (the default name)"
        raise MatrixError(f"{path}: {given} {name!r} is not a matrix name: letters, digits, "
                          "'.', '_' and '-' only (it names Slurm jobs and goes into scripts); "
                          "set name = \"...\" in the file")
    return name


def _check_extra_args(path: Path, file_extra: Sequence[str], cli_extra: Sequence[str],
                      description: dict[str, Any]) -> None:
    """The extra arguments, checked against describe before any cell runs."""
    given: dict[str, str] = {}
    for where, args in ((f"{path}: extra_args", file_extra), ("--extra-args", cli_extra)):
        try:
            for option in check_train_args(args, description):
                if option in given:
                    raise ValueError(f"{option} is also in {given[option]}")
                given[option] = where
        except ValueError as e:
            raise MatrixError(f"{where}: {e}") from None


def load_matrix(path: str | Path, description: dict[str, Any],
                extra_args: Sequence[str] = (), nsys: bool = False,
                max_cells: int | None = MAX_CELLS) -> Matrix:
    """Parse and expand a matrix file against `description` (`memstrat describe --json`);
    more than `max_cells` cells (None: no limit) is an error. Raises MatrixError with a
    readable message."""
    path = Path(path)
    strategies = [s["name"] for s in description["strategies"]]
    same_as = [s["name"] for s in description["strategies"] if s.get("one_gpu_as")]
    # strategy -> the options it reads ("--depth", ...): where its own axes apply
    strategy_options = {s["name"]: set(s.get("options", ())) for s in description["strategies"]}
    options = _axis_options(description)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise MatrixError(f"{path}: no such matrix file") from None
    except IsADirectoryError:
        raise MatrixError(f"{path}: a directory, not a matrix file") from None
    except OSError as e:
        raise MatrixError(f"{path}: cannot read the matrix file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise MatrixError(f"{path}: not UTF-8 text (byte {e.start}); a matrix file is TOML, "
                          "which is UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"{path}: not valid TOML: {e}") from None

    for key in doc:
        if key not in TOP_KEYS:
            raise MatrixError(f"{path}: unknown top-level key {key!r} "
                              f"(allowed: {', '.join(TOP_KEYS)})")
    name = _matrix_name(doc, path)
    axes_doc = doc.get("axes")
    if not isinstance(axes_doc, dict):
        raise MatrixError(f"{path}: missing the [axes] table")

    axes: dict[str, list[Any]] = {}
    run: dict[str, Any] = {"repeats": 1, "seed": 1, "vary_seed": False}
    for raw_key, raw in axes_doc.items():
        key = AXIS_ALIASES.get(raw_key, raw_key)
        where = f"{path}: axes.{raw_key}"
        if key in AXES and key not in options:
            raise MatrixError(f"{where}: this memstrat declares no --{key.replace('_', '-')} "
                              "(`memstrat describe`); build the current one")
        if key in AXES:
            axes[key] = _axis_values(key, raw, where, strategies, options[key], same_as)
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
    if {"epoch_launch", "launch_form"} <= given_axes:
        raise MatrixError(f"{path}: axes.epoch_launch and axes.launch_form both set the launch "
                          "form (--epoch-launch is the older spelling of --launch-form: on = "
                          "auto, off = per-batch); keep launch_form")
    for axis in AXES[1:]:  # every axis but strategy defaults to its option's default
        if axis not in options:  # not declared by this memstrat: never passed
            axes[axis] = [None]
            continue
        default = options[axis]["default"]
        axes.setdefault(axis, [_parse_hidden(default, axis) if axis == "hidden" else default])
    for axis in AXIS_FLAGS:  # the option's default is not passed: None in the cell
        default = options.get(axis, {}).get("default")
        axes[axis] = [None if v == default else v for v in axes[axis]]

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
                default = options.get(key, {}).get("default")
                norm[key] = [None if v == default else v for v in norm[key]]
        rules.append(norm)

    file_extra = doc.get("extra_args", [])
    if isinstance(file_extra, str):
        try:
            file_extra = shlex.split(file_extra)
        except ValueError as e:  # an unclosed quote
            raise MatrixError(f"{path}: extra_args: {e}") from None
    if not isinstance(file_extra, list) or not all(isinstance(a, str) for a in file_extra):
        raise MatrixError(f"{path}: extra_args must be a string or a list of strings")
    _check_extra_args(path, file_extra, extra_args, description)
    all_extra = tuple(file_extra) + tuple(extra_args)
    launch_forms = _Runnable(description, train_arg_values(all_extra, description))
    for axis, flags in AXIS_FLAGS.items():
        given = [a for a in all_extra if a.split("=", 1)[0] in flags]
        if axis in given_axes and given:
            raise MatrixError(f"{path}: axes.{axis} and the extra arguments "
                              f"({' '.join(given)}) both set {'/'.join(flags)}; set it in "
                              "one place")

    stream_flags = [a for a in all_extra
                    if a.split("=", 1)[0] in ("--" + x for x in STREAM_AXES)]
    if stream_flags:
        raise MatrixError(f"{path}: the extra arguments ({' '.join(stream_flags)}) set the "
                          f"stream scenario's options: the runner passes them to each stream "
                          f"cell from the axes {', '.join(STREAM_AXES)} (and memstrat refuses "
                          "them in the other scenarios); use the axes instead")
    count = _cell_count(axes, strategy_options, run["repeats"])
    if max_cells is not None and count > max_cells:
        raise MatrixError(f"{path}: expands to {count:,} cells (before exclusions), more than "
                          f"the limit of {max_cells:,}; check repeats and the axes, or pass "
                          "--allow-large to run it")

    cells: list[Cell] = []
    seen: set[Cell] = set()
    excluded = collapsed = 0
    not_runnable: list[tuple[Cell, str]] = []
    rule_hits = [0] * len(rules)
    # Repeats outermost: every configuration runs once before any runs twice, so slow
    # drift (clocks, temperature) spreads over all configurations instead of a few.
    for rep in range(run["repeats"]):
        seed = run["seed"] + (rep if run["vary_seed"] else 0)
        for (strategy, scenario, transfer, batch, hidden, epochs, gemm, depth, streams,
             epoch_launch, launch_form, profile, fused, workers, prefetch, augment, cpus,
             augment_device, replicate, device_budget, gpus, reduce, emulate_gpus,
             processes, advise, thread_placement) in \
                itertools.product(*(axes[a] for a in AXES)):
            reads = strategy_options[strategy]
            stream = scenario == STREAM_SCENARIO
            cell = Cell(strategy=strategy, scenario=scenario, transfer=transfer, batch=batch,
                        hidden=hidden, epochs=epochs, gemm=gemm,
                        depth=depth if OWN_AXES["depth"] in reads else None,
                        copy_streams=streams if OWN_AXES["copy_streams"] in reads else None,
                        seed=seed, repeat=rep, extra_args=all_extra, nsys=nsys,
                        epoch_launch=epoch_launch, launch_form=launch_form, profile=profile,
                        workers=workers if stream else None,
                        prefetch=prefetch if stream else None,
                        augment=augment if stream else None, fused=fused, cpus=cpus,
                        augment_device=augment_device, replicate=replicate,
                        device_budget=device_budget, gpus=gpus,
                        # the gradients of one GPU are not combined, and one GPU is one
                        # process: reduce and processes collapse there
                        reduce=reduce if gpus is not None else None,
                        emulate_gpus=emulate_gpus,
                        processes=processes if gpus is not None else None,
                        advise=advise if OWN_AXES["advise"] in reads else None,
                        thread_placement=thread_placement)
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
            why = launch_forms.refusal(cell)
            if why:
                not_runnable.append((cell, why))
                continue
            cells.append(cell)
    for i, hits in enumerate(rule_hits):
        if hits == 0:
            print(f"warning: {path}: exclude #{i + 1} matches no cell", file=sys.stderr)
    return Matrix(path=path, name=name, description=str(doc.get("description", "")),
                  cells=cells, excluded=excluded, collapsed=collapsed, extra_args=all_extra,
                  seed=run["seed"], schema_version=description["record_schema_version"],
                  not_runnable=not_runnable)


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
