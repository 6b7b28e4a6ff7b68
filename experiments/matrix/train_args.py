"""A matrix's extra `memstrat train` arguments (its extra_args, run_matrix.py --extra-args)
checked against `memstrat describe --json` before any cell runs: an unknown option, a value
out of its declared range or choices, or an option the runner or the axes already pass would
otherwise fail every cell of the matrix, one process at a time."""
from __future__ import annotations

import math
from typing import Any, Sequence

# Options every cell already passes: the runner's own, and the axes (depth and copy-streams for
# the strategies that read them, the stream scenario's options for its cells).
RUNNER_OPTIONS = {"--json": "the runner writes each cell's record itself",
                  "--run-tag": "the runner tags each record with its cell's key"}
AXIS_OPTIONS = {"--strategy": "strategy", "--scenario": "scenario", "--transfer": "transfer",
                "--batch": "batch", "--hidden": "hidden", "--epochs": "epochs",
                "--gemm": "gemm", "--seed": "seed", "--depth": "depth",
                "--copy-streams": "copy_streams"}


def check_train_args(args: Sequence[str], description: dict[str, Any]) -> list[str]:
    """Check `args` as `memstrat train` would read them; returns the options they set (by
    their long names). Raises ValueError with a message naming the argument."""
    return list(train_arg_values(args, description))


def train_arg_values(args: Sequence[str], description: dict[str, Any]) -> dict[str, Any]:
    """`args` checked as check_train_args does, as {long option name: value}: the value as
    written for an option that takes one, True for a flag, False for its negation
    (--no-profile). Raises ValueError with a message naming the argument."""
    spellings: dict[str, dict[str, Any]] = {}
    for o in description["train_options"]:
        for name in (o["name"], *o.get("aliases", ()), *o.get("negations", ())):
            spellings[name] = o
    given: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            has_value = bool(eq)
        elif arg.startswith("-") and len(arg) >= 2:  # -b 256 or -b256
            name, value = arg[:2], arg[2:]
            has_value = bool(value)
        else:
            raise ValueError(f"{arg!r} is not an option (memstrat train takes options only)")
        opt = spellings.get(name)
        if opt is None:
            raise ValueError(f"unknown option {name}; `memstrat describe` lists the options of "
                             "`memstrat train`")
        long = opt["name"]
        if long in RUNNER_OPTIONS:
            raise ValueError(f"{name} is the runner's: {RUNNER_OPTIONS[long]}")
        if long in AXIS_OPTIONS:
            raise ValueError(f"{name} is set by the matrix for every cell: use "
                             f"axes.{AXIS_OPTIONS[long]} instead")
        if opt["kind"] == "flag":
            if has_value:
                raise ValueError(f"{name} takes no value")
            value = name not in opt.get("negations", ())
        else:
            if not has_value:
                if i + 1 >= len(args):
                    raise ValueError(f"{name} needs a value")
                i += 1
                value = args[i]
            problem = value_problem(opt, value)
            if problem:
                raise ValueError(f"{name} {value}: {problem}")
        if long in given:
            raise ValueError(f"{long} is given twice")
        given[long] = value
        i += 1
    return given


def in_range(opt: dict[str, Any], v: float) -> str | None:
    """What is wrong with the number `v` for `opt` by its declared bounds; None when nothing."""
    lo, lo_open, hi = opt.get("min"), opt.get("exclusive_min"), opt.get("max")
    if lo is not None and v < lo:
        return f"must be >= {lo:g}"
    if lo_open is not None and v <= lo_open:
        return f"must be > {lo_open:g}"
    if hi is not None and v > hi:
        return f"must be <= {hi:g}"
    return None


def value_problem(opt: dict[str, Any], value: str) -> str | None:
    """What is wrong with `value` for `opt` by its description; None when nothing is."""
    kind = opt["kind"]
    if kind == "choice":
        return None if value in opt["choices"] else f"not one of {', '.join(opt['choices'])}"
    if kind == "integer":
        try:
            return in_range(opt, int(value))
        except ValueError:
            return "not an integer"
    if kind == "number":
        try:
            v = float(value)
        except ValueError:
            return "not a number"
        return in_range(opt, v) if math.isfinite(v) else "not a finite number"
    if kind == "list":  # layer sizes: 256 or 512,256
        try:
            sizes = [int(p) for p in value.split(",")]
        except ValueError:
            return "not a comma-separated list of integers"
        return next((f"{s} {p}" for s in sizes if (p := in_range(opt, s))), None) or (
            "sizes must be positive" if any(s <= 0 for s in sizes) else None)
    if kind == "hints":
        hints = [h for h in value.split(",") if h]
        if not hints:
            return f"no hint: a comma-separated subset of {','.join(opt['choices'])}, or none"
        unknown = [h for h in hints if h not in opt["choices"]]
        if value != "none" and unknown:
            return (f"unknown {', '.join(unknown)}; a comma-separated subset of "
                    f"{','.join(opt['choices'])}, or none")
    return None
