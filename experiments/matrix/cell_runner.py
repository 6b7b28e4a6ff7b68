"""Runs matrix cells as `memstrat train` processes, one worker per GPU: each cell's record
lands in OUT/records.jsonl (a failed record when the process left none; one that says
"rejected by memstrat" when it exited 2 or 3), its output in OUT/logs/<cell-key>.log; progress
with an ETA; Ctrl-C or SIGTERM stops the cells in progress without recording them. Each cell
runs under cell_guard.py, which stops its whole process group when the runner ends in any
way, kill -9 included."""
from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from cell_guard import GRACE_S as GUARD_GRACE_S
from matrix_file import Cell, Matrix
from records_file import (RECORDS_FILE, append_lines, rejection, synthesized_failure,
                          utc_now)

REPO_ROOT = Path(__file__).resolve().parents[2]
NSYS_RUN = REPO_ROOT / "experiments" / "scripts" / "nsys_run"
CELL_GUARD = Path(__file__).resolve().parent / "cell_guard.py"


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------
def fmt_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


class Runner:
    def __init__(self, matrix: Matrix, out: Path, memstrat: Path, timeout: float | None,
                 nsys: bool, gpus: list[str | None], hold_fds: tuple[int, ...] = ()):
        self.matrix = matrix
        self.out = out
        self.memstrat = memstrat
        self.timeout = timeout
        self.nsys = nsys
        self.gpus = gpus
        self.hold_fds = hold_fds  # passed on to every cell: the results folder's lock
        self.records = out / RECORDS_FILE
        self.logs = out / "logs"
        self.tmp = out / "tmp"
        self.nsys_dir = out / "nsys"
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self._stop = threading.Event()
        self.done = 0
        self.total = 0
        self.ran = 0
        self.failed: list[tuple[Cell, str]] = []
        self.rejected: list[tuple[Cell, str]] = []
        self.internal_error = False
        self.t0 = time.monotonic()

    # The command for one cell; the record goes to `json_path`.
    def command(self, cell: Cell, json_path: Path) -> list[str]:
        cmd = [str(self.memstrat), "train", *cell.train_args(),
               "--run-tag", cell.key, "--json", str(json_path)]
        if cell.cpus is not None:
            cmd = ["taskset", "-c", cell.cpus, *cmd]
        if self.nsys:
            cmd = [str(NSYS_RUN), "-o", str(self.nsys_dir / cell.key), "--", *cmd]
        return cmd

    def _progress(self, cell: Cell, outcome: str, seconds: float) -> None:
        with self._lock:
            self.done += 1
            self.ran += 1
            elapsed = time.monotonic() - self.t0
            remaining = self.total - self.done
            eta = elapsed / self.ran * remaining if self.ran else 0.0
            width = len(str(self.total))
            print(f"[{self.done:>{width}}/{self.total}] {outcome:<6} {seconds:6.1f} s | "
                  f"elapsed {fmt_duration(elapsed)} | ETA {fmt_duration(eta)} | "
                  f"{cell.key}", flush=True)

    def _start(self, cmd: list[str], log, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
        """Start `cmd` under cell_guard.py; returns the guard and the write end of the pipe
        whose closing (the runner's end) stops the cell."""
        watch_r, watch_w = os.pipe()
        try:
            guard = [sys.executable, "-S", str(CELL_GUARD), "--watch", str(watch_r),
                     *(f"--hold={fd}" for fd in self.hold_fds), "--", *cmd]
            proc = subprocess.Popen(guard, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                    pass_fds=(watch_r, *self.hold_fds))
        except BaseException:
            os.close(watch_w)
            raise
        finally:
            os.close(watch_r)
        return proc, watch_w

    def run_cell(self, cell: Cell, gpu: str | None) -> None:
        tmp = self.tmp / f"{cell.key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.jsonl"
        cmd = self.command(cell, tmp)
        env = os.environ.copy()
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        log_path = self.logs / f"{cell.key}.log"
        t0 = time.monotonic()
        rc: int | None = None
        timed_out = False
        error = ""
        rejected = False
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"=== {utc_now()} gpu={gpu if gpu is not None else 'default'} "
                      f"cmd: {shlex.join(cmd)}\n")
            log.flush()
            log_start = log.tell()
            try:
                proc, watch_w = self._start(cmd, log, env)
            except OSError as e:
                proc = None
                log.write(f"=== could not start: {e}\n")
                error = f"could not start {cmd[0]}: {e}"
            if proc is not None:
                with self._lock:
                    self._procs.add(proc)
                try:
                    rc = proc.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(proc)
                    rc = proc.wait()
                finally:
                    with self._lock:
                        self._procs.discard(proc)
                    os.close(watch_w)
                if timed_out:
                    error = f"timed out after {self.timeout:g} s"
                elif rc != 0 and (refusal := rejection(rc, _last_line(log_path, log_start))):
                    error, rejected = refusal, True
                elif rc != 0:
                    error = f"exited with code {rc}"
            seconds = time.monotonic() - t0
            log.write(f"=== {error or 'exit 0'} after {seconds:.1f} s\n")

        if self._stop.is_set():   # interrupted: the cell in progress is dropped, not recorded
            tmp.unlink(missing_ok=True)
            return

        lines: list[str] = []
        bad = False
        if tmp.exists():
            for raw in tmp.read_text(encoding="utf-8", errors="replace").splitlines():
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    bad = True
                    continue
                if not isinstance(rec, dict):
                    bad = True
                    continue
                cfg = rec.get("config")
                if isinstance(cfg, dict) and cfg.get("run_tag") != cell.key:
                    # memstrat without --run-tag support in the record: tag it here so
                    # restart-skip still works.
                    cfg["run_tag"] = cell.key
                    raw = json.dumps(rec, separators=(",", ":"))
                lines.append(raw)
        statuses = [json.loads(l).get("status", "ok") for l in lines]
        if lines:
            rejected = False  # memstrat wrote its own record: an ordinary run
        else:
            why = error or "exited with code 0"
            if not rejected:
                why += " and wrote an unreadable record" if bad else " and wrote no record"
            lines = [json.dumps(synthesized_failure(
                cell, cmd, f"{why} (log: logs/{cell.key}.log)", self.matrix.schema_version),
                separators=(",", ":"))]
            statuses = ["failed"]
        append_lines(self.records, lines)
        tmp.unlink(missing_ok=True)
        outcome = "ok" if "ok" in statuses else "REJECT" if rejected else "FAILED"
        if outcome != "ok":
            with self._lock:
                (self.rejected if rejected else self.failed).append((cell, str(log_path)))
        self._progress(cell, outcome, seconds)

    def _worker(self, gpu: str | None, work: "queue.Queue[Cell]") -> None:
        while not self._stop.is_set():
            try:
                cell = work.get_nowait()
            except queue.Empty:
                return
            try:
                self.run_cell(cell, gpu)
            except Exception as e:  # e.g. disk full: stop rather than spin through cells
                print(f"error: {cell.key}: {type(e).__name__}: {e}; stopping",
                      file=sys.stderr, flush=True)
                self.internal_error = True
                self._stop.set()
                return

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            procs = list(self._procs)
        for p in procs:
            _kill_group(p)

    def run(self, pending: list[Cell], already: int) -> int:
        for d in (self.logs, self.tmp) + ((self.nsys_dir,) if self.nsys else ()):
            d.mkdir(parents=True, exist_ok=True)
        _remove_stale_temp_files(self.tmp)
        self.total = len(pending) + already
        self.done = already
        work: queue.Queue[Cell] = queue.Queue()
        for c in pending:
            work.put(c)
        threads = [threading.Thread(target=self._worker, args=(g, work), daemon=True)
                   for g in self.gpus]
        self.t0 = time.monotonic()
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            print("\ninterrupted: stopping the cells in progress (they are not recorded)",
                  file=sys.stderr, flush=True)
            self.stop()
            for t in threads:
                t.join(timeout=30)
            print(f"{self.done}/{self.total} cells recorded in {self.records}; run the same "
                  "command again to continue", file=sys.stderr)
            return 130
        elapsed = time.monotonic() - self.t0
        if self.internal_error:
            return 3
        print(f"done: {self.ran} cells run in {fmt_duration(elapsed)}, "
              f"{len(self.failed)} failed, {len(self.rejected)} rejected by memstrat; "
              f"records in {self.records}", flush=True)
        if self.rejected:
            print("cells memstrat rejected (exit 2: a bad option or input; 3: no GPU or the "
                  "strategy waived on it): a rerun skips them; --retry-rejected runs them "
                  "again:", file=sys.stderr)
            for cell, log in self.rejected:
                print(f"  {cell.key}  log: {log}", file=sys.stderr)
        if self.failed:
            print("failed cells (rerun the same command to retry them):", file=sys.stderr)
            for cell, log in self.failed:
                print(f"  {cell.key}  log: {log}", file=sys.stderr)
        return 1 if self.failed or self.rejected else 0


def _remove_stale_temp_files(tmp_dir: Path) -> None:
    """Delete per-cell temp files (KEY.PID.RANDOM.jsonl) left by runners that died.

    They never hold anything that counts: a cell is recorded only once its line is in
    records.jsonl, and a rerun runs such a cell again.
    """
    for f in tmp_dir.glob("*.jsonl"):
        parts = f.name.rsplit(".", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            f.unlink(missing_ok=True)


def _last_line(log_path: Path, start: int) -> str:
    """The last non-empty line the cell's process wrote to its log (what memstrat said)."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(start, fh.seek(0, os.SEEK_END) - 4096))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no output)"
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop a cell: SIGTERM to its guard, which stops the cell's process group (nsys and its
    children included); SIGKILL to the guard's group if it has not ended after its grace."""
    for sig, grace in ((signal.SIGTERM, GUARD_GRACE_S + 5.0), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if grace is None:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
