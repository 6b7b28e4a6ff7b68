"""Benchmarks whose every run is a process of its own (docs/methodology.md, "Statistics over
processes"): the runs of all configurations in one seeded shuffled order (the matrix runner's
order, experiments/matrix/run_matrix.py), the plan record that keeps that order and the command
beside the run records, the runner of one process (memstrat, or a PyTorch baseline script), the
checks before the first run, and what a table reads back from a records file: which runs of the
plan have no ok record, and the provenance (GPU, driver, commit, command).

The plan record is one JSON line of its own kind ({"record": "baseline-plan", ...}: the command,
the shuffle seed, the processes per configuration, the estimate, notes such as configurations
left out, and every run's config.run_tag in run order), written before the first run, so that a
table rebuilt from the records file says what the live run said.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "experiments" / "matrix"))
from baseline_record import append_jsonl, iso_utc_now  # noqa: E402
from memstrat_inputs import UsageError  # noqa: E402
from run_matrix import run_order  # noqa: E402  (the matrix runner's shuffled order)
sys.path.insert(0, str(REPO_ROOT))
from analysis.records import drop_duplicates  # noqa: E402  (a run read twice counts once)

PLAN_KIND = "baseline-plan"
PLAN_SCHEMA_VERSION = 1


# ---------------------------------------------------------------------------------------------
# options

def add_process_options(p: argparse.ArgumentParser, python_help: str) -> None:
    """What Runner reads (the binary, the data, the python of the PyTorch processes, the time
    limit of a run, the smoke-test sample limits) and the plan's processes and order."""
    p.add_argument("--memstrat", default=str(REPO_ROOT / "build" / "memstrat"),
                   help="the memstrat binary (default: %(default)s)")
    p.add_argument("--data", help="MNIST directory for both (default: $MEMSTRAT_DATA, "
                   "data/mnist)")
    p.add_argument("--python", default=sys.executable, help=python_help)
    p.add_argument("--timeout", type=positive_int, default=900,
                   help="seconds per run (default %(default)s)")
    p.add_argument("--train-samples", type=natural_int, default=0,
                   help="both sides use only the first N training samples (0 = all; for "
                        "smoke tests, not for figures)")
    p.add_argument("--test-samples", type=natural_int, default=0,
                   help="both sides use only the first N test samples (0 = all)")
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="processes per configuration on each side (default %(default)s; "
                        "fewer than 3 give no interval)")
    p.add_argument("--shuffle-seed", type=natural_int, default=1,
                   help="seed of the one shuffled order of all runs (default %(default)s)")
    p.add_argument("--from-records", nargs="+", metavar="JSONL",
                   help="rebuild the report from these records (with their plan record); run "
                        "nothing")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan, the estimate and the run order; run nothing")


def apply_preset(a: argparse.Namespace, parser: argparse.ArgumentParser, preset: dict,
                 fixed: Sequence[str], argv: Sequence[str] | None = None) -> None:
    """--reproduce: sets the preset's options. ValueError naming every option of `fixed` given a
    value other than the preset's: on the command line (`argv`, so that a value that happens to
    be the option's default still counts), or, without argv, differing from the default."""
    given = {arg.split("=", 1)[0] for arg in argv or () if arg.startswith("--")}

    def conflicts(k: str) -> bool:
        value = getattr(a, k)
        if k in preset and value == preset[k]:
            return False
        return "--" + k.replace("_", "-") in given or value != parser.get_default(k)
    changed = [k for k in fixed if conflicts(k)]
    if changed:
        raise ValueError("--reproduce fixes the plan; drop " +
                         ", ".join("--" + k.replace("_", "-") for k in changed))
    for k, v in preset.items():
        setattr(a, k, list(v) if isinstance(v, list) else v)


def name_list(choices: Sequence[str]):
    """argparse type: a comma-separated subset of `choices`, in the order given, repeats
    dropped."""
    def parse(s: str) -> list[str]:
        v = [p.strip() for p in s.split(",") if p.strip()]
        bad = [x for x in v if x not in choices]
        if not v or bad:
            raise argparse.ArgumentTypeError(f"{s!r}: expected a comma-separated subset of "
                                             f"{', '.join(choices)}")
        return list(dict.fromkeys(v))
    return parse


def _int_at_least(least: int):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r}: expected an integer") from None
        if v < least:
            raise argparse.ArgumentTypeError(f"{s!r}: expected an integer >= {least}")
        return v
    return parse


positive_int = _int_at_least(1)
natural_int = _int_at_least(0)


