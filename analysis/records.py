"""Load and validate memstrat run records (JSON Lines).

Every record is validated against docs/schema/run_record.schema.json (the format's one
statement; docs/results_schema.md explains it), plus what a schema cannot say (epochs
numbered 1..N, finite numbers). Every problem is raised as a RecordError that names the file
and line and says what is wrong, e.g. ``results/x/records.jsonl:12: schema_version 0 is not
supported ...``, ``...:3: missing required field 'config.batch'``.
Records are returned as plain dicts (the JSON as written) with two additions:
``_source`` ("file:line") and ``config.hidden`` normalised to a list of ints.

Reading (analysis/jsonl.py) forgives two things a crash or a careless copy leaves, and says so
on stderr: a torn last line (no newline at its end and not valid JSON: a write cut short) is
skipped, and a record read twice (the same ``run_id`` and the same content: a file given twice,
a line appended twice) counts once. A damaged line anywhere else, and two different records
under one ``run_id``, stay errors.

Validation is fast where jsonschema-rs (a compiled validator of the same schema) is installed:
it only answers valid or not, and every record it does not accept is validated again by
jsonschema, whose first error is the one reported; without it jsonschema validates everything.
"""
from __future__ import annotations

import functools
import gc
import json
import math
from pathlib import Path
from typing import Any, Iterable

import jsonschema

from analysis.jsonl import (TORN_LINE, RecordError, drop_duplicates,  # noqa: F401 (re-exported)
                            read_jsonl, read_lines, warn)

try:  # optional: the same answers, about 200 times faster
    import jsonschema_rs
except ImportError:  # then jsonschema validates every record: slower, the same answers
    jsonschema_rs = None

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"
RECORDS_DIR = "records"     # a results set keeps its record files here
RUN_KIND = "run"

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "schema" / "run_record.schema.json"


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    """The validator of docs/schema/run_record.schema.json: the one statement of the format."""
    return jsonschema.Draft202012Validator(_schema())


@functools.lru_cache(maxsize=1)
def _fast_validator() -> Any:
    """jsonschema-rs's validator of the same schema, or None where it is not installed."""
    return None if jsonschema_rs is None else jsonschema_rs.Draft202012Validator(_schema())


def _fast_valid(rec: dict) -> bool:
    """True only when the compiled validator accepts `rec`; False means 'ask jsonschema'."""
    fast = _fast_validator()
    if fast is None:
        return False
    try:
        return bool(fast.is_valid(rec))
    except (ValueError, TypeError, OverflowError):   # a value it cannot convert
        return False


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type ("null", "boolean", "number", ...), for errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def _where(path: Iterable[Any]) -> str:
    """deque(['epochs', 1, 'wall_ms']) -> 'epochs[1].wall_ms'."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _expected(schema: Any) -> str:
    types = schema if isinstance(schema, list) else [schema]
    return " or ".join(t for t in types if t != "null")


def _problem(err: jsonschema.ValidationError) -> str:
    """One schema violation in the words of a person reading the file."""
    where = _where(err.absolute_path)
    value = err.instance
    if err.validator == "required":
        missing = next(k for k in err.validator_value if k not in value)
        return f"missing required field '{where + '.' if where else ''}{missing}'"
    if err.validator == "type":
        if value is None:
            return f"field '{where}' is null; expected {_expected(err.validator_value)}"
        return (f"field '{where}' is {json_type(value)} {value!r:.60}; expected "
                f"{_expected(err.validator_value)}")
    if err.validator == "minItems" and where == "epochs":
        return "field 'epochs' is empty in a record with status ok"
    if err.validator in ("minimum", "exclusiveMinimum"):
        return f"field '{where}' is {value!r}; expected a value >= {err.validator_value}"
    if err.validator in ("maximum", "exclusiveMaximum"):
        return f"field '{where}' is {value!r}; expected a value <= {err.validator_value:g}"
    if where == "config.hidden":
        return f"config.hidden {value!r} is not a list of layer sizes"
    return f"field '{where}': {err.message}"


def _first_error(rec: dict) -> jsonschema.ValidationError | None:
    """The violation that comes first in the record (deterministic), or None."""
    errors = list(_validator().iter_errors(rec))
    if not errors:
        return None
    # A conditional's own error (if/then) is reported through the violations inside it.
    leaves = [e for e in errors if e.validator not in ("if", "then", "else")]
    for e in list(errors):
        if e.validator in ("then", "else"):
            leaves.extend(e.context)
    return min(leaves or errors, key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))


def _all_finite(value: Any) -> bool:
    """No NaN or infinity anywhere in `value` (the quick check; _non_finite says where)."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
        elif t is float and not math.isfinite(v):
            return False
    return True


