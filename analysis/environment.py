"""The report's Environment section: where the runs ran, and whether the GPU's clocks held.

environment_rows() turns the records' ``env`` (and ``env_end``) into the table's rows, with
notes where the runs come from more than one set-up. clock_warnings() says how many timed runs
had their clocks held down (an NVML clock-event reason other than gpu_idle at the start or the
end of the run) and how many ended with an SM clock more than CLOCK_CHANGE from where it started:
both add spread that the timing alone cannot explain (docs/methodology.md, Environment).
Records written before these keys existed, and runs without NVML, have none of them: they are
counted as not checked, never as clean.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from analysis.document import Doc

CLOCK_CHANGE = 0.05          # |end / start - 1| of the SM clock above which a run is flagged
IDLE = "gpu_idle"            # the GPU had nothing to run: its clock is the idle clock


def _run_label(r: dict) -> str:
    c = r.get("config") or {}
    return str(c.get("run_tag") or c.get("strategy") or r.get("run_id") or "?")


def _span(values: Sequence[Any], unit: str = "") -> str | None:
    """'345-1980 MHz' over the values given (None left out), '1980 MHz' when all agree."""
    vals = sorted(v for v in values if isinstance(v, (int, float)))
    if not vals:
        return None
    fmt = (lambda v: f"{v:g}") if any(isinstance(v, float) for v in vals) else str
    text = fmt(vals[0]) if vals[0] == vals[-1] else f"{fmt(vals[0])}-{fmt(vals[-1])}"
    return text + unit


def _start_end(records: Sequence[dict], key: str, unit: str) -> str | None:
    """'start 345-1410 MHz, end 1980 MHz' over the runs (env at the start, env_end at the end)."""
    start = _span([(r.get("env") or {}).get(key) for r in records], unit)
    end = _span([(r.get("env_end") or {}).get(key) for r in records], unit)
    if start is None and end is None:
        return None
    return f"start {start or 'n/a'}, end {end or 'n/a'}"


def _reason_counts(records: Sequence[dict]) -> dict[str, int]:
    """Clock-event reason other than gpu_idle -> runs that had it at the start or the end."""
    counts: dict[str, int] = {}
    for r in records:
        seen = set()
        for snap in (r.get("env"), r.get("env_end")):
            seen |= set((snap or {}).get("clock_event_reasons") or []) - {IDLE}
        for reason in seen:
            counts[reason] = counts.get(reason, 0) + 1
    return counts


# Every env field the environment table's rows read.
ROW_FIELDS = ("gpu_name", "compute_capability", "sm_count", "gpu_memory_bytes", "driver_version",
              "runtime_version", "pcie_gen", "pcie_width", "pcie_max_gen", "pcie_max_width",
              "async_engine_count", "concurrent_managed_access", "pageable_memory_access",
              "persistence_mode", "host", "cpu_model", "cpu_count", "cpu_affinity",
              "cpu_affinity_count", "gpu_numa_node", "memstrat_version", "git_sha", "git_dirty")


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def environment_rows(records: Sequence[dict]) -> tuple[list[list[str]], list[str]]:
    """Rows for the environment table, and warnings when runs came from different set-ups."""
    with_env = [r for r in records if r.get("env")]
    # One env per distinct combination of the fields the rows read: a results set repeats one
    # machine's env in every record (the rows list distinct values in first-seen order).
    distinct: dict[tuple, dict] = {}
    for r in with_env:
        e = r["env"]
        key = tuple(map(e.get, ROW_FIELDS))
        try:
            distinct.setdefault(key, e)
        except TypeError:                  # a list or object value: compare it as a tuple
            distinct.setdefault(tuple(map(_hashable, key)), e)
    envs = list(distinct.values())

    def values(fmt: Callable[[dict], str | None]) -> list[str]:
        seen: list[str] = []
        for e in envs:
            v = fmt(e)
            if v is not None and v not in seen:
                seen.append(v)
        return seen

    def gpu(e):
        if not e.get("gpu_name"):
            return None
        extra = []
        if e.get("compute_capability"):
            extra.append(f"cc {e['compute_capability']}")
        if e.get("sm_count"):
            extra.append(f"{e['sm_count']} SMs")
        if e.get("gpu_memory_bytes"):
            extra.append(f"{e['gpu_memory_bytes'] / 2**30:.1f} GiB")
        return e["gpu_name"] + (f" ({', '.join(extra)})" if extra else "")

    def link(gen, width):
        return f"gen {gen if gen is not None else '?'} x{width if width is not None else '?'}"

    def pcie(e, gen="pcie_gen", width="pcie_width"):
        g, w = e.get(gen), e.get(width)
        return None if g is None and w is None else link(g, w)

    def git(e):
        if not e.get("git_sha"):
            return None
        return e["git_sha"] + (" (uncommitted changes)" if e.get("git_dirty") else "")

    def um(e):
        if "concurrent_managed_access" not in e:
            return None
        return (f"concurrentManagedAccess={int(bool(e['concurrent_managed_access']))}, "
                f"pageableMemoryAccess={int(bool(e.get('pageable_memory_access')))}")

    def cpu(e):
        if not e.get("cpu_model") and e.get("cpu_count") is None:
            return None
        return f"{e.get('cpu_model') or 'unknown model'} ({e.get('cpu_count') or '?'} online)"

    def affinity(e):
        if not e.get("cpu_affinity"):
            return None
        return f"{e['cpu_affinity']} ({e.get('cpu_affinity_count') or '?'} CPUs)"

    def numa(e):
        n = e.get("gpu_numa_node")
        return None if n is None else ("none (-1)" if n < 0 else str(n))

    def persistence(e):
        p = e.get("persistence_mode")
        return None if p is None else ("on" if p else "off")

    spec = [
        ("GPU", gpu),
        ("Driver / runtime", lambda e: (f"{e.get('driver_version') or 'n/a'} / "
                                        f"{e.get('runtime_version') or 'n/a'}")
         if (e.get("driver_version") or e.get("runtime_version")) else None),
        ("PCIe link", pcie),
        ("Copy engines", lambda e: None if e.get("async_engine_count") is None
         else str(e["async_engine_count"])),
        ("Managed memory", um),
        ("Persistence mode", persistence),
        ("Host", lambda e: e.get("host")),
        ("CPU", cpu),
        ("CPU affinity", affinity),
        ("GPU NUMA node", numa),
        ("memstrat", lambda e: e.get("memstrat_version")),
        ("git revision", git),
    ]
    rows, warnings = [], []
    for label, fmt in spec:
        vals = values(fmt)
        text = ", ".join(vals) if vals else "n/a (not in the records)"
        if label == "PCIe link" and vals:  # the maximum where NVML gave it
            maxes = values(lambda e: pcie(e, "pcie_max_gen", "pcie_max_width"))
            text += f" (max {', '.join(maxes)})" if maxes else ""
        rows.append([label, text])
        if len(vals) > 1 and label in ("GPU", "Driver / runtime", "git revision", "PCIe link",
                                       "CPU affinity", "GPU NUMA node"):
            warnings.append(f"The runs come from more than one {label}: {', '.join(vals)}. "
                            "Groups are split by GPU; compare across the others with care.")
    for label, key, unit in (("SM clock", "sm_clock_mhz", " MHz"),
                             ("Memory clock", "mem_clock_mhz", " MHz"),
                             ("GPU temperature", "temperature_c", " °C"),
                             ("GPU power", "power_w", " W")):
        rows.append([label, _start_end(with_env, key, unit) or "n/a (not in the records)"])
    counts = _reason_counts(with_env)
    has_reasons = any((r.get(k) or {}).get("clock_event_reasons") is not None
                      for r in with_env for k in ("env", "env_end"))
    rows.append(["Clock-event reasons other than idle",
                 ", ".join(f"{k} ({n} run{'s' if n != 1 else ''})"
                           for k, n in sorted(counts.items())) if counts
                 else ("none" if has_reasons else "n/a (not in the records)")])
    started = sorted(r["started_at"] for r in records if isinstance(r.get("started_at"), str))
    if started:
        rows.append(["Runs started", f"{started[0]} to {started[-1]}" if len(started) > 1
                     else started[0]])
    return rows, warnings


def _listed(runs: Sequence[dict], most: int = 4) -> str:
    names = [_run_label(r) for r in runs]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most
                                      else "")


def _clock_pairs(runs: Sequence[dict]) -> tuple[list[tuple[dict, int, int]], int, int]:
    """(run, start, end) SM clocks of the runs that can be compared, and how many cannot:
    read with the GPU idle at either end, and without a clock at either end."""
    pairs, idle, unread = [], 0, 0
    for r in runs:
        start, end = r.get("env") or {}, r.get("env_end") or {}
        s, e = start.get("sm_clock_mhz"), end.get("sm_clock_mhz")
        if not s or not e:
            unread += 1
        elif IDLE in (start.get("clock_event_reasons") or []) + \
                (end.get("clock_event_reasons") or []):
            idle += 1
        else:
            pairs.append((r, s, e))
    return pairs, idle, unread


def clock_warnings(runs: Sequence[dict]) -> list[str]:
    """The report's warnings about the clocks of the timed runs `runs` (empty when none).

    Held down: a clock-event reason other than gpu_idle in env or env_end. Changed: the SM
    clock at the end differs from the start by more than CLOCK_CHANGE; compared only where
    both snapshots have a clock and neither is marked gpu_idle, since an idle GPU's clock is its
    idle clock, not the clock the run ran at (clock_coverage says how many were compared).
    """
    out = []
    held = [r for r in runs if _reason_counts([r])]
    if held:
        counts = _reason_counts(held)
        out.append(f"{len(held)} of {len(runs)} timed runs had a clock-event reason other than "
                   "gpu_idle at their start or end ("
                   + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
                   + "): the GPU held its clocks below their maximum (power, temperature or "
                   "a clock setting), which adds spread the timing cannot explain; "
                   f"{_listed(held)}.")
    pairs, _, _ = _clock_pairs(runs)
    changed = [(r, s, e) for r, s, e in pairs if abs(e - s) > CLOCK_CHANGE * s]
    if changed:
        out.append(f"{len(changed)} of {len(pairs)} compared timed runs ended with an SM clock "
                   f"more than {CLOCK_CHANGE:.0%} from their start: "
                   + ", ".join(f"{_run_label(r)} {s} -> {e} MHz" for r, s, e in changed[:4])
                   + (f" and {len(changed) - 4} more" if len(changed) > 4 else "") + ".")
    return out


def clock_coverage(runs: Sequence[dict]) -> str | None:
    """How many timed runs the clock checks could look at; None when no run has a clock."""
    pairs, idle, unread = _clock_pairs(runs)
    if unread == len(runs):
        return None
    return (f"Clocks of the {len(runs)} timed runs: SM clock start -> end compared for "
            f"{len(pairs)}; not for {idle} read with the GPU idle at the start or end (gpu_idle: "
            f"that is the idle clock, not the clock the run ran at) and {unread} without a "
            "clock (no NVML, or a record older than these keys).")


def environment_section(doc: Doc, records: Sequence[dict], timed: Sequence[dict]) -> None:
    """The table, the notes on mixed set-ups, and the clock warnings of the timed runs."""
    rows, notes = environment_rows(records)
    doc.table(["what", "value"], rows)
    for n in notes:
        doc.p("**Note:** " + n)
    for w in clock_warnings(timed):
        doc.p("**Warning:** " + w)
    coverage = clock_coverage(timed)
    if coverage:
        doc.p(coverage)