# ---------------------------------------------------------------------------------------------
# the plan: every process, in one seeded shuffled order

@dataclass(frozen=True)
class RunSpec:
    """One process of a benchmark's plan."""
    side: str        # "memstrat" or the PyTorch side's name
    config: tuple    # the benchmark's configuration, as its runner reads it
    repeat: int      # 0-based process number of this configuration
    tag: str         # the record's config.run_tag: finds the run in the records file
    label: str       # the configuration in words, for progress lines


def repeated(prefix: str, side: str, config: tuple, slug: str, label: str,
             repeats: int) -> list[RunSpec]:
    """The `repeats` processes of one configuration; tag PREFIX-SLUG-rREPEAT."""
    return [RunSpec(side, config, r, f"{prefix}-{slug}-r{r}", label) for r in range(repeats)]


def shuffled(specs: Sequence[RunSpec], seed: int) -> list[RunSpec]:
    """Every configuration's first process in a random order, then every second one, and so on
    (one random.Random(seed)); the same seed gives the same order."""
    tags = [s.tag for s in specs]
    if len(set(tags)) != len(tags):
        raise ValueError("two runs of the plan share a run tag")
    return run_order(specs, "shuffled", seed)


def pending(order: Sequence[RunSpec], out_jsonl: Path,
            resume: bool) -> tuple[list[RunSpec], int]:
    """(the runs of `order` still to do, in its order; how many are done). With `resume`, a run
    whose tag has an ok record in `out_jsonl` is done (a plan stopped half-way, or split over
    sittings, continues where it was); without, a results file that already holds run records
    is a UsageError (a second plan would mix into it unasked)."""
    recs = run_records(read_records([out_jsonl])) if out_jsonl.is_file() else []
    if not resume:
        if recs:
            raise UsageError(f"{out_jsonl} already holds {len(recs)} run records: --resume "
                             "continues that plan, or give another output directory")
        return list(order), 0
    ok = {tag_of(r) for r in recs if r.get("status") == "ok"}
    todo = [s for s in order if s.tag not in ok]
    return todo, len(order) - len(todo)


def plan_record(benchmark: str, command: str, seed: int, repeats: int,
                order: Sequence[RunSpec], estimate_s: float, notes: Sequence[str]) -> dict:
    return {"record": PLAN_KIND, "schema_version": PLAN_SCHEMA_VERSION, "status": "ok",
            "started_at": iso_utc_now(), "benchmark": benchmark, "command": command,
            "shuffle_seed": seed, "repeats": repeats, "estimate_s": round(estimate_s),
            "notes": list(notes), "order": [s.tag for s in order]}


def plans(records: Iterable[dict]) -> list[dict]:
    return [r for r in records if r.get("record") == PLAN_KIND]


def run_records(records: Iterable[dict]) -> list[dict]:
    """The run records (memstrat's and the baselines'), ok or failed; no other kind."""
    return [r for r in records if r.get("record") in (None, "run") and
            isinstance(r.get("config"), dict)]


def tag_of(rec: dict) -> str | None:
    return rec["config"].get("run_tag")


def missing_runs(records: Sequence[dict]) -> list[str]:
    """'TAG: why' for every run a plan lists that has no ok record (the failed record's error,
    or that none was written)."""
    runs = run_records(records)
    ok = {tag_of(r) for r in runs if r.get("status") == "ok"}
    errors = {tag_of(r): r.get("error") or "failed" for r in runs if r.get("status") != "ok"}
    return [f"{t}: {errors.get(t, 'no record written')}" for p in plans(records)
            for t in p["order"] if t not in ok]


# ---------------------------------------------------------------------------------------------
# the table's provenance

