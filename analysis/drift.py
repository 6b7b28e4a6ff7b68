"""Where spread between processes comes from, beyond the strategy: the machine (boot) that ran
the process, the machine's busy time, and the process's own host.

A configuration's processes are spread over the whole run in a shuffled order, so a machine
that is slower than another, or whose speed changes while it works, does not bias one
configuration against another: it widens every configuration's spread between processes
instead (analysis/spread.py finds that spread; this tests three sources of it). For each timed process:

- its **busy time**: minutes from the first record of its machine (the records' `env.boot_id`,
  one per boot of the machine) in the results set to its own `started_at`;
- its **relative set-up time**: its `setup.ms` (loading the data, allocating, building graphs:
  host work before epoch 1) over the median of its configuration's other processes, minus 1;
- its **relative value** of a part of the epoch (`wall_ms`, `gpu_ms`, `host_ms`): its steady
  median over the median of its configuration's other processes, minus 1 (leaving itself out,
  so that the middle process of a configuration is not exactly 0 by construction). A
  configuration joins a part where that part's median is at least MIN_SHARE of its epoch's (so
  the host work of a configuration whose host does next to nothing does not count).

A results set is made over several boots of a machine (a lent machine is held for minutes at a
time), and the boots need not run the host equally fast (another tenant's load, say). Three tests
per part, pooled over every configuration with at least MIN_PROCESSES processes:

- **between machines**: Kruskal-Wallis (`scipy.stats.kruskal`) of the relative values across the
  boots with at least MIN_PROCESSES of them; each boot's median relative value gives the size;
- **busy time** and **set-up time**: Spearman's rank correlation (`scipy.stats.spearmanr`) of the
  relative value against each, *within* a machine: the relative values and set-up times are
  taken from their boot's median first, so that a slow boot counts in the first test only.

The p-values of every part and the three tests are Holm-corrected together (stats.holm). The
bands give the drift's size: the median (within-machine) relative value of the processes in
each BAND_MINUTES of busy time. A part that drifts while GPU time stays flat points at the host
(its CPUs or memory); a part that follows set-up time slows with its process's own host (where
its memory and threads landed, say), neither with the machine nor with the strategy.
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
    machine_p: float | None = None  # Kruskal-Wallis across boots, Holm-adjusted
    levels: tuple[tuple[int, float], ...] = ()  # per boot (in order of first start): n, median rel.

    @property
    def drifts(self) -> bool:
        return self.p is not None and self.p < ALPHA

    @property
    def follows_setup(self) -> bool:
        return self.setup_p is not None and self.setup_p < ALPHA

    @property
    def differs_by_machine(self) -> bool:
        return self.machine_p is not None and self.machine_p < ALPHA


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
    known = _known(records)
    return _minutes(known, _first_starts(known))


def _minutes(known: Sequence[tuple[int, datetime.datetime, str]],
             first: dict[str, datetime.datetime]) -> dict[int, float]:
    return {key: (t - first[m]).total_seconds() / 60.0 for key, t, m in known}


def _known(records: Sequence[dict]) -> list[tuple[int, datetime.datetime, str]]:
    return [(id(r), t, m) for r in records
            if (t := _started(r)) is not None and (m := _machine(r)) is not None]


def _first_starts(known: Sequence[tuple[int, datetime.datetime, str]]
                  ) -> dict[str, datetime.datetime]:
    """machine (boot) -> its first start among `known` (from _known)."""
    first: dict[str, datetime.datetime] = {}
    for _, t, m in known:
        first[m] = min(t, first.get(m, t))
    return first


def measure(groups: Sequence) -> list[Drift]:
    """One Drift per part of PARTS that at least two configurations time (aggregate.Group's
    timing records)."""
    every = [r for g in groups for r in g.timing_records]
    known = _known(every)                                 # each start time parsed once
    first = _first_starts(known)
    minutes = _minutes(known, first)
    order = sorted(first, key=lambda m: (first[m], m))   # boots in order of their first start
    drafts = []                                           # p-values not yet adjusted
    for metric, label in PARTS:
        points, configs = _relative_points(groups, metric, minutes)
        if configs < 2:
            continue
        by_machine: dict[str, list[tuple[float, float, float | None]]] = {}
        for machine, x, y, u in points:
            by_machine.setdefault(machine, []).append((x, y, u))
        xs, ys, setups = _within_machine(by_machine.values())
        rho, p = _spearman(xs, ys)
        paired = [(u, y) for u, y in zip(setups, ys) if u is not None]
        setup_rho, setup_p = _spearman([u for u, _ in paired], [y for _, y in paired])
        levels = [[y for _, y, _ in by_machine[m]] for m in order if m in by_machine]
        tested = [v for v in levels if len(v) >= MIN_PROCESSES]
        machine_p = (float(sps.kruskal(*tested).pvalue)
                     if len(tested) >= 2 and len({y for v in tested for y in v}) > 1 else None)
        bands: dict[int, list[float]] = {}
        for x, y in zip(xs, ys):
            bands.setdefault(int(x // BAND_MINUTES) * BAND_MINUTES, []).append(y)
        drafts.append(Drift(
            metric, label, len(xs), configs, len(first), rho, p,
            tuple((b, len(v), statistics.median(v)) for b, v in sorted(bands.items())),
            setup_rho, setup_p, machine_p,
            tuple((len(v), statistics.median(v)) for v in levels)))
    # one family: the three tests of every part (adjusted in the order they are listed here)
    it = iter(holm([q for d in drafts for q in (d.p, d.setup_p, d.machine_p) if q is not None]))
    adj = lambda q: next(it) if q is not None else None  # noqa: E731
    return [dataclasses.replace(d, p=adj(d.p), setup_p=adj(d.setup_p), machine_p=adj(d.machine_p))
            for d in drafts]


def _within_machine(machines) -> tuple[list[float], list[float], list[float | None]]:
    """Busy minutes, relative values and relative set-up times of every machine's points, each
    machine's median value and set-up time taken out (the machines test sees those levels)."""
    xs, ys, setups = [], [], []
    for pts in machines:
        y_mid = statistics.median(y for _, y, _ in pts)
        known = [u for _, _, u in pts if u is not None]
        u_mid = statistics.median(known) if known else 0.0
        for x, y, u in pts:
            xs.append(x)
            ys.append(y - y_mid)
            setups.append(None if u is None else u - u_mid)
    return xs, ys, setups


