"""The matrix runner's results folder: OUT/records.jsonl (which cells are recorded, crash-safe
appends) and OUT/manifest.json (the run order and every invocation)."""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any, Sequence

from matrix_file import Cell, Matrix

RECORDS_FILE = "records.jsonl"
MANIFEST_FILE = "manifest.json"


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
