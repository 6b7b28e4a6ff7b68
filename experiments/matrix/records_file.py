"""The matrix runner's results folder: OUT/records.jsonl (which cells are recorded, all-or-nothing
appends, a torn last line set aside) and OUT/manifest.json (the run order and every
invocation)."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import fcntl
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any, BinaryIO, Sequence

from matrix_file import Cell, Matrix

RECORDS_FILE = "records.jsonl"
MANIFEST_FILE = "manifest.json"


# --------------------------------------------------------------------------------------
# Records file
# --------------------------------------------------------------------------------------
# A cell that memstrat refused to run: exit 2 (an option or input it rejects) or exit 3 (no
# GPU, or the strategy is waived on this one). Rerunning such a cell gives the same answer, so
# a resumed run skips it unless asked to retry (--retry-rejected). Its synthesized record's
# error starts with "run_matrix: " + REJECTED.
REJECTED = "rejected by memstrat"
REJECTIONS = {2: "a bad option or input", 3: "no GPU, or the strategy is waived on this one"}


def rejection(exit_code: int, said: str) -> str | None:
    """The error of a cell that exited with `exit_code` having said `said`, when that exit is
    memstrat's refusal; None otherwise."""
    if exit_code not in REJECTIONS:
        return None
    return f"{REJECTED} (exit {exit_code}: {REJECTIONS[exit_code]}): {said}"


@dataclasses.dataclass
class RecordedCells:
    """The run_tags of records.jsonl by what their records say."""
    ok: set[str]        # an ok record
    failed: set[str]    # only failed records, the last of them a failure worth retrying
    rejected: set[str]  # only failed records, the last of them memstrat's refusal (exit 2/3)


def recorded_tags(records_path: Path) -> RecordedCells:
    """Which cells records_path holds, by their config.run_tag.

    Unreadable lines are reported on stderr and ignored (the runner never writes them).
    """
    ok: set[str] = set()
    last_failure: dict[str, bool] = {}  # tag -> whether its last failed record is a refusal
    if not records_path.exists():
        return RecordedCells(ok, set(), set())
    with open(records_path, "r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                tag = rec["config"]["run_tag"]
                status = rec.get("status", "ok")
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                print(f"warning: {records_path}:{lineno}: not a record with config.run_tag; "
                      "ignored for restart", file=sys.stderr)
                continue
            if not isinstance(tag, str):
                continue
            if status == "ok":
                ok.add(tag)
            else:
                error = rec.get("error")
                last_failure[tag] = isinstance(error, str) and \
                    error.startswith("run_matrix: " + REJECTED)
    failed = {t for t, refused in last_failure.items() if not refused and t not in ok}
    rejected = {t for t, refused in last_failure.items() if refused and t not in ok}
    return RecordedCells(ok, failed, rejected)


def append_lines(records_path: Path, lines: Sequence[str]) -> None:
    """Append complete lines with one write, then fsync; serialised by a POSIX lock.

    All or nothing: when the write or the fsync fails (a full disk, a short write), the file
    is cut back to its size before the call and the error raised, so that no partial line
    stays behind. If the file does not end with a newline (a foreign partial line), a newline
    is written first so that our record stays on a line of its own.
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
            try:
                view = memoryview(data)
                while view:  # one write in practice; the loop only finishes a short write
                    n = os.write(fd, view)
                    if n <= 0:
                        raise OSError(errno.EIO, f"{records_path}: the write made no progress")
                    view = view[n:]
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, size)
                raise
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def repair_torn_tail(records_path: Path) -> str | None:
    """Move a torn last line of records_path (no final newline, or not a JSON object: a write
    cut short by a crash or a foreign writer) to records_path + ".torn" (appended) and cut it
    off, so that the file holds whole records only. Returns what was done, for the user, or
    None when the last line is whole. The caller holds the results folder's lock."""
    try:
        fh = open(records_path, "r+b")
    except FileNotFoundError:
        return None
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return None
        fh.seek(size - 1)
        terminated = fh.read(1) == b"\n"
        start = _line_start(fh, size - 1 if terminated else size)
        fh.seek(start)
        line = fh.read(size - start)
        if terminated:
            if not line.strip():
                return None
            try:
                if isinstance(json.loads(line), dict):
                    return None
            except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
                pass
        torn = records_path.with_name(records_path.name + ".torn")
        with open(torn, "ab") as out:
            out.write(line if terminated else line + b"\n")
            out.flush()
            os.fsync(out.fileno())
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
    why = "has no final newline" if not terminated else "is not a JSON record"
    return (f"{records_path}: its last line ({len(line)} bytes) {why}: a write that did not "
            f"finish; moved it to {torn} and cut it off (its cell, if any, runs again)")


def _line_start(fh: BinaryIO, end: int) -> int:
    """Offset of the first byte of the line that ends at `end` (exclusive)."""
    pos = end
    while pos > 0:
        step = min(1 << 16, pos)
        fh.seek(pos - step)
        i = fh.read(step).rfind(b"\n")
        if i >= 0:
            return pos - step + i + 1
        pos -= step
    return 0


def utc_now() -> str:
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
    invocations.append({"started_at": utc_now(), "order": order, "shuffle_seed": seed,
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
