#!/usr/bin/env python3
"""Runs one matrix cell's command so that nothing of it outlives the runner that started it.

    cell_guard.py --watch FD [--hold FD]... -- COMMAND [ARGS...]

The runner (cell_runner.py) starts the guard in a session of its own; the guard starts COMMAND
in a process group of its own and waits. It stops that whole group (SIGTERM, then SIGKILL
after GRACE_S seconds; nsys_run's nsys and the memstrat it profiles included) when

- FD --watch reads end of file: the read end of a pipe whose write end only the runner holds,
  so the runner's end in any way, kill -9 included, ends the cell too;
- the guard gets SIGTERM, SIGINT or SIGHUP (the runner's timeout and Ctrl-C);
- COMMAND itself exits: what it left running in its group is killed.

COMMAND's own process also gets SIGKILL should the guard die first (Linux parent-death
signal). The --hold descriptors (the results folder's lock) are passed on to COMMAND, so the
folder stays locked while any process of the cell lives: a new runner cannot start cells
beside a dying one. The exit status is COMMAND's (128 + N when signal N ended it; 127 when it
could not be started; 125 for a usage error of the guard itself).
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
from typing import Sequence

GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stop(Exception):
    """A stop signal arrived."""


def _child_setup(guard_pid: int) -> None:
    """In the child before exec: SIGKILL when the guard dies (Linux; elsewhere nothing), and
    the stop signals the guard blocked around the start unblocked again."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != guard_pid:  # the guard died before the signal was set
        os.kill(os.getpid(), signal.SIGKILL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _raise_stop(signum, frame):
    raise _Stop


def _kill_group(pgid: int, sig: int) -> bool:
    """Signal the group; False once no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to the cell's group, SIGKILL to whatever is left after GRACE_S."""
    for s in _STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if _kill_group(child.pid, signal.SIGTERM):
        try:
            child.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _kill_group(child.pid, signal.SIGKILL)
    child.wait()


def _wait(child: subprocess.Popen, watch: int) -> bool:
    """Wait until the child exits (True) or the watched pipe reads end of file (False)."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel): poll the child
        pidfd = None
    try:
        while True:
            ready, _, _ = select.select([watch] + ([pidfd] if pidfd is not None else []), [],
                                        [], None if pidfd is not None else 0.05)
            if watch in ready and not os.read(watch, 4096):
                return False
            if child.poll() is not None:
                return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _parse(argv: Sequence[str]) -> tuple[int, list[int], list[str]]:
    """(--watch FD, the --hold FDs, COMMAND): the runner's fixed form, read without argparse
    (the guard starts once per cell, so it imports little)."""
    watch, hold, i = None, [], 0
    while i < len(argv) and argv[i] != "--":
        name, _, value = argv[i].partition("=")
        if not value and i + 1 < len(argv):
            i, value = i + 1, argv[i + 1]
        if name == "--watch":
            watch = int(value)
        elif name == "--hold":
            hold.append(int(value))
        else:
            raise ValueError(f"unknown argument {argv[i]}")
        i += 1
    if watch is None or i + 1 >= len(argv):
        raise ValueError("needs --watch FD, then -- COMMAND")
    return watch, hold, list(argv[i + 1:])


def main(argv: Sequence[str]) -> int:
    try:
        watch, hold, cmd = _parse(argv)
    except ValueError as e:
        print(f"usage: cell_guard.py --watch FD [--hold FD]... -- COMMAND...: {e}",
              file=sys.stderr)
        return 125
    for s in _STOP_SIGNALS:
        signal.signal(s, _raise_stop)
    child = None
    guard_pid = os.getpid()
    try:
        # A stop signal waits until `child` is set, so that a started cell is always stopped.
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            child = subprocess.Popen(cmd, pass_fds=hold, process_group=0,
                                     preexec_fn=lambda: _child_setup(guard_pid))
        except OSError as e:
            print(f"cell_guard: could not start {cmd[0]}: {e}", file=sys.stderr, flush=True)
            return 127
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        if _wait(child, watch):
            _kill_group(child.pid, signal.SIGKILL)   # what the command left behind
            rc = child.returncode
            return rc if rc >= 0 else 128 - rc
        print("cell_guard: the runner is gone; stopping the cell", file=sys.stderr, flush=True)
    except _Stop:
        pass
    if child is not None:
        _stop(child)
    return 128 + signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
