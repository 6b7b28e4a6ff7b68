"""Drawing a report's figures side by side: each figure is an independent job, and the jobs run
in forked worker processes, one per core (the data a job draws is inherited from the parent,
never pickled; only the returned path comes back), while the parent goes on with the report's
tables. A figure is the same file whichever process draws it. MEMSTRAT_JOBS=1 (or one core, or
no fork) draws them one after another, when their results are asked for."""
from __future__ import annotations

import multiprocessing
import os
from typing import Any, Callable, Sequence

Job = tuple[Callable[..., Any], tuple, dict]
_JOBS: list[Job] = []


def workers(jobs: int) -> int:
    """How many processes draw `jobs` figures: MEMSTRAT_JOBS, else one per core."""
    wanted = os.environ.get("MEMSTRAT_JOBS")
    cores = int(wanted) if wanted and wanted.isdigit() and int(wanted) > 0 else \
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(jobs, cores))


class Pending:
    """Figures being drawn; results() waits for them and returns each job's result in order."""

    def __init__(self, jobs: Sequence[Job]):
        global _JOBS
        self._jobs = list(jobs)
        self._pool = None
        self._async = None
        n = workers(len(self._jobs))
        if n > 1 and "fork" in multiprocessing.get_all_start_methods():
            _JOBS = self._jobs          # what the forked workers see
            self._pool = multiprocessing.get_context("fork").Pool(n)
            self._async = self._pool.map_async(_run_one, range(len(self._jobs)), chunksize=1)
            _JOBS = []

    def results(self) -> list[Any]:
        if self._pool is None:
            return [fn(*args, **kwargs) for fn, args, kwargs in self._jobs]
        try:
            return self._async.get()
        finally:
            self._pool.close()
            self._pool.join()


def start(jobs: Sequence[Job]) -> Pending:
    return Pending(jobs)


def run(jobs: Sequence[Job]) -> list[Any]:
    """Each job's result, in order."""
    return start(jobs).results()


def _run_one(i: int) -> Any:
    fn, args, kwargs = _JOBS[i]
    return fn(*args, **kwargs)
