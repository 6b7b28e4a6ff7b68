"""Reading JSON Lines record files: one JSON value per line, read the way a crash leaves them.

- A torn last line (no newline at its end and not valid JSON or UTF-8: a write cut short by a
  full disk or a kill) is skipped with a warning naming file and line; a damaged line anywhere
  else, a line that is not UTF-8, an unreadable file are RecordErrors naming file and line.
- drop_duplicates: a record read twice (the same ``run_id`` and the same content: a file given
  twice, a line appended twice) counts once, with one warning; two different records under one
  ``run_id`` are a RecordError naming both.

Lines are decoded by orjson where it is installed (about twice as fast as the json module, and
it shares one copy of each key among all records); a line it does not take (it reads strict
JSON only: no NaN or Infinity, no lone surrogate) is decoded again by the json module, whose
answer and error messages are the ones that count. One difference remains: an integer beyond
64 bits comes back from orjson as a float of the same value.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

try:  # optional: the same values, decoded faster
    import orjson
except ImportError:  # then the json module decodes every line: slower, the same values
    orjson = None

TORN_LINE = "torn last line, ignored; the matrix runner moves it aside on resume"


class RecordError(ValueError):
    """A record file or line that cannot be used; str() is 'file:line: problem'."""

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


def warn(message: str, notes: list[str] | None = None) -> None:
    """A problem the analysis works around: on stderr, and appended to `notes` when given."""
    print(f"warning: {message}", file=sys.stderr)
    if notes is not None:
        notes.append(message)


def read_lines(path: str | Path, missing: str = "no such file",
               notes: list[str] | None = None) -> Iterator[tuple[str, Any, bool]]:
    """(source "file:line", decoded value, strict) for every non-blank line of a JSON Lines
    file; `strict` is True where orjson decoded the line, so it holds no NaN or infinity.

    A missing or unreadable file, a line that is not UTF-8 or not one complete JSON value is a
    RecordError naming the file (and line); `missing` is the problem reported when the file
    does not exist. A torn last line is skipped with a warning (`notes` collects it).
    """
    path = Path(path)
    if not path.is_file():
        raise RecordError(str(path), missing)
    try:
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if orjson is not None:
                    try:
                        yield f"{path}:{lineno}", orjson.loads(raw), True
                        continue
                    except orjson.JSONDecodeError:
                        pass                        # blank, damaged or not strict JSON
                source = f"{path}:{lineno}"
                torn = not raw.endswith(b"\n")     # only the last line can end without one
                try:
                    text = raw.decode("utf-8")
                    if not text.strip():
                        continue
                    value = json.loads(text)
                except UnicodeDecodeError as e:
                    if torn:
                        warn(f"{source}: {TORN_LINE}", notes)
                        continue
                    raise RecordError(source, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at "
                                              f"column {e.start + 1})") from None
                except json.JSONDecodeError as e:
                    if torn:
                        warn(f"{source}: {TORN_LINE}", notes)
                        continue
                    raise RecordError(source, f"not valid JSON ({e.msg} at column {e.colno}); "
                                              "each line must be one complete record") from None
                yield source, value, False
    except OSError as e:
        raise RecordError(str(path), f"cannot read: {e.strerror or e}") from None


def read_jsonl(path: str | Path, missing: str = "no such file",
               notes: list[str] | None = None) -> Iterator[tuple[str, Any]]:
    """(source "file:line", decoded value) for every non-blank line (see read_lines)."""
    for source, value, _ in read_lines(path, missing, notes):
        yield source, value


def drop_duplicates(records: Iterable[Any], notes: list[str] | None = None,
                    source_of: Callable[[dict], str] | None = None) -> list[Any]:
    """`records` without the repeats of a run_id: an identical copy (the same run read twice)
    is dropped, with one warning that counts them; two different records under one run_id are
    a RecordError naming both (where each came from: its _source, or `source_of(record)`).
    Values without a string run_id are all kept."""
    where = source_of or (lambda rec: str(rec.get("_source", "?")))
    seen: dict[str, dict] = {}
    out: list[Any] = []
    dropped = 0
    for rec in records:
        run_id = rec.get("run_id") if isinstance(rec, dict) else None
        if not isinstance(run_id, str):
            out.append(rec)
            continue
        first = seen.setdefault(run_id, rec)
        if first is rec:
            out.append(rec)
        elif _content(first) == _content(rec):
            dropped += 1
        else:
            raise RecordError(where(rec), f"run_id {run_id!r} also names a different record "
                                          f"at {where(first)}: each run must have its own run_id")
    if dropped:
        warn(f"{dropped} duplicate record{'s' if dropped != 1 else ''} (same run_id) ignored",
             notes)
    return out


def _content(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k != "_source"}