def _distinct(values: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def provenance_line(records: Sequence[dict]) -> str:
    """'GPU NVIDIA H200, driver 580.159.04, commit 4f3a9c1e2b7d, command `...`': from the run
    records' env (memstrat's records name its build; the baselines' when there are none) and
    the plan records."""
    runs = [r for r in run_records(records) if isinstance(r.get("env"), dict)]
    mine = [r for r in runs if r["config"].get("framework") in (None, "memstrat")]
    theirs = [r for r in runs if r["config"].get("framework") not in (None, "memstrat")]
    envs = [r["env"] for r in (mine or runs)]
    gpus = _distinct(e.get("gpu_name") for e in envs)
    drivers = _distinct(e.get("driver_release") or e.get("driver_version") for e in envs)
    def commits_of(es) -> list[str]:
        return _distinct(e.get("git_sha") and e["git_sha"] + (" (dirty)" if e.get("git_dirty")
                                                              else "") for e in es)
    commits = commits_of(envs)
    # the baselines name the commit of their own checkout: said where it is not memstrat's
    others = [c for c in commits_of(r["env"] for r in theirs) if c not in commits]
    commands = _distinct(p.get("command") for p in plans(records))
    return (f"GPU {', '.join(gpus) or 'not recorded'}, driver "
            f"{', '.join(drivers) or 'not recorded'}, commit {', '.join(commits) or 'not recorded'}"
            + (f" (the other frameworks' records name {', '.join(others)})" if others else "")
            + ", command " + ("; ".join(f"`{c}`" for c in commands) or "not recorded (no plan "
                                                                       "record)"))


def environment_lines(records: Sequence[dict]) -> list[str]:
    """The GPU and its link, memstrat's version, PyTorch's, and when the runs ran."""
    runs = run_records(records)
    mem = next((r for r in runs if r["config"].get("framework") in (None, "memstrat")
                and r.get("env")), None)
    pt = next((r for r in runs if r["config"].get("framework") == "pytorch" and r.get("env")),
              None)
    lines = []
    if mem:
        e = mem["env"]
        lines.append(f"GPU: {e.get('gpu_name')} (cc {e.get('compute_capability')}, CUDA runtime "
                     f"{e.get('runtime_version')}, PCIe gen {e.get('pcie_gen')} x"
                     f"{e.get('pcie_width')}), host {e.get('host')}, memstrat "
                     f"{e.get('memstrat_version')}")
    if pt:
        e = pt["env"]
        lines.append(f"PyTorch {e.get('torch_version')} (CUDA {e.get('runtime_version')}), "
                     f"Python {e.get('python_version')}, eager, fp32 (TF32 off), "
                     "torch.optim.SGD defaults")
    dates = sorted(r["started_at"] for r in runs if r.get("started_at"))
    if dates:
        lines.append(f"runs from {dates[0]} to {dates[-1]}")
    return lines


def order_lines(records: Sequence[dict]) -> list[str]:
    """What each plan ran, in which order (a collapsed list)."""
    out = []
    for p in plans(records):
        out += [f"Run order: {len(p['order'])} processes, {p['repeats']} per configuration, in "
                f"one seeded shuffled order (--shuffle-seed {p['shuffle_seed']}): every "
                "configuration's first process in a random order, then every second one, and so "
                "on, so that drift of the machine spreads over all configurations "
                f"(estimated {p['estimate_s'] / 60:.1f} min before the runs).", "",
                "<details><summary>the order (config.run_tag of each record)</summary>", ""]
        out += [f"{i}. `{t}`" for i, t in enumerate(p["order"], 1)] + ["", "</details>", ""]
    return out


def read_records(paths: Iterable[str | Path]) -> list[dict]:
    """Every JSON line of the files, a run read twice (same run_id, same content) once;
    ValueError naming file:line for one that is not JSON or for two different records under
    one run_id."""
    out, where = [], {}
    for p in paths:
        for n, line in enumerate(Path(p).read_text().splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{p}:{n}: not a JSON line ({e})") from None
                where[id(out[-1])] = f"{p}:{n}"
    return drop_duplicates(out, source_of=lambda rec: where[id(rec)])


# ---------------------------------------------------------------------------------------------
# running one process

@dataclass
class RunResult:
    label: str
    tag: str
    ok: bool = False
    error: str = ""
    record: dict | None = None
    seconds: float = 0.0

    @property
    def median_ms(self) -> float | None:
        return float(self.record["summary"]["wall_ms_median"]) if self.ok else None


class Runner:
    """Runs one process at a time; each writes its record into a private file, which is then
    appended to the results file (and kept in `records`). Reads from the options: memstrat,
    python, timeout, train_samples, test_samples."""

    def __init__(self, a, data_dir: Path, out_jsonl: Path, out_dir: Path, total: int):
        self.a, self.data_dir, self.out_jsonl = a, data_dir, out_jsonl
        for d in (out_dir, out_jsonl.parent):
            d.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="runs_", dir=out_dir))  # each run's own record
        self.total, self.done = total, 0
        self.t0 = time.monotonic()
        self.records: list[dict] = []

    def append(self, rec: dict) -> None:
        append_jsonl(str(self.out_jsonl), rec)
        self.records.append(rec)

    def samples(self) -> list[str]:
        out = []
        if self.a.train_samples:
            out += ["--train-samples", str(self.a.train_samples)]
        if self.a.test_samples:
            out += ["--test-samples", str(self.a.test_samples)]
        return out

    def memstrat(self, tag: str, label: str, args: Sequence[str]) -> RunResult:
        """`memstrat train ARGS` on the benchmark's data, quiet, its record tagged TAG."""
        tmp = self.work / f"{tag}.jsonl"
        cmd = [self.a.memstrat, "train", *args, "--data", str(self.data_dir), "--quiet",
               "--json", str(tmp), "--run-tag", tag, *self.samples()]
        return self.run_command(cmd, tmp, tag, label)

    def script(self, script: Path, tag: str, label: str, args: Sequence[str]) -> RunResult:
        """A PyTorch baseline script in its own python process (one torch import per process:
        part of what independent processes cost)."""
        tmp = self.work / f"{tag}.jsonl"
        cmd = [self.a.python, str(script), *args, "--data", str(self.data_dir), "--quiet",
               "--run-tag", tag, "--json", str(tmp), *self.samples()]
        return self.run_command(cmd, tmp, tag, label)

    def run_command(self, cmd: Sequence[str], tmp: Path, tag: str, label: str) -> RunResult:
        """Runs `cmd`, which writes its record to `tmp`; the record goes to the results file
        and into the result (ok, or the error with the command's last lines)."""
        r = RunResult(label, tag)
        tmp.unlink(missing_ok=True)
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout,
                               cwd=REPO_ROOT, stdin=subprocess.DEVNULL, check=False)
            rc, stderr = p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            rc, stderr = None, f"timed out after {self.a.timeout} s"
        except OSError as e:
            rc, stderr = None, f"could not start {cmd[0]}: {e}"
        r.seconds = time.monotonic() - t
        rec = _last_record(tmp)
        tmp.unlink(missing_ok=True)
        if rec is not None:
            self.append(rec)
            r.record = rec
        r.ok = rc == 0 and rec is not None and rec.get("status") == "ok"
        if not r.ok:
            tail = (stderr or "").strip().splitlines()[-3:]
            r.error = f"exit {rc}: " + " | ".join(tail) if tail else f"exit {rc}"
            if rec is not None and rec.get("error"):
                r.error += f" ({rec['error']})"
            r.error += "; command: " + shlex.join(cmd)
        self._progress(r)
        return r

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.work.rmdir()

    def _progress(self, r: RunResult) -> None:
        self.done += 1
        what = f"{r.median_ms:10.2f} ms/epoch" if r.ok else f"FAILED: {r.error[:160]}"
        print(f"[{self.done:3d}/{self.total}] {r.label:<48s} {what}  ({r.seconds:6.1f} s; "
              f"total {time.monotonic() - self.t0:7.1f} s)", flush=True)


