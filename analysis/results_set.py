"""A committed results set (docs/results/<gpu-slug>/) as the generated doc blocks read it.

Layout: ``records/*.jsonl`` (and/or a top-level ``records.jsonl``), optionally
``manifest.json``; the report, summary.csv and plots beside them are not read here: every
number is recomputed from the records with analysis/aggregate.py and analysis/stats.py.

Each JSON line is sorted by its kind before anything is validated:

- a memstrat run record (no ``record`` field, or ``"record": "run"``, and no
  ``config.framework`` other than memstrat): validated by analysis/records.py and aggregated;
- a primitive record (``"record": "primitive"``, docs/methodology.md "Transfer primitives"):
  the ``pinned-h2d`` ones give the pinned bulk host-to-device bandwidth of the floors, the
  ``sm-copy-mapped`` ones the bulk rate of SM loads from mapped host memory (the floor of the
  strategies that stage through SMs);
- anything else (PyTorch baseline runs, kinds added later) is counted and otherwise left
  alone, never an error.

The provenance (GPU, commit, driver, dates) comes from the run records' ``env`` and
``started_at``; ``manifest.json`` fills what the records do not carry (keys ``gpu``,
``commit``, ``driver``, ``date``) and must agree with them where both name a GPU or commit.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from analysis.aggregate import Group, LinkRates, aggregate
from analysis.records import (RECORDS_DIR, RECORDS_FILE, RUN_KIND, RecordError,
                              drop_duplicates, ok_records, read_jsonl, record_kind,
                              validate_record)

MANIFEST_FILE = "manifest.json"
PRIMITIVE_KIND = "primitive"
PINNED_PRIMITIVE = "pinned-h2d"
SM_MAPPED_PRIMITIVE = "sm-copy-mapped"


@dataclasses.dataclass(frozen=True)
class PinnedBandwidth:
    """Median over pinned-h2d primitive records of their peak bandwidth."""
    bytes_per_s: float
    records: int

    @property
    def gb_per_s(self) -> float:
        return self.bytes_per_s / 1e9


def _primitive_name(rec: dict[str, Any]) -> str | None:
    prim = rec.get("primitive")
    if isinstance(prim, dict) and isinstance(prim.get("name"), str):
        return prim["name"]
    cfg = rec.get("config")
    return cfg.get("primitive") if isinstance(cfg, dict) else None


def _peak_gbps(rec: dict[str, Any]) -> float:
    """summary.peak_gbps, else the highest results[].gbps; RecordError when neither."""
    summary = rec.get("summary")
    peak = summary.get("peak_gbps") if isinstance(summary, dict) else None
    if peak is None and isinstance(rec.get("results"), list):
        rates = [r.get("gbps") for r in rec["results"] if isinstance(r, dict)]
        rates = [r for r in rates if isinstance(r, (int, float)) and not isinstance(r, bool)]
        peak = max(rates) if rates else None
    if isinstance(peak, bool) or not isinstance(peak, (int, float)) or peak <= 0:
        raise RecordError(rec.get("_source", "?"),
                          f"{_primitive_name(rec)} record with status ok but no positive "
                          "summary.peak_gbps or results[].gbps")
    return float(peak)


def pinned_bandwidth(primitives: list[dict[str, Any]], gpus: set[str],
                     name: str = PINNED_PRIMITIVE) -> PinnedBandwidth | None:
    """From the ok `name` (pinned-h2d) primitive records of the runs' GPUs; None without any."""
    peaks = [_peak_gbps(r) for r in primitives
             if r.get("status") == "ok" and _primitive_name(r) == name
             and ((r.get("env") or {}).get("gpu_name") or "unknown GPU") in gpus]
    if not peaks:
        return None
    return PinnedBandwidth(statistics.median(peaks) * 1e9, len(peaks))


@dataclasses.dataclass(frozen=True)
class Provenance:
    gpus: tuple[str, ...]
    commits: tuple[str, ...]
    drivers: tuple[str, ...]
    dates: tuple[str, ...]      # first and last day the runs started (one when equal)

    @property
    def gpu(self) -> str:
        return ", ".join(self.gpus) or "GPU not recorded"

    @property
    def commit(self) -> str:
        if not self.commits:
            return "commit not recorded"
        return ("commits " if len(self.commits) > 1 else "commit ") + ", ".join(self.commits)

    @property
    def date(self) -> str:
        return " to ".join(self.dates) or "date not recorded"

    def text(self) -> str:
        """'commit abc on NVIDIA H200, driver 580.159.04, 2026-11-24'."""
        return ", ".join([f"{self.commit} on {self.gpu}", *self.drivers, self.date])


