"""Where spread between processes comes from, beyond the strategy: the machine's busy time,
and the process's own host.

A configuration's processes are spread over the whole run in a shuffled order, so a machine
whose speed changes while it works does not bias one configuration against another: it widens
every configuration's spread between processes instead (analysis/spread.py finds that spread;
this tests two sources of it). For each timed process:

- its **busy time**: minutes from the first record of its machine (the records' `env.boot_id`,
  one per boot of the machine) in the results set to its own `started_at`;
- its **relative set-up time**: its `setup.ms` (loading the data, allocating, building graphs:
  host work before epoch 1) over the median of its configuration's other processes, minus 1;
- its **relative value** of a part of the epoch (`wall_ms`, `gpu_ms`, `host_ms`): its steady
  median over the median of its configuration's other processes, minus 1 (leaving itself out,
  so that the middle process of a configuration is not exactly 0 by construction). A
  configuration joins a part where that part's median is at least MIN_SHARE of its epoch's (so
  the host work of a configuration whose host does next to nothing does not count).

Spearman's rank correlation (`scipy.stats.spearmanr`) of relative value against busy time, and
against relative set-up time, pooled over every configuration with at least MIN_PROCESSES
processes; the p-values of every part and both tests are Holm-corrected together (stats.holm).
The bands give the drift's size: the median relative value of the processes in each
BAND_MINUTES of busy time. A part that drifts while GPU time stays flat points at the host (its
CPUs or memory); a part that follows set-up time slows with its process's own host, whatever
the machine's busy time (where its memory and threads landed, say), not with the strategy.
"""
from __future__ import annotations

import dataclasses
import datetime
import statistics
from typing import Sequence

from scipy import stats as sps

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
    p: float | None               # Holm-adjusted over every test of `measure`
    bands: tuple[tuple[int, int, float], ...]   # (band start, minutes; processes; median rel.)
    setup_rho: float | None = None  # ... against the process's relative set-up time
    setup_p: float | None = None

    @property
    def drifts(self) -> bool:
        return self.p is not None and self.p < ALPHA

    @property
    def follows_setup(self) -> bool:
        return self.setup_p is not None and self.setup_p < ALPHA


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
    known = [(id(r), t, m) for r in records
             if (t := _started(r)) is not None and (m := _machine(r)) is not None]
    first: dict[str, datetime.datetime] = {}
    for _, t, m in known:
        first[m] = min(t, first.get(m, t))
    return {key: (t - first[m]).total_seconds() / 60.0 for key, t, m in known}