def _relative_points(groups: Sequence, metric: str, minutes: dict[int, float]
                     ) -> tuple[list[tuple[str, float, float, float | None]], int]:
    """(machine, busy minutes, relative value, relative set-up time) of every timed process of
    the configurations that join this part, and how many configurations joined."""
    out, configs = [], 0
    for g in groups:
        # each process's steady median (aggregate.Group's, in timing_records' order)
        pts = [(_machine(r), minutes[id(r)], v, _setup_ms(r))
               for r, v in zip(g.timing_records, g.process_medians(metric))
               if v is not None and id(r) in minutes]
        if len(pts) < MIN_PROCESSES:
            continue
        ref, wall = statistics.median(v for _, _, v, _ in pts), g.median("wall_ms")
        if ref <= 0 or wall is None or ref < MIN_SHARE * wall:
            continue
        configs += 1
        for i, (machine, m, v, u) in enumerate(pts):
            others = [q for j, q in enumerate(pts) if j != i]
            mid = statistics.median(q[2] for q in others)
            if mid > 0:
                out.append((machine, m, v / mid - 1.0, _relative(u, [q[3] for q in others])))
    return out, configs


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


RULE = (f"Relative value: the process's steady median over the median of its configuration's "
        f"other processes, minus 1 (configurations of {MIN_PROCESSES} or more processes in which "
        f"the part is at least {MIN_SHARE:.0%} of the epoch). Machines: the boots of the "
        f"machines that ran the set (`env.boot_id`); Kruskal-Wallis of the relative values "
        f"across the boots with {MIN_PROCESSES} or more of them, and the range of the boots' "
        f"median relative values. Busy time: minutes from the first record of the process's "
        f"boot in this results set; Spearman's rank correlation of relative value and busy time "
        f"within a boot (each boot's median relative value taken out first), pooled over "
        f"configurations; each band gives the median of those values for the processes that "
        f"started in those {BAND_MINUTES} minutes of busy time. Set-up time: the same "
        f"correlation with the process's own set-up (`setup.ms`: loading the data, allocating, "
        f"building graphs, all on the host before epoch 1) relative to its configuration's "
        f"other processes, also within a boot: a part that follows it slows with its process's "
        f"host, neither with the machine nor with the strategy. The three tests of every part "
        f"are Holm-corrected together at {ALPHA:g} (analysis/drift.py). The order of the "
        f"processes is shuffled over the boots, so none of the three sources favours one "
        f"configuration over another: each widens every configuration's spread between "
        f"processes.")


def summary(drifts: Sequence[Drift]) -> str:
    """'Parts of the epoch that differ between the machines that ran the set: host work. Parts
    that drift with ... Parts that follow ...' (or that none does)."""
    machines = [d.label for d in drifts if d.differs_by_machine]
    busy = [d.label for d in drifts if d.drifts]
    own = [d.label for d in drifts if d.follows_setup]
    return ((f"Parts of the epoch that differ between the machines (boots) that ran the set: "
             f"{', '.join(machines)}." if machines else
             "No part of the epoch differs between the machines (boots) that ran the set.") +
            " " +
            (f"Parts that drift with the machine's busy time: {', '.join(busy)}."
             if busy else "No part drifts with the machine's busy time.") + " " +
            (f"Parts that follow their process's own set-up time: {', '.join(own)}."
             if own else "No part follows its process's own set-up time."))


def _pct(rel: float) -> str:
    text = f"{rel:+.1%}"
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def table(drifts: Sequence[Drift]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per part; the machines test, the busy-time test, the
    set-up-time test, then one column per band of busy time."""
    starts = sorted({b for d in drifts for b, _, _ in d.bands})
    headers = ["part", "processes", "machines: Holm p", "boots' medians", "busy time: rho",
               "Holm p", "drifts", "set-up time: rho", "Holm p"] + [
                   f"{b}-{b + BAND_MINUTES} min" for b in starts]
    rows = []
    for d in drifts:
        cells = {b: f"{_pct(rel)} (n={n})" for b, n, rel in d.bands}
        rows.append([d.label, str(d.processes), _num(d.machine_p, ".2g"), _levels(d.levels),
                     _num(d.rho, "+.3f"), _num(d.p, ".2g"), "yes" if d.drifts else "no",
                     _num(d.setup_rho, "+.3f"), _num(d.setup_p, ".2g")] + [
                         cells.get(b, "") for b in starts])
    return headers, rows


def _levels(levels: Sequence[tuple[int, float]]) -> str:
    """'-18.9% to +8.5% (2 boots)': the range of the boots' median relative values."""
    if not levels:
        return "n/a"
    meds = [rel for _, rel in levels]
    if len(meds) == 1:
        return f"{_pct(meds[0])} (1 boot)"
    return f"{_pct(min(meds))} to {_pct(max(meds))} ({len(meds)} boots)"


def _num(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)
