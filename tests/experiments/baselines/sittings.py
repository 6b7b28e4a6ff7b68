"""A spy on the runs a benchmark of experiments/baselines starts, for the tests of --resume:
the run tags in order, and a SIGINT stand-in at a chosen run."""
from __future__ import annotations

import subprocess

import process_runs as pr

REAL_RUN = subprocess.run


class Sitting:
    """Spies on the runs a benchmark starts (their run tags, in order); with `stop_at`, the run
    of that index is interrupted as a SIGINT would: its process ran and wrote its record, but
    KeyboardInterrupt reaches the benchmark before the record is appended."""

    def __init__(self, monkeypatch, stop_at: int | None = None):
        self.tags: list[str] = []

        def run(cmd, *args, **kw):
            if "--run-tag" not in cmd:
                return REAL_RUN(cmd, *args, **kw)          # `memstrat list`, the torch check
            self.tags.append(cmd[cmd.index("--run-tag") + 1])
            done = REAL_RUN(cmd, *args, **kw)
            if len(self.tags) - 1 == stop_at:
                raise KeyboardInterrupt
            return done
        monkeypatch.setattr(pr.subprocess, "run", run)
