"""The results folder's lock: one runner, and the cells it started, on a folder at a time.

Every runner that runs cells holds an exclusive flock on OUT/.run_matrix.lock, --only runners
(the Slurm tasks) included, so that no two runners run the same cell twice or two timed cells
at once on one folder. The descriptor is passed on to every cell (cell_guard.py): a cell that
outlives its runner keeps the folder locked until it has stopped. The lock file names the
runner that took it (pid and host), for the message of a runner that finds it held.
"""
from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from pathlib import Path

LOCK_FILE = ".run_matrix.lock"
POLL_S = 0.1


class FolderBusy(Exception):
    """The folder is locked by another runner or by a cell of one; the message says which."""


def acquire(out: Path, wait: bool, orphan_wait_s: float) -> int:
    """Lock `out` and return the lock's descriptor (keep it open while cells run).

    wait: block until the lock is free (a message on stderr says what is waited for).
    Otherwise raise FolderBusy at once when another runner holds it; when only cells of a
    runner that has ended hold it (their guards are stopping them), wait up to orphan_wait_s
    for them to stop before raising FolderBusy. Raises OSError when the file cannot be opened.
    """
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    told = False
    orphan_since: float | None = None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            pid, host = _holder(fd)
            who = (f"run_matrix.py (pid {pid}" + ("" if host == socket.gethostname()
                                                  else f" on {host}") + ")") if pid else \
                "run_matrix.py"
            ended = pid is not None and host == socket.gethostname() and not _alive(pid)
            if not wait:
                if not ended:
                    raise FolderBusy(f"another {who} is running on {out}; wait for it to "
                                     "finish (or stop it) and run this again")
                orphan_since = orphan_since or time.monotonic()
                if time.monotonic() - orphan_since > orphan_wait_s:
                    raise FolderBusy(
                        f"{out}: a cell started by a {who} that has ended still runs and holds "
                        f"the folder; run this again once it has stopped (`fuser -v "
                        f"{out / LOCK_FILE}` lists its processes)")
            if not told:
                print(f"waiting for the lock on {out}: held by "
                      + (f"the cells of a {who} that has ended (being stopped)" if ended
                         else f"another {who}"), file=sys.stderr, flush=True)
                told = True
            time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _holder(fd: int) -> tuple[int | None, str | None]:
    """(pid, host) of the runner that took the lock last, as its file says."""
    try:
        pid, host = os.pread(fd, 512, 0).decode("utf-8", "replace").split()
        return int(pid), host
    except (OSError, ValueError):
        return None, None


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: the state follows the command name in parentheses
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
