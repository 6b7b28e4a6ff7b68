#!/usr/bin/env python3
"""Write a results set's README.md and manifest.json from its records.

    analysis/results_readme.py docs/results/nvidia-h200 --command "bash experiments/scripts/reproduce.sh" \
        --stage-seconds build=70,matrix=540

A results set (docs/results/<gpu>/, or docs/results/<gpu>-x<N>/ from a machine of N GPUs, written
by experiments/scripts/reproduce.sh) holds its records under records/ (and sub-sets such as
spread/records/, baselines/records/), what is generated from them (the README names what the set
holds), and these two files. Both are derived from the records alone:
the commit, GPU, driver and dates come from the records' ``env`` and ``started_at``; a set
whose records disagree on the commit, the GPU or the machine (the host's CPU model, CPU count and
memory: two H200 machines of different hosts differ in the launch forms the host issues batch
by batch) is refused (one set = one commit on one GPU of one machine).

    analysis/results_readme.py DIR --expect-commit SHA [--expect-machine]

writes nothing: exit 2 unless every record under DIR (its */records/*.jsonl, or a matrix
runner's DIR/records.jsonl) names that commit and, with --expect-machine, this machine; so that a
stage resumed by another build or on another machine never mixes them into one set.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.records import RecordError, drop_duplicates, read_jsonl  # noqa: E402

MANIFEST = "manifest.json"
README = "README.md"
# What each records file holds, for the README (files not listed are described by their kind).
DESCRIPTIONS = {
    "records/results.jsonl": "every strategy x u8/f32 x static/refresh x batch 64/256/1024, "
                             "one record per process (experiments/matrix/matrices/results.toml)",
    "records/primitives.jsonl": "`memstrat primitives`: each transfer primitive against size",
    "records/stream.jsonl": "the stream scenario: host workers x augmentation "
                            "(experiments/matrix/matrices/stream.toml)",
    "records/compute.jsonl": "compute per byte: the hidden-width sweep, every strategy at its "
                             "own form x u8/f32 x static/refresh/stream at batch 256 "
                             "(experiments/matrix/matrices/compute.toml)",
    "records/budget.jsonl": "data larger than the device budget: MNIST x 11 under budgets of "
                            "data-to-budget ratio 0.5 to 8 "
                            "(experiments/matrix/matrices/budget.toml)",
    "spread/records/spread.jsonl": "the configurations whose run-to-run spread "
                                   "docs/strategies.md explains, under the conditions that "
                                   "change it (experiments/matrix/matrices/spread.toml)",
    "baselines/records/vs_pytorch.jsonl": "memstrat and PyTorch's plain training loop, same "
                                          "GPU (experiments/baselines/benchmark_vs_pytorch.py)",
    "baselines/records/vs_dataloader.jsonl": "memstrat's stream scenario and PyTorch's "
                                             "DataLoader (experiments/baselines/"
                                             "benchmark_stream.py)",
    "baselines/records/pipelines.jsonl": "memstrat's resident with GPU augmentation, the "
                                         "strongest PyTorch pipelines and JAX, each measure "
                                         "apart (experiments/baselines/"
                                         "benchmark_pipelines.py)",
    "records/primitives_gpus.jsonl": "`memstrat primitives --gpus N`: host->device alone and "
                                     "all at once, device->device, NCCL collectives",
    "records/primitives_gpus2.jsonl": "`memstrat primitives --gpus 2` on a machine of more, "
                                      "for the scaling check",
    "records/primitives_gpus4.jsonl": "`memstrat primitives --gpus 4` on a machine of more, "
                                      "for the scaling check",
    "records/scaling.jsonl": "data-parallel training on one GPU and two, one record per process "
                             "(experiments/matrix/matrices/scaling.toml)",
    "records/scaling4.jsonl": "data-parallel training on four GPUs, one record per process "
                              "(experiments/matrix/matrices/scaling4.toml; its one-GPU side is "
                              "records/scaling.jsonl)",
    "records/gpus.jsonl": "every data path on 2 GPUs in one process, one record per process "
                          "(experiments/matrix/matrices/gpus.toml)",
    "baselines/records/multi_gpu_primitives.jsonl": "PyTorch's multi-GPU primitives beside "
                                                    "memstrat's (experiments/baselines/"
                                                    "pytorch_multi_gpu_primitives.py)",
    "baselines/records/data_parallel.jsonl": "memstrat --gpus N beside PyTorch DDP and JAX "
                                             "(experiments/baselines/"
                                             "benchmark_data_parallel.py)",
}
# What the stages generate from the records, as the README names it, where the set holds it.
GENERATED = (
    ("report.md", "`report.md` / `report.html` (tables, figures, the cost model)"),
    ("summary.csv", "`summary.csv` (one row per configuration)"),
    ("plots", "`plots/`"),
    ("cost_model.csv", "`cost_model.csv`"),
    ("multi_gpu_primitives.md", "`multi_gpu_primitives.md` (memstrat's and PyTorch's multi-GPU "
                                "primitives side by side)"),
    ("scaling_check.md", "`scaling_check.md` (the N-GPU scaling model against the measured "
                         "runs)"),
)


class SetError(ValueError):
    """A results set that cannot be described; the message says why."""


def _kind(rec: dict[str, Any]) -> str:
    if rec.get("record"):
        return str(rec["record"])
    framework = (rec.get("config") or {}).get("framework")
    return "run" if framework in (None, "memstrat") else f"baseline:{framework}"


def records_files(root: Path) -> list[Path]:
    """Every */records/*.jsonl under `root` (records/, spread/records/, baselines/records/), and a
    matrix runner's folder's own records.jsonl."""
    own = [root / "records.jsonl"] if (root / "records.jsonl").is_file() else []
    return own + sorted(p for p in root.rglob("*.jsonl") if p.parent.name == "records")


# The host a record ran on, as memstrat records it (env.cpu_model, cpu_count, host_memory_bytes);
# None where the record does not say (older records, baselines without it).
MACHINE_KEYS = ("cpu_model", "cpu_count", "host_memory_bytes")


def machine_of(env: dict[str, Any]) -> tuple | None:
    values = tuple(env.get(k) for k in MACHINE_KEYS)
    return None if any(v is None for v in values) else values


def machine_text(m: tuple) -> str:
    return f"{m[0]}, {m[1]} CPUs, {m[2] / 2**30:.0f} GiB"


def this_machine() -> tuple | None:
    """This host as memstrat reads it (common/host_info.cpp): the first "model name" of
    /proc/cpuinfo, the online CPUs, physical pages times the page size."""
    model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    model = value.strip()
                    break
    except OSError:
        return None
    try:
        cpus = os.sysconf("SC_NPROCESSORS_ONLN")
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    return None if model is None else (model, cpus, memory)


def describe_set(root: Path) -> dict[str, Any]:
    """The manifest of the set under `root`: provenance, and per records file its kinds."""
    files = records_files(root)
    if not files:
        raise SetError(f"{root}: no records/*.jsonl")
    commits: dict[str, set[str]] = {}    # commit -> the files whose records name it
    gpus: Counter = Counter()
    machines: Counter = Counter()
    drivers: Counter = Counter()
    dirty = False
    dates: list[str] = []
    contents: dict[str, dict[str, int]] = {}
    read: list[tuple[Path, dict]] = []
    for path in files:
        for source, rec in read_jsonl(path):
            if isinstance(rec, dict):
                rec["_source"] = source
                read.append((path, rec))
    once = {id(rec) for rec in drop_duplicates(rec for _, rec in read)}   # a run counts once
    for path in files:
        kinds: Counter = Counter()
        for rec in (rec for p, rec in read if p == path and id(rec) in once):
            kinds[f"{_kind(rec)}:{rec.get('status', 'ok')}"] += 1
            env = rec.get("env") or {}
            # every record that names a commit: memstrat's its build, a baseline its checkout
            if env.get("git_sha"):
                commits.setdefault(env["git_sha"], set()).add(str(path.relative_to(root)))
                dirty = dirty or bool(env.get("git_dirty"))
            if env.get("gpu_name"):
                gpus[env["gpu_name"]] += 1
            if (host := machine_of(env)) is not None:
                machines[host] += 1
            if env.get("driver_release"):
                drivers[env["driver_release"]] += 1
            if rec.get("started_at"):
                dates.append(rec["started_at"])
        contents[str(path.relative_to(root))] = dict(sorted(kinds.items()))
    if len(commits) > 1:
        named = "; ".join(f"{c} in {', '.join(sorted(f))}" for c, f in commits.items())
        raise SetError(f"{root}: records of several commits ({named}); a results set holds one "
                       "commit's records: regenerate it")
    if len(gpus) > 1:
        raise SetError(f"{root}: records of several GPUs ({', '.join(gpus)})")
    if len(machines) > 1:
        named = "; ".join(f"{machine_text(m)}: {n} records" for m, n in machines.items())
        raise SetError(f"{root}: records of several machines ({named}); a results set holds one "
                       "machine's records (the host moves the timings of the launch forms it "
                       "issues batch by batch): regenerate it on one")
    machine = next(iter(machines), None)
    return {
        "machine": None if machine is None else dict(zip(MACHINE_KEYS, machine)),
        "gpu": next(iter(gpus), None),
        "commit": next(iter(commits), None),
        "dirty": dirty,
        "driver": drivers.most_common(1)[0][0] if drivers else None,
        "date": min(dates)[:10] if dates else None,
        "first_record": min(dates) if dates else None,
        "last_record": max(dates) if dates else None,
        "records": contents,
    }


def _minutes(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60:02d} s"


def generated_files(root: Path) -> list[str]:
    """How the README names what the set holds of GENERATED and baselines/*.md."""
    out = [text for name, text in GENERATED if (root / name).exists()]
    if any((root / "baselines").glob("*.md")):
        out.append("`baselines/*.md`")
    return out


def readme_text(m: dict[str, Any], generated: Sequence[str]) -> str:
    """The README of manifest `m`, whose set holds `generated` (generated_files())."""
    lines = [f"# memstrat results: {m['gpu']}", ""]
    dirty = " (with uncommitted changes)" if m["dirty"] else ""
    driver = f"driver {m['driver']}" if m["driver"] else "driver not recorded"
    mach = m.get("machine")
    host = (f" in a host of {machine_text(tuple(mach[k] for k in MACHINE_KEYS))}" if mach else "")
    lines += [f"Measured at commit `{m['commit']}`{dirty} on an {m['gpu']} ({driver}){host}, "
              f"records from {m['first_record']} to {m['last_record']}, by "
              f"`{m['command']}`. Every number in this folder, in README.md and in docs/*.md "
              "comes from the records below; `python3 analysis/docs_blocks.py --check` "
              "verifies that the docs still say what these records say.", ""]
    if m.get("note"):
        lines += [f"Note: {m['note']}", ""]
    stages = m.get("stage_seconds") or {}
    if stages:
        total = sum(stages.values())
        lines += [f"Time on this GPU: {_minutes(total)} in all "
                  "(the stages resume, so a stage may have run in several sittings: its "
                  "time is their sum, reproduce.sh's stage_seconds.log):", "",
                  "| stage | time |", "|---|---|"]
        lines += [f"| {k} | {_minutes(v)} |" for k, v in stages.items()]
        lines.append("")
    lines += ["## Contents", "", "| file | what | records |", "|---|---|---|"]
    for path, kinds in m["records"].items():
        what = DESCRIPTIONS.get(path, "")
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items())
        lines.append(f"| `{path}` | {what} | {counts} |")
    if generated:
        listed = " and ".join(generated) if len(generated) < 3 else \
            ", ".join(generated[:-1]) + ", and " + generated[-1]
        lines += ["", f"Generated from the records: {listed}."]
    # the matrix's records (the one-GPU set's) are what the regression guard compares
    matrix = "records/results.jsonl" in m["records"]
    several = {"records/scaling.jsonl", "records/scaling4.jsonl",
               "records/gpus.jsonl"} & set(m["records"])
    where = "your GPU" if matrix or not several else \
        "a machine of as many GPUs"
    lines += ["", "## Use", "", "```bash",
              "bash experiments/scripts/reproduce.sh                       "
              f"# all of it, on {where}"]
    if matrix:
        lines.append("python3 analysis/compare.py docs/results/<gpu>/records/results.jsonl "
                     "NEW/records.jsonl")
    lines += ["```", ""]
    if matrix:
        lines += ["`analysis/compare.py` is the regression guard: it flags a configuration that "
                  "is more than 10% slower (Hodges-Lehmann ratio over processes) and significantly "
                  "different (two-sided Mann-Whitney U, Holm-corrected over the configurations "
                  "compared; docs/methodology.md).", ""]
    return "\n".join(lines)


def same_commit(a: str, b: str) -> bool:
    """Two spellings of one commit: one is a prefix of the other (12 or 40 hex digits)."""
    a, b = a.strip().lower(), b.strip().lower()
    return bool(a) and bool(b) and (a.startswith(b) or b.startswith(a))


def _named(root: Path, field: str) -> tuple[bool, Any]:
    """(readable, what the records under `root` name for manifest `field`; None where none do
    or there are no records). A set that cannot be described is said on stderr."""
    if not records_files(root):
        return True, None
    try:
        return True, describe_set(root)[field]
    except (SetError, RecordError) as e:
        print(f"results_readme: {e}", file=sys.stderr)
        return False, None


def expect_commit(root: Path, commit: str) -> int:
    """--expect-commit: 0 when every record under `root` names `commit` (or there is none),
    else 2 with what to do."""
    ok, named = _named(root, "commit")
    if not ok:
        return 2
    if named is None or same_commit(named, commit):
        return 0
    print(f"results_readme: {root} holds records of commit {named}, and this build is of "
          f"{commit}: check out {named} (and rebuild) to resume this set, or write the new "
          "commit's records into another one (reproduce.sh --out DIR)", file=sys.stderr)
    return 2


def expect_machine(root: Path) -> int:
    """--expect-machine: 0 when every record under `root` ran on this machine (or none says),
    else 2 with what to do."""
    ok, named = _named(root, "machine")
    if not ok:
        return 2
    here = this_machine()
    if named is None or here is None or tuple(named[k] for k in MACHINE_KEYS) == here:
        return 0
    print(f"results_readme: {root} holds records of another machine "
          f"({machine_text(tuple(named[k] for k in MACHINE_KEYS))}) than this one "
          f"({machine_text(here)}): resume the set on a machine like its own, or write this "
          "machine's records into another set (reproduce.sh --out DIR)", file=sys.stderr)
    return 2


def parse_stage_seconds(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            raise SetError(f"--stage-seconds: '{item}' is not NAME=SECONDS")
        out[name] = int(value)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path, help="the results set (e.g. docs/results/nvidia-h200)")
    p.add_argument("--command", default="bash experiments/scripts/reproduce.sh",
                   help="the command that produced the set")
    p.add_argument("--note", help="a line about the set's provenance, kept in the manifest and "
                                  "printed in the README (kept from an earlier manifest when "
                                  "not given)")
    p.add_argument("--stage-seconds", default="",
                   help="NAME=SECONDS,... the time each stage took (kept from an earlier "
                        "manifest for stages not given)")
    p.add_argument("--expect-commit", metavar="SHA",
                   help="write nothing: exit 2 unless every record the set holds names this "
                        "commit (a prefix matches: records keep 12 hex digits), so that a "
                        "stage resumed by another build never mixes two commits into one set; "
                        "0 for a set without records yet")
    p.add_argument("--expect-machine", action="store_true",
                   help="write nothing: exit 2 unless every record the set holds ran on this "
                        "machine (CPU model, CPU count, memory); with --expect-commit, both")
    a = p.parse_args(argv)
    if a.expect_commit is not None or a.expect_machine:
        rc = expect_commit(a.root, a.expect_commit) if a.expect_commit is not None else 0
        return rc or (expect_machine(a.root) if a.expect_machine else 0)
    try:
        m = describe_set(a.root)
        old = {}
        if (a.root / MANIFEST).is_file():
            old = json.loads((a.root / MANIFEST).read_text(encoding="utf-8"))
        m["command"] = a.command
        m["note"] = a.note if a.note is not None else old.get("note")
        m["stage_seconds"] = {**(old.get("stage_seconds") or {}),
                              **parse_stage_seconds(a.stage_seconds)}
    except (SetError, RecordError, json.JSONDecodeError) as e:
        print(f"results_readme: {e}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as e:
        print(f"results_readme: {a.root / MANIFEST}: cannot read: "
              f"{getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return 2
    try:
        (a.root / MANIFEST).write_text(json.dumps(m, indent=1) + "\n", encoding="utf-8")
        (a.root / README).write_text(readme_text(m, generated_files(a.root)), encoding="utf-8")
    except OSError as e:
        print(f"results_readme: cannot write {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"results_readme: wrote {a.root / README} and {a.root / MANIFEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