def _non_finite(value: Any, path: tuple = ()) -> str | None:
    """Where a NaN or infinity hides in `value` (JSON cannot hold them; Python's json reads them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return _where(path)
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for k, v in items:
        found = _non_finite(v, path + (k,))
        if found is not None:
            return found
    return None


def _normalise_hidden(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        return [int(p) for p in value.replace("x", ",").split(",") if p.strip()]
    return list(value)


def validate_record(rec: Any, source: str, finite: bool = False) -> dict[str, Any]:
    """Check one decoded record; returns it (hidden normalised, _source added). finite: the
    decoder already refused NaN and infinities (jsonl.read_lines' strict)."""
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
            f"schema_version {SCHEMA_VERSION} only (docs/schema/run_record.schema.json); re-run "
            f"with a current memstrat or use the analysis/ that matches the memstrat that wrote it")
    status = rec.get("status")
    if status not in ("ok", "failed"):
        raise RecordError(source, f"field 'status' must be \"ok\" or \"failed\", got "
                                  f"{status!r}")
    if not _fast_valid(rec):
        err = _first_error(rec)
        if err is not None:
            raise RecordError(source, _problem(err))
    if not finite and not _all_finite(rec):
        raise RecordError(source, f"field '{_non_finite(rec)}' is not a finite number")
    cfg = rec["config"]
    if cfg.get("hidden") is not None:
        cfg["hidden"] = _normalise_hidden(cfg["hidden"])
    if status == "failed":
        # A failed run may stop anywhere: only its identity and config are required.
        if not isinstance(rec.get("epochs"), list):
            rec["epochs"] = []
        if not isinstance(rec.get("env"), dict):
            rec["env"] = {}
    else:
        numbers = [ep["epoch"] for ep in rec["epochs"]]
        if numbers != list(range(1, len(numbers) + 1)):
            raise RecordError(source, f"epochs must be numbered 1..N in order, got {numbers}")
    rec["_source"] = source
    return rec


def record_kind(rec: dict[str, Any]) -> str:
    """'run', 'primitive', 'baseline:<framework>' or the record's own 'record' value."""
    kind = rec.get("record")
    if kind is not None:
        return str(kind)
    cfg = rec.get("config")
    framework = cfg.get("framework") if isinstance(cfg, dict) else None
    return RUN_KIND if framework in (None, "memstrat") else f"baseline:{framework}"


def load_file(path: str | Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The memstrat run records of one JSON Lines file, validated; blank lines, a torn last
    line and records of other kinds (transfer primitives, baseline frameworks) are skipped."""
    return [validate_record(rec, source, strict)
            for source, rec, strict in read_lines(path, notes=notes)
            if not isinstance(rec, dict) or record_kind(rec) == RUN_KIND]


def resolve_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    """Results folders (their records.jsonl, else every *.jsonl; a results set's records/
    folder) and files -> file list."""
    files: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir() and (p / RECORDS_DIR).is_dir():      # a results set
            p = p / RECORDS_DIR
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


def load_records(inputs: Iterable[str | Path] | str | Path,
                 notes: list[str] | None = None) -> list[dict[str, Any]]:
    """Load and validate every record from folders and/or .jsonl files (ok and failed), each
    run once (drop_duplicates); what was skipped is warned about and added to `notes`."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    records: list[dict[str, Any]] = []
    # Decoding creates millions of small objects and no reference cycle: the cyclic garbage
    # collector, triggered by every few hundred allocations, would walk all of them again and
    # again (half the time of reading 100,000 records). It is paused while reading, and what
    # was read is moved out of its reach (gc.freeze) for the rest of the run.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for f in resolve_inputs(inputs):
            records.extend(load_file(f, notes))
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    return drop_duplicates(records, notes)


def ok_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "ok"]


def failed_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "failed"]