@dataclasses.dataclass
class ResultsSet:
    path: Path                      # where it is on disk
    label: str                      # how the docs name it, e.g. docs/results/nvidia-h200
    runs: list[dict[str, Any]]      # memstrat run records, ok and failed
    primitives: list[dict[str, Any]]
    ignored: Counter                # record kind -> lines not read
    manifest: dict[str, Any]
    groups: list[Group] = dataclasses.field(default_factory=list)
    pinned: PinnedBandwidth | None = None
    sm_mapped: PinnedBandwidth | None = None     # the sm-copy-mapped peak, same median
    provenance: Provenance | None = None

    @property
    def rates(self) -> LinkRates:
        """The measured bulk rates the floors use, per link."""
        return LinkRates(self.pinned.bytes_per_s if self.pinned else None,
                         self.sm_mapped.bytes_per_s if self.sm_mapped else None)


def record_files(path: Path) -> list[Path]:
    files = sorted((path / RECORDS_DIR).glob("*.jsonl"))
    if (path / RECORDS_FILE).is_file():
        files.append(path / RECORDS_FILE)
    return files


def load_results_set(path: str | Path, label: str) -> ResultsSet:
    """Read and aggregate one results set; RecordError names the file/line of a problem."""
    path = Path(path)
    if not path.is_dir():
        raise RecordError(label, "no such results set (directory)")
    files = record_files(path)
    if not files:
        raise RecordError(label, f"no {RECORDS_DIR}/*.jsonl (nor {RECORDS_FILE}) in this "
                                 "results set")
    rs = ResultsSet(path, label, [], [], Counter(), _manifest(path / MANIFEST_FILE))
    for f in files:
        for source, rec in read_jsonl(f):
            _add_line(rs, rec, source)
    rs.runs = drop_duplicates(rs.runs)
    rs.primitives = drop_duplicates(rs.primitives)
    ok = ok_records(rs.runs)
    if not ok:
        raise RecordError(label, f"no memstrat run record with status ok "
                                 f"({len(rs.runs)} failed)")
    rs.groups = aggregate(ok)
    rs.provenance = _provenance(rs, ok)
    gpus = {g.key.gpu for g in rs.groups}
    rs.pinned = pinned_bandwidth(rs.primitives, gpus)
    rs.sm_mapped = pinned_bandwidth(rs.primitives, gpus, SM_MAPPED_PRIMITIVE)
    return rs


def _add_line(rs: ResultsSet, rec: Any, source: str) -> None:
    if not isinstance(rec, dict):
        raise RecordError(source, "a record must be a JSON object")
    kind = record_kind(rec)
    if kind == RUN_KIND:
        rs.runs.append(validate_record(rec, source))
    elif kind == PRIMITIVE_KIND:
        rec["_source"] = source
        rs.primitives.append(rec)
    else:
        rs.ignored[kind] += 1


def _manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(str(path), f"not valid JSON ({e.msg} at line {e.lineno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(str(path), f"cannot read: {getattr(e, 'strerror', None) or e}") \
            from None
    return doc if isinstance(doc, dict) else {}


def _provenance(rs: ResultsSet, ok: list[dict[str, Any]]) -> Provenance:
    envs = [r.get("env") or {} for r in ok]
    gpus = sorted({e["gpu_name"] for e in envs if e.get("gpu_name")})
    commits = sorted({e["git_sha"] + (" (uncommitted changes)" if e.get("git_dirty") else "")
                      for e in envs if e.get("git_sha")})
    drivers = sorted({f"driver {e['driver_release']}" for e in envs if e.get("driver_release")})
    days = sorted({r["started_at"][:10] for r in ok if isinstance(r.get("started_at"), str)})
    m = rs.manifest
    src = str(rs.path / MANIFEST_FILE)
    if m.get("gpu") and gpus and [str(m["gpu"])] != gpus:
        raise RecordError(src, f"names GPU {m['gpu']!r} but the records were run on "
                               f"{', '.join(gpus)}")
    if m.get("commit") and commits and not all(_same_commit(str(m["commit"]), c.split()[0])
                                               for c in commits):
        raise RecordError(src, f"names commit {m['commit']!r} but the records carry "
                               f"{', '.join(commits)}")
    if not gpus and m.get("gpu"):
        gpus = [str(m["gpu"])]
    if not commits and m.get("commit"):
        commits = [str(m["commit"])]
    if not drivers:
        if m.get("driver"):
            drivers = [f"driver {m['driver']}"]
        else:
            drivers = sorted({f"CUDA driver {e['driver_version']}" for e in envs
                              if e.get("driver_version")})
    if not days and m.get("date"):
        days = [str(m["date"])]
    dates = tuple(days[:1] + days[-1:]) if len(days) > 1 else tuple(days)
    return Provenance(tuple(gpus), tuple(commits), tuple(drivers), dates)


def _same_commit(a: str, b: str) -> bool:
    """Abbreviated and full SHAs of one commit: one is a prefix of the other."""
    return a.startswith(b) or b.startswith(a)
