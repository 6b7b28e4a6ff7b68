"""Load and validate memstrat run records (JSON Lines, docs/results_schema.md).

Every problem is raised as a RecordError that names the file and line and says what is
wrong, e.g. ``results/x/records.jsonl:12: schema_version 0 is not supported ...``.
Records are returned as plain dicts (the JSON as written) with two additions:
``_source`` ("file:line") and ``config.hidden`` normalised to a list of ints.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"

NUMBER = (int, float)


class RecordError(ValueError):
    """A record file or line that cannot be used; str() is 'file:line: problem'."""

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


# Field specs: name -> (allowed types, may be null). bool is never accepted as a number.
_TOP_OK = {
    "schema_version": ((int,), False),
    "run_id": ((str,), False),
    "started_at": ((str,), False),
    "status": ((str,), False),
    "env": ((dict,), False),
    "config": ((dict,), False),
    "epochs": ((list,), False),
    "summary": ((dict,), True),
    "final": ((dict,), True),
}
_CONFIG = {
    "strategy": ((str,), False),
    "scenario": ((str,), False),
    "transfer": ((str,), False),
    "batch": ((int,), False),
    "hidden": ((list, int, str), False),
    "epochs": ((int,), False),
    "seed": ((int,), False),
    "gemm": ((str,), False),
}
_CONFIG_OPTIONAL = {
    "depth": ((int,), True),
    "streams": ((int,), True),
    "run_tag": ((str,), True),
}
_EPOCH = {
    "epoch": ((int,), False),
    "wall_ms": (NUMBER, False),
    "gpu_ms": (NUMBER, False),
}
_EPOCH_OPTIONAL = {
    "host_ms": (NUMBER, True),
    "copy_ms": (NUMBER, True),
    "compute_ms": (NUMBER, True),
    "stall_ms": (NUMBER, True),
    "h2d_bytes": ((int,), True),
    "um_htod_bytes": ((int,), True),
    "um_dtoh_bytes": ((int,), True),
    "um_gpu_faults": ((int,), True),
    "um_cpu_faults": ((int,), True),
    "kernel_ms": (NUMBER, True),
    "memcpy_ms": (NUMBER, True),
    "api_calls": ((dict,), True),
    "train_loss": (NUMBER, True),
    "train_acc": (NUMBER, True),
    "test_acc": (NUMBER, True),
}
_ENV_OPTIONAL = {
    "gpu_name": ((str,), True),
    "driver_version": ((str,), True),
    "runtime_version": ((str,), True),
    "pcie_gen": ((int,), True),
    "pcie_width": ((int,), True),
    "git_sha": ((str,), True),
}


def _type_name(types: tuple[type, ...]) -> str:
    names = {int: "integer", float: "number", str: "string", dict: "object",
             list: "array", bool: "boolean"}
    if types == NUMBER:
        return "number"
    return " or ".join(names.get(t, t.__name__) for t in types)


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type ("null", "boolean", "number", ...), for errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def _check(obj: dict, specs: dict, where: str, source: str, required: bool) -> None:
    for key, (types, nullable) in specs.items():
        if key not in obj:
            if required:
                raise RecordError(source, f"missing required field '{where}{key}'")
            continue
        value = obj[key]
        if value is None:
            if nullable:
                continue
            raise RecordError(source, f"field '{where}{key}' is null; expected "
                                      f"{_type_name(types)}")
        ok = isinstance(value, types) and not isinstance(value, bool)
        if ok and isinstance(value, float) and not math.isfinite(value):
            raise RecordError(source, f"field '{where}{key}' is {value}; expected a finite "
                                      "number")
        if not ok:
            raise RecordError(source, f"field '{where}{key}' is {json_type(value)} "
                                      f"{value!r:.60}; expected {_type_name(types)}")


def _normalise_hidden(value: Any, source: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        layers = [value]
    elif isinstance(value, str):
        try:
            layers = [int(p) for p in value.replace("x", ",").split(",") if p.strip()]
        except ValueError:
            raise RecordError(source, f"config.hidden {value!r} is not a list of "
                                      "layer sizes") from None
    elif isinstance(value, list) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        layers = list(value)
    else:
        raise RecordError(source, f"config.hidden {value!r} is not a list of layer sizes")
    return layers


def validate_record(rec: Any, source: str) -> dict[str, Any]:
    """Check one decoded record; returns it (hidden normalised, _source added)."""
    if not isinstance(rec, dict):
        raise RecordError(source, f"a record must be a JSON object, got {json_type(rec)}")
    if "schema_version" not in rec:
        raise RecordError(source, "missing required field 'schema_version' (not a "
                                  "memstrat run record?)")
    version = rec["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecordError(source, f"schema_version must be an integer, got {version!r}")
    if version != SCHEMA_VERSION:
        raise RecordError(
            source,
            f"schema_version {version} is not supported: this analysis reads "
            f"schema_version {SCHEMA_VERSION} only (docs/results_schema.md); re-run with a "
            f"current memstrat or use the analysis/ that matches the memstrat that wrote it")
    status = rec.get("status")
    if status not in ("ok", "failed"):
        raise RecordError(source, f"field 'status' must be \"ok\" or \"failed\", got "
                                  f"{status!r}")
    if status == "failed":
        # A failed run may stop anywhere: only its identity and config are required.
        _check(rec, {k: _TOP_OK[k] for k in ("run_id", "config")}, "", source, True)
        cfg = rec["config"]
        _check(cfg, {"strategy": _CONFIG["strategy"]}, "config.", source, True)
        if "hidden" in cfg and cfg["hidden"] is not None:
            cfg["hidden"] = _normalise_hidden(cfg["hidden"], source)
        if not isinstance(rec.get("epochs"), list):
            rec["epochs"] = []
        if not isinstance(rec.get("env"), dict):
            rec["env"] = {}
        rec["_source"] = source
        return rec

    _check(rec, _TOP_OK, "", source, True)
    cfg = rec["config"]
    _check(cfg, _CONFIG, "config.", source, True)
    _check(cfg, _CONFIG_OPTIONAL, "config.", source, False)
    cfg["hidden"] = _normalise_hidden(cfg["hidden"], source)
    if cfg["batch"] <= 0 or cfg["epochs"] <= 0:
        raise RecordError(source, "config.batch and config.epochs must be positive")
    _check(rec["env"], _ENV_OPTIONAL, "env.", source, False)
    if not rec["epochs"]:
        raise RecordError(source, "field 'epochs' is empty in a record with status ok")
    for i, ep in enumerate(rec["epochs"]):
        where = f"epochs[{i}]."
        if not isinstance(ep, dict):
            raise RecordError(source, f"epochs[{i}] must be an object, got {json_type(ep)}")
        _check(ep, _EPOCH, where, source, True)
        _check(ep, _EPOCH_OPTIONAL, where, source, False)
        calls = ep.get("api_calls")
        if isinstance(calls, dict):
            for name, n in calls.items():
                if isinstance(n, bool) or not isinstance(n, int):
                    raise RecordError(source, f"epochs[{i}].api_calls.{name} is {n!r}; "
                                              "expected an integer count")
    numbers = [ep["epoch"] for ep in rec["epochs"]]
    if numbers != list(range(1, len(numbers) + 1)):
        raise RecordError(source, f"epochs must be numbered 1..N in order, got {numbers}")
    setup = rec.get("setup")
    if setup is not None and not isinstance(setup, dict):
        raise RecordError(source, f"field 'setup' is {json_type(setup)}; expected object")
    rec["_source"] = source
    return rec


def read_jsonl(path: str | Path, missing: str = "no such file"
               ) -> Iterator[tuple[str, Any]]:
    """(source "file:line", decoded value) for every non-blank line of a JSON Lines file.

    A missing file or a line that is not one complete JSON value is a RecordError naming the
    file (and line); `missing` is the problem reported when the file does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise RecordError(str(path), missing)
    with open(path, "r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            source = f"{path}:{lineno}"
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordError(source, f"not valid JSON ({e.msg} at column {e.colno}); "
                                          "each line must be one complete record") from None
            yield source, value


def load_file(path: str | Path) -> list[dict[str, Any]]:
    """All records of one JSON Lines file, validated; blank lines are skipped."""
    return [validate_record(rec, source) for source, rec in read_jsonl(path)]


def resolve_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    """Results folders (their records.jsonl, else every *.jsonl) and files -> file list."""
    files: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            main = p / RECORDS_FILE
            found = [main] if main.exists() else sorted(p.glob("*.jsonl"))
            if not found:
                raise RecordError(str(p), f"no {RECORDS_FILE} (or other *.jsonl) in this "
                                          "folder")
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            raise RecordError(str(p), "no such file or folder")
    return files


def load_records(inputs: Iterable[str | Path] | str | Path) -> list[dict[str, Any]]:
    """Load and validate every record from folders and/or .jsonl files (ok and failed)."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    records: list[dict[str, Any]] = []
    for f in resolve_inputs(inputs):
        records.extend(load_file(f))
    return records


def ok_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "ok"]


def failed_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "failed"]