def start_plan(a, prog: str, argv: Sequence[str], data_dir: Path, out_dir: Path,
               out_jsonl: Path, order: Sequence[RunSpec], estimate_s: float,
               notes: Sequence[str], extra_runs: int = 0) -> Runner:
    """The runner of a plan, its plan record (with the command that ran) already written."""
    runner = Runner(a, data_dir, out_jsonl, out_dir, len(order) + extra_runs)
    command = shlex.join(["python3", f"experiments/baselines/{prog}", *argv])
    runner.append(plan_record(prog, command, a.shuffle_seed, a.repeats, order, estimate_s, notes))
    return runner


def report_footer(records: Sequence[dict]) -> list[str]:
    """A report's last lines: where the records came from, and the runs of the plan that left no
    ok record."""
    lines = []
    prov = provenance_line(records)
    if prov:
        lines += ["", prov]
    missing = missing_runs(records)
    if missing:
        lines += ["", "## Runs without an ok record", ""] + [f"- {x}" for x in missing]
    return lines


def has_jax(python: str) -> bool:
    """`python` imports jax (a JAX variant's only requirement beyond the PyTorch ones)."""
    try:
        return subprocess.run([python, "-c", "import jax"], capture_output=True, timeout=300,
                              check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def drop_jax_without_it(a, variant: str, prog: str, notes: list[str]) -> bool:
    """Leaves the JAX `variant` out of a.variants where a.python cannot import jax (never under
    --dry-run, which plans it regardless), the reason printed and kept in `notes`; False when no
    variant is left."""
    if variant in a.variants and not a.dry_run and not has_jax(a.python):
        a.variants = [v for v in a.variants if v != variant]
        notes.append(f"{variant} skipped: {a.python} cannot import jax (install jax with its "
                     "CUDA plugin where the JAX variant should run)")
        print(f"{prog}: {notes[-1]}", file=sys.stderr)
    return bool(a.variants)


def other_plan(records: Sequence[dict], benchmark: str, seed: int, repeats: int,
               expected: dict[str, dict]) -> str | None:
    """Why `records` are not of this plan, or None. A plan's own records are plan records of
    `benchmark` with its shuffle seed and processes per configuration that list only runs of
    `expected` (the plan's run tags, each with the config values its tag does not name), and run
    records of those tags with those values."""
    for p in plans(records):
        if (p.get("benchmark"), p.get("shuffle_seed"), p.get("repeats")) != \
                (benchmark, seed, repeats) or not set(p.get("order") or ()) <= expected.keys():
            return (f"a plan record of {p.get('benchmark')}, --shuffle-seed "
                    f"{p.get('shuffle_seed')}, --repeats {p.get('repeats')}, command "
                    f"`{p.get('command')}`")
    for r in run_records(records):
        tag = tag_of(r)
        if tag not in expected:
            return f"run {tag}, which this plan does not have"
        diff = [f"{k} {r['config'].get(k)!r} (this plan: {v!r})"
                for k, v in expected[tag].items() if r["config"].get(k) != v]
        if diff:
            return f"run {tag} with {', '.join(diff)}"
    return None


def resumable(prog: str, order: Sequence[RunSpec], out_jsonl: Path,
              resume: bool) -> list[RunSpec] | None:
    """pending(), saying how far a resumed plan got; None (the reason on stderr) when the
    results file cannot take this plan."""
    try:
        todo, done = pending(order, out_jsonl, resume)
    except (UsageError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    if done:
        print(f"resuming: {done} of {len(order)} runs already have an ok record in {out_jsonl}",
              flush=True)
    return todo


def from_records_main(prog: str, paths: Sequence[str], report) -> int:
    """--from-records: print `report(records)` of the files; 0, or 2 (said on stderr) when they
    cannot be read or hold no run record."""
    try:
        text = report(load_records(paths))
    except (OSError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0


def execute_plan(a, prog: str, argv: Sequence[str], data_dir: Path, out_dir: Path,
                 out_jsonl: Path, out_md: Path, todo: Sequence[RunSpec], estimate_s: float,
                 notes: Sequence[str], run_one, report) -> int:
    """Runs `todo` in its order (`run_one(runner, spec)` each), then writes `report` of the whole
    results file to `out_md` and prints it; 0 when every run was ok, else 3 (the failed runs
    listed on stderr)."""
    failed = []
    if todo:
        runner = start_plan(a, prog, argv, data_dir, out_dir, out_jsonl, todo, estimate_s, notes)
        failed = [r for r in (run_one(runner, s) for s in todo) if not r.ok]
        runner.close()
    text = report(read_records([out_jsonl]))
    print("\n" + text)
    out_md.write_text(text)
    print(f"wrote {out_md} and {out_jsonl}")
    for r in failed:
        print(f"failed: {r.label}: {r.error}", file=sys.stderr)
    return 3 if failed else 0


def load_records(paths: Sequence[str]) -> list[dict]:
    """--from-records: every line of the files; ValueError when one is not JSON or none is a
    run record; OSError when a file cannot be read."""
    records = read_records(paths)
    if not run_records(records):
        raise ValueError(f"{' '.join(paths)}: no run records")
    return records


def _last_record(path: Path) -> dict | None:
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# before the first run

def check_memstrat(path: str, strategies: Sequence[str]) -> None:
    """The binary runs and offers `strategies` (`memstrat list`); UsageError otherwise."""
    exe = Path(path)
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise UsageError(f"--memstrat {path}: not an executable file; build it first (cmake -S . "
                         "-B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j) or pass "
                         "--memstrat PATH")
    try:
        listed = subprocess.run([str(exe), "list"], capture_output=True, text=True, timeout=60,
                                check=False).stdout.split()
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"`{exe} list` failed: {e}") from None
    missing = [s for s in strategies if s not in listed]
    if missing:
        raise UsageError(f"`{exe} list` does not offer {missing}")


def check_torch(python: str, device: str) -> None:
    """`python` imports torch, and with device "cuda" sees a GPU; UsageError otherwise."""
    probe = "import torch, sys" + ("; sys.exit(0 if torch.cuda.is_available() else 3)"
                                   if device == "cuda" else "")
    try:
        check = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                               timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"{python}: cannot run: {e}") from None
    if check.returncode != 0:
        what = "torch with CUDA" if device == "cuda" else "torch"
        raise UsageError(f"{python}: {what} is not available ({check.stderr.strip()[-200:]})")
