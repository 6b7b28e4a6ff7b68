"""Drift over a machine's busy time: do its processes slow down the longer it has been running?

A configuration's processes are spread over the whole run in a shuffled order, so a machine
whose speed changes while it works does not bias one configuration against another: it widens
every configuration's spread between processes instead (analysis/spread.py finds that spread;
this finds whether busy time carries it). For each timed process:

- its **busy time**: minutes from the first record of its machine (the records' `env.boot_id`,
  one per boot of the machine) in the results set to its own `started_at`;
- its **relative value** of a part of the epoch (`wall_ms`, `gpu_ms`, `host_ms`): its steady
  median divided by the median of its configuration's other processes, minus 1 (leaving itself
  out, so that the middle process of a configuration is not exactly 0 by construction); a
  configuration
  joins a part where that part's median is at least MIN_SHARE of its epoch's (so the host work
  of a configuration whose host does next to nothing does not count).

Spearman's rank correlation (`scipy.stats.spearmanr`) of relative value against busy time,
pooled over every configuration with at least MIN_PROCESSES processes, tests for a monotonic
drift; the p-values of the parts are Holm-corrected together (stats.holm). The bands give its
size: the median relative value of the processes in each BAND_MINUTES of busy time. A part
whose GPU time stays flat while its host work drifts points at the host (its CPUs or memory),
not at the GPU or the strategy.
"""
from __future__ import annotations

import dataclasses
import datetime
import statistics
from typing import Sequence

from scipy import stats as sps

from analysis.spread import steady_values
from analysis.stats import ALPHA, holm

MIN_PROCESSES = 3     # per configuration: its median is the reference of its processes
MIN_SHARE = 0.10      # a configuration joins a part where the part is this share of its epoch
BAND_MINUTES = 5
PARTS = (("wall_ms", "epoch (wall clock)"), ("gpu_ms", "GPU time"), ("host_ms", "host work"))


@dataclasses.dataclass(frozen=True)
class Drift:
    metric: str
    label: str
    processes: int
    configurations: int
    machines: int
    rho: float | None             # Spearman's rho of relative value against busy time
    p: float | None               # Holm-adjusted over PARTS
    bands: tuple[tuple[int, int, float], ...]   # (band start, minutes; processes; median rel.)

    @property
    def drifts(self) -> bool:
        return self.p is not None and self.p < ALPHA


def _started(record: dict) -> datetime.datetime | None:
    text = record.get("started_at")
    if not text:
        return None
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def _machine(record: dict) -> str | None:
    return (record.get("env") or {}).get("boot_id")


def busy_minutes(records: Sequence[dict]) -> dict[int, float]:
    """id(record) -> minutes since the first of `records` from the same machine (boot); records
    without a start time or a boot id are left out."""
    first: dict[str, datetime.datetime] = {}
    for r in records:
        t, m = _started(r), _machine(r)
        if t is not None and m is not None and (m not in first or t < first[m]):
            first[m] = t
    out = {}
    for r in records:
        t, m = _started(r), _machine(r)
        if t is not None and m is not None:
            out[id(r)] = (t - first[m]).total_seconds() / 60.0
    return out


def measure(groups: Sequence) -> list[Drift]:
    """One Drift per part of PARTS that at least two configurations time (aggregate.Group's
    timing records)."""
    every = [r for g in groups for r in g.timing_records]
    minutes = busy_minutes(every)
    machines = {_machine(r) for r in every if id(r) in minutes}
    raw = []
    for metric, label in PARTS:
        xs, ys, configs = [], [], 0
        for g in groups:
            points = []
            for r in g.timing_records:
                values = steady_values(r, metric)
                if values and id(r) in minutes:
                    points.append((minutes[id(r)], statistics.median(values)))
            if len(points) < MIN_PROCESSES:
                continue
            ref = statistics.median(v for _, v in points)
            walls = [statistics.median(w) for w in map(steady_values, g.timing_records) if w]
            if ref <= 0 or not walls or ref < MIN_SHARE * statistics.median(walls):
                continue
            configs += 1
            for i, (m, v) in enumerate(points):
                others = statistics.median(w for j, (_, w) in enumerate(points) if j != i)
                if others > 0:
                    xs.append(m)
                    ys.append(v / others - 1.0)
        if configs < 2:
            continue
        rho = p = None
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            res = sps.spearmanr(xs, ys)
            rho, p = float(res.statistic), float(res.pvalue)
        bands: dict[int, list[float]] = {}
        for x, y in zip(xs, ys):
            bands.setdefault(int(x // BAND_MINUTES) * BAND_MINUTES, []).append(y)
        raw.append([metric, label, len(xs), configs, rho, p,
                    tuple((b, len(v), statistics.median(v)) for b, v in sorted(bands.items()))])
    adjusted = holm([r[5] for r in raw if r[5] is not None])
    it = iter(adjusted)
    return [Drift(metric, label, n, configs, len(machines), rho,
                  next(it) if p is not None else None, bands)
            for metric, label, n, configs, rho, p, bands in raw]


RULE = (f"Busy time: minutes from the first record of the process's machine (its boot) in this "
        f"results set. Relative value: the process's steady median over the median of its "
        f"configuration's other processes, minus 1 (configurations of {MIN_PROCESSES} or more processes in which the part "
        f"is at least {MIN_SHARE:.0%} of the epoch). Spearman's rank "
        f"correlation of the two, pooled over configurations, Holm-corrected over the parts at "
        f"{ALPHA:g}; each band gives the median relative value of the processes that started in "
        f"those {BAND_MINUTES} minutes of busy time (analysis/drift.py). The order of the "
        f"processes is shuffled, so a drift widens every configuration's spread between "
        f"processes without favouring one configuration.")


def _pct(rel: float) -> str:
    text = f"{rel:+.1%}"
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def table(drifts: Sequence[Drift]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per part, one column per band of busy time."""
    starts = sorted({b for d in drifts for b, _, _ in d.bands})
    headers = ["part", "processes", "Spearman rho", "Holm p", "drifts"] + [
        f"{b}-{b + BAND_MINUTES} min" for b in starts]
    rows = []
    for d in drifts:
        cells = {b: f"{_pct(rel)} (n={n})" for b, n, rel in d.bands}
        rows.append([d.label, str(d.processes),
                     "n/a" if d.rho is None else f"{d.rho:+.3f}",
                     "n/a" if d.p is None else f"{d.p:.2g}",
                     "yes" if d.drifts else "no"] + [cells.get(b, "") for b in starts])
    return headers, rows