def measure(groups: Sequence) -> list[Drift]:
    """One Drift per part of PARTS that at least two configurations time (aggregate.Group's
    timing records)."""
    every = [r for g in groups for r in g.timing_records]
    minutes = busy_minutes(every)
    machines = {_machine(r) for r in every if id(r) in minutes}
    raw = []
    for metric, label in PARTS:
        xs, ys, setups, configs = [], [], [], 0
        for g in groups:
            # each process's steady median (aggregate.Group's, in timing_records' order)
            points = [(minutes[id(r)], v, _setup_ms(r))
                      for r, v in zip(g.timing_records, g.process_medians(metric))
                      if v is not None and id(r) in minutes]
            if len(points) < MIN_PROCESSES:
                continue
            ref, wall = statistics.median(v for _, v, _ in points), g.median("wall_ms")
            if ref <= 0 or wall is None or ref < MIN_SHARE * wall:
                continue
            configs += 1
            for i, (m, v, _) in enumerate(points):
                others = [p for j, p in enumerate(points) if j != i]
                mid = statistics.median(w for _, w, _ in others)
                if mid > 0:
                    xs.append(m)
                    ys.append(v / mid - 1.0)
                    setups.append(_relative(points[i][2], [u for _, _, u in others]))
        if configs < 2:
            continue
        rho, p = _spearman(xs, ys)
        paired = [(y, u) for y, u in zip(ys, setups) if u is not None]
        setup_rho, setup_p = _spearman([u for _, u in paired], [y for y, _ in paired])
        bands: dict[int, list[float]] = {}
        for x, y in zip(xs, ys):
            bands.setdefault(int(x // BAND_MINUTES) * BAND_MINUTES, []).append(y)
        raw.append([metric, label, len(xs), configs, rho, p,
                    tuple((b, len(v), statistics.median(v)) for b, v in sorted(bands.items())),
                    setup_rho, setup_p])
    # one family: busy time and set-up time, every part
    ps = [q for r in raw for q in (r[5], r[8]) if q is not None]
    it = iter(holm(ps))
    out = []
    for metric, label, n, configs, rho, p, bands, setup_rho, setup_p in raw:
        p_adj = next(it) if p is not None else None
        setup_adj = next(it) if setup_p is not None else None
        out.append(Drift(metric, label, n, configs, len(machines), rho, p_adj, bands,
                         setup_rho, setup_adj))
    return out


def _setup_ms(record: dict) -> float | None:
    v = (record.get("setup") or {}).get("ms")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def _relative(value: float | None, others: Sequence[float | None]) -> float | None:
    """value over the median of `others`, minus 1; None when any is missing."""
    if value is None or not others or any(o is None for o in others):
        return None
    mid = statistics.median(others)
    return value / mid - 1.0 if mid > 0 else None


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> tuple[float | None, float | None]:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None, None
    res = sps.spearmanr(xs, ys)
    return float(res.statistic), float(res.pvalue)


RULE = (f"Busy time: minutes from the first record of the process's machine (its boot) in this "
        f"results set. Relative value: the process's steady median over the median of its "
        f"configuration's other processes, minus 1 (configurations of {MIN_PROCESSES} or more "
        f"processes in which the part is at least {MIN_SHARE:.0%} of the epoch). Spearman's "
        f"rank correlation of the two, pooled over configurations; each band gives the median "
        f"relative value of the processes that started in those {BAND_MINUTES} minutes of busy "
        f"time. Set-up time: the same correlation with the process's own set-up (`setup.ms`: "
        f"loading the data, allocating, building graphs, all on the host before epoch 1) "
        f"relative to its configuration's other processes: a part that follows it slows with "
        f"its process's host, whatever the machine's busy time. Both tests of every part are "
        f"Holm-corrected together at {ALPHA:g} (analysis/drift.py). The order of the processes "
        f"is shuffled, so neither source favours one configuration over another: each widens "
        f"every configuration's spread between processes.")


def summary(drifts: Sequence[Drift]) -> str:
    """'Parts of the epoch that drift with the machine's busy time: host work. Parts that follow
    their process's own set-up time: ...' (or that none does)."""
    busy = [d.label for d in drifts if d.drifts]
    own = [d.label for d in drifts if d.follows_setup]
    return ((f"Parts of the epoch that drift with the machine's busy time: {', '.join(busy)}."
             if busy else "No part of the epoch drifts with the machine's busy time.") + " " +
            (f"Parts that follow their process's own set-up time: {', '.join(own)}."
             if own else "No part follows its process's own set-up time."))


def _pct(rel: float) -> str:
    text = f"{rel:+.1%}"
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def table(drifts: Sequence[Drift]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per part; the busy-time test, the set-up-time test, then one
    column per band of busy time."""
    starts = sorted({b for d in drifts for b, _, _ in d.bands})
    headers = ["part", "processes", "busy time: rho", "Holm p", "drifts",
               "set-up time: rho", "Holm p"] + [f"{b}-{b + BAND_MINUTES} min" for b in starts]
    rows = []
    for d in drifts:
        cells = {b: f"{_pct(rel)} (n={n})" for b, n, rel in d.bands}
        rows.append([d.label, str(d.processes), _num(d.rho, "+.3f"), _num(d.p, ".2g"),
                     "yes" if d.drifts else "no", _num(d.setup_rho, "+.3f"),
                     _num(d.setup_p, ".2g")] + [cells.get(b, "") for b in starts])
    return headers, rows


def _num(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)
