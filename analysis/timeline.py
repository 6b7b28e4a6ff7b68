#!/usr/bin/env python3
"""A timeline figure of a few batches of one steady epoch, from memstrat's own trace.

    python3 analysis/timeline.py TRACE.json --out DIR [--epoch N] [--batches K]
                                 [--first-batch I] [--name STEM]

TRACE.json is the Chrome trace-event file of `memstrat train ... --trace TRACE.json`
(common/profiler/trace_export.cpp; tracks described in docs/profiling.md, "The trace file").
The figure has one row per track that has work in the window, on one time axis:

- GPU rows (process `GPU n`), one per CUDA stream as the trace names it (`stream 13
  (compute)`, `stream 14 (copy 0)`, `stream 15 (stage)`, ...; an extra lane `(2)` where the
  trace needed one), then the prefetch-migration rows and the unified-memory migration rows:
  kernels, memcpys (by direction), memsets and migrations as CUPTI timed them on the GPU;
- host rows (process `host: memstrat`): the NVTX ranges of the memstrat domain per host
  thread, one row per nesting level (`batch i` above its `h2d` / `prefetch` / step ranges;
  `produce batch N` on the stream scenario's worker threads), then each thread's CUDA API
  calls (copies, prefetches, synchronisation; the ones that wait for the GPU dark). Host rows
  say when the host *enqueued* work, which can run ahead of the GPU.

Every slice is coloured by its kind (Okabe-Ito colours); the legend lists the kinds drawn.

The window: epoch N (default: the middle one of the steady epochs 2..last; its span is the
profiler window `epoch N`, else the NVTX range), K units (default 3) from unit I (default: the
middle of the epoch). A unit is a batch: the epoch's batches come from its NVTX batch ranges
(`batch i`, or `batches i-j (...)` in the one-launch and graph forms), and on the GPU a batch
starts with the compute stream's first kernel of its step: when the epoch's first kernel on
the compute stream occurs a multiple of the batch count times, every m-th occurrence starts a
batch. In a one-launch-per-chunk form (several `batches i-j (one launch)` ranges) whose first
kernel occurs a multiple of the launch count times, a unit is a launch. Otherwise (one launch
for the whole epoch) the batch starts are the epoch's GPU span divided evenly, and the figure
says "estimated". Dashed lines mark the starts.
Writes DIR/<STEM>.png (200 dpi), .svg and .pdf (analysis/plot_style.save); STEM defaults to
timeline_<trace file stem>.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.plot_style import _finish  # noqa: E402

GPU_CATS = ("kernel", "memcpy", "memset", "um_migration")
# NVTX phases of the memstrat domain (common/nvtx.cpp) that the figure leaves out: they span
# the whole window (run, epoch) or lie outside an epoch (setup, eval).
OUTER_PHASES = ("run", "epoch", "setup", "eval")
# The memstrat domain's phases in the order of common/nvtx.h (row labels list them so).
PHASE_ORDER = ("run", "setup", "epoch", "batch", "h2d", "prefetch", "advise", "host-prep",
               "forward", "backward", "update", "eval", "produce")
BATCH_RE = re.compile(r"^batch (\d+)$")
BATCHES_RE = re.compile(r"^batches (\d+)-(\d+)\b")
EPOCH_RE = re.compile(r"^epoch (\d+)$")

# kind -> (colour, legend label), in legend order. Okabe-Ito colours on the GPU rows; the host's
# NVTX ranges take light tints of the GPU work they enqueue.
KINDS: dict[str, tuple[str, str]] = {
    "kernel": ("#0072B2", "kernel on the compute stream"),
    "kernel-other": ("#56B4E9", "kernel on another stream (e.g. an SM staging copy)"),
    "memcpy-HtoD": ("#D55E00", "memcpy host → device"),
    "memcpy-DtoH": ("#E69F00", "memcpy device → host"),
    "memcpy-other": ("#F0E442", "memcpy, other direction"),
    "memset": ("#999999", "memset"),
    "um-HtoD": ("#CC79A7", "unified-memory migration host → device"),
    "um-DtoH": ("#882255", "unified-memory migration device → host"),
    "nvtx-batch": ("#E3E3E3", "NVTX batch range (host)"),
    "nvtx-copy": ("#F3C4A6", "NVTX h2d (host enqueues copies)"),
    "nvtx-prefetch": ("#EBC6DC", "NVTX prefetch / advise (host)"),
    "nvtx-step": ("#A9CCE6", "NVTX forward / backward / update (host enqueues the step)"),
    "nvtx-host": ("#009E73", "NVTX host-prep / produce (host CPU work)"),
    "nvtx-other": ("#BBBBBB", "NVTX, other range"),
    "api": ("#FFFFFF", "CUDA API call (host)"),
    "api-wait": ("#555555", "CUDA API call that waits for the GPU (host)"),
}
WAITING_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
NVTX_KIND = {"batch": "nvtx-batch", "h2d": "nvtx-copy", "prefetch": "nvtx-prefetch",
             "advise": "nvtx-prefetch", "forward": "nvtx-step", "backward": "nvtx-step",
             "update": "nvtx-step", "host-prep": "nvtx-host", "produce": "nvtx-host"}


class TraceError(ValueError):
    """A trace the figure cannot be drawn from; the message says why."""


@dataclasses.dataclass(frozen=True, eq=False)
class Slice:   # compared and hashed by identity
    name: str
    cat: str
    pid: int
    tid: int
    ts: float       # µs
    dur: float      # µs
    args: dict

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclasses.dataclass
class Trace:
    path: Path
    slices: list[Slice]
    process_names: dict[int, str]
    thread_names: dict[tuple[int, int], str]
    thread_order: dict[tuple[int, int], int]

    @property
    def host_pid(self) -> int:
        for pid, name in self.process_names.items():
            if name.startswith("host"):
                return pid
        return 1

    @property
    def gpu_pids(self) -> list[int]:
        named = sorted(p for p, n in self.process_names.items() if n.startswith("GPU"))
        return named or sorted({s.pid for s in self.slices if s.cat in GPU_CATS})

    def strategy(self) -> str | None:
        for s in self.slices:
            if s.pid == self.host_pid and s.cat == "run" and s.name.startswith("memstrat "):
                return s.name[len("memstrat "):]
        return None


def load_trace(path: str | Path) -> Trace:
    """Parse a trace-event file (JSON object form, or a bare array of events)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(f"{path}: cannot read the trace: {e}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents array (not a Chrome trace-event file)")
    slices, pnames, tnames, torder = [], {}, {}, {}
    for e in events:
        if not isinstance(e, dict):
            continue
        ph, pid, tid = e.get("ph"), e.get("pid", 0), e.get("tid", 0)
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if ph == "M":
            if e.get("name") == "process_name":
                pnames[pid] = str(args.get("name", ""))
            elif e.get("name") == "thread_name":
                tnames[(pid, tid)] = str(args.get("name", ""))
            elif e.get("name") == "thread_sort_index":
                torder[(pid, tid)] = int(args.get("sort_index", 0))
        elif ph == "X" and isinstance(e.get("ts"), (int, float)) \
                and isinstance(e.get("dur"), (int, float)):
            slices.append(Slice(str(e.get("name", "")), str(e.get("cat", "")), pid, tid,
                                float(e["ts"]), float(e["dur"]), args))
    if not slices:
        raise TraceError(f"{path}: the trace has no slices (X events)")
    return Trace(path, slices, pnames, tnames, torder)


# --------------------------------------------------------------------------------------
# The window
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class Window:
    epoch: int
    batches: int | None          # in the epoch (None: no NVTX batch ranges)
    unit: str                    # "batch", or "launch" (one launch per chunk of batches)
    labels: list[str]            # every unit of the epoch: "batch 7", "batches 41-81"
    starts: list[float]          # GPU start of every unit of the epoch (µs)
    detected: bool               # starts found on the compute stream (else estimated)
    first: int                   # first unit shown
    count: int                   # units shown
    t0: float
    t1: float
    compute: tuple[int, int] | None   # the compute stream's track (pid, tid) of lane 0


def epochs(trace: Trace) -> dict[int, tuple[float, float]]:
    """epoch number -> (start, end) µs: the profiler windows, else the NVTX epoch ranges."""
    found: dict[int, tuple[float, float]] = {}
    for cat in ("window", "epoch"):
        for s in trace.slices:
            m = EPOCH_RE.match(s.name)
            if s.cat == cat and s.pid == trace.host_pid and m:
                found.setdefault(int(m.group(1)), (s.ts, s.end))
        if found:
            break
    return found


def default_epoch(numbers: Sequence[int]) -> int:
    """The middle one of the steady epochs (2..last); epoch 1 when it is the only one."""
    steady = sorted(n for n in numbers if n >= 2) or sorted(numbers)
    return steady[(len(steady) - 1) // 2]


def batch_ranges(trace: Trace, t0: float, t1: float) -> list[tuple[int, int]]:
    """(first, last) batch of each NVTX batch range of the epoch in [t0, t1], in order:
    (i, i) for 'batch i', (i, j) for 'batches i-j (one launch)' / '(one graph)'."""
    found = set()
    for s in trace.slices:
        if s.pid != trace.host_pid or s.cat != "batch" or s.ts < t0 or s.ts > t1:
            continue
        m = BATCH_RE.match(s.name)
        if m:
            found.add((int(m.group(1)), int(m.group(1))))
            continue
        m = BATCHES_RE.match(s.name)
        if m:
            found.add((int(m.group(1)), int(m.group(2))))
    return sorted(found)


def _stream_of(name: str) -> str | None:
    m = re.match(r"^stream (\d+)", name)
    return m.group(1) if m else None


def compute_track(trace: Trace, ops: Sequence[Slice]) -> tuple[int, int] | None:
    """The compute stream's track (its first lane): the stream the trace names `compute`,
    else the one with the most kernel time."""
    gpu = set(trace.gpu_pids)
    for (pid, tid), name in sorted(trace.thread_names.items()):
        if pid in gpu and name.startswith("stream ") and name.endswith("(compute)"):
            return pid, tid
    busy: dict[tuple[int, int], float] = {}
    for s in ops:
        if s.cat == "kernel":
            key = (s.pid, s.tid - s.tid % 100)          # lane 0 of the stream
            busy[key] = busy.get(key, 0.0) + s.dur
    return max(sorted(busy), key=busy.get) if busy else None


def _same_stream(trace: Trace, s: Slice, track: tuple[int, int]) -> bool:
    """Whether slice `s` ran on the stream of `track` (any of its lanes)."""
    if s.pid != track[0]:
        return False
    stream = _stream_of(trace.thread_names.get(track, ""))
    if "stream" in s.args and stream is not None:
        return str(s.args["stream"]) == stream
    return s.tid - s.tid % 100 == track[1] - track[1] % 100 and s.tid % 100 < 50


def units(trace: Trace, ops: Sequence[Slice], ranges: Sequence[tuple[int, int]],
          compute: tuple[int, int] | None) -> tuple[str, list[str], list[float], bool]:
    """(unit, labels, GPU starts, detected) of the epoch's units: see the module docstring."""
    kernels = sorted((s for s in ops if s.cat == "kernel" and compute is not None
                      and _same_stream(trace, s, compute)), key=lambda s: s.ts)
    n = ranges[-1][1] + 1 if ranges else None
    if kernels:
        occ = [k.ts for k in kernels if k.name == kernels[0].name]
        if n is None:                    # no NVTX: one batch per occurrence, as an estimate
            return "batch", [f"batch {i}" for i in range(len(occ))], occ, False
        if len(occ) >= n and len(occ) % n == 0 and len(kernels) % n == 0:
            return "batch", [f"batch {i}" for i in range(n)], occ[::len(occ) // n], True
        r = len(ranges)
        if 1 < r < n and len(occ) % r == 0 and len(kernels) % r == 0:
            return ("launch", [f"batches {a}-{b}" if b > a else f"batch {a}" for a, b in ranges],
                    occ[::len(occ) // r], True)
    if not ops or not n:
        return "batch", [], [], False
    lo, hi = min(s.ts for s in ops), max(s.end for s in ops)
    return ("batch", [f"batch {i}" for i in range(n)],
            [lo + i * (hi - lo) / n for i in range(n)], False)


def choose_window(trace: Trace, epoch: int | None = None, count: int = 3,
                  first: int | None = None) -> Window:
    """Epoch `epoch` (default: the middle steady one), `count` units from unit `first`
    (default: the middle of the epoch)."""
    spans = epochs(trace)
    if not spans:
        raise TraceError(f"{trace.path}: no epoch in the trace (neither profiler windows "
                         "nor NVTX ranges named 'epoch N')")
    epoch = default_epoch(list(spans)) if epoch is None else epoch
    if epoch not in spans:
        raise TraceError(f"{trace.path}: no epoch {epoch} in the trace (epochs: "
                         f"{', '.join(map(str, sorted(spans)))})")
    e0, e1 = spans[epoch]
    gpu = set(trace.gpu_pids)
    ops = [s for s in trace.slices if s.pid in gpu and s.cat in GPU_CATS
           and e0 <= s.ts <= e1]
    if not ops:
        raise TraceError(f"{trace.path}: no GPU work (kernels, memcpys) in epoch {epoch}: "
                         "was the trace recorded with the CUPTI activity API on?")
    ranges = batch_ranges(trace, e0, e1)
    compute = compute_track(trace, ops)
    unit, labels, starts, detected = units(trace, ops, ranges, compute)
    if not starts:
        raise TraceError(f"{trace.path}: cannot tell the batches of epoch {epoch} apart (no "
                         "NVTX batch ranges and no kernel on a compute stream)")
    n = len(starts)
    count = max(1, min(count, n))
    first = (n - count) // 2 if first is None else first
    if not 0 <= first <= n - 1:
        raise TraceError(f"{trace.path}: epoch {epoch} has {unit}es 0-{n - 1}; "
                         f"first {unit} {first} is outside")
    count = min(count, n - first)
    t0 = starts[first]
    t1 = starts[first + count] if first + count < n else max(s.end for s in ops)
    return Window(epoch, ranges[-1][1] + 1 if ranges else None, unit, labels, starts,
                  detected, first, count, t0, t1, compute)


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class Row:
    label: str
    slices: list[tuple[Slice, str]]      # (slice, kind)


def _nesting(slices: Sequence[Slice]) -> dict[Slice, int]:
    """Depth of each range among the ranges of one track (they nest or are disjoint)."""
    def holds(outer: Slice, inner: Slice) -> bool:
        return outer.ts <= inner.ts and inner.end <= outer.end + 1e-9

    depth: dict[Slice, int] = {}
    stack: list[Slice] = []
    for s in sorted(slices, key=lambda s: (s.ts, -s.dur)):
        while stack and not holds(stack[-1], s):
            stack.pop()
        depth[s] = len(stack)
        stack.append(s)
    return depth


def _short_thread(name: str) -> str:
    return name.replace(" - NVTX", "").strip()


def host_rows(trace: Trace, w: Window) -> list[Row]:
    """One row per nesting level of each host thread's memstrat NVTX ranges in the window."""
    by_track: dict[int, list[Slice]] = {}
    for s in trace.slices:
        if s.pid != trace.host_pid or s.cat in ("window", "cuda_api", "nvtx"):
            continue
        name = trace.thread_names.get((s.pid, s.tid), "")
        if "other domains" in name or "CUDA API" in name:
            continue
        by_track.setdefault(s.tid, []).append(s)
    rows = []
    for tid in sorted(by_track, key=lambda t: (trace.thread_order.get((trace.host_pid, t), t),
                                               t)):
        ranges = by_track[tid]
        depth = _nesting(ranges)
        shown = [s for s in ranges if s.cat not in OUTER_PHASES and s.end > w.t0 and s.ts < w.t1]
        levels = sorted({depth[s] for s in shown})
        thread = _short_thread(trace.thread_names.get((trace.host_pid, tid), f"thread {tid}"))
        for lv in levels:
            at = [s for s in shown if depth[s] == lv]
            cats = sorted({s.cat for s in at}, key=lambda c: (
                PHASE_ORDER.index(c) if c in PHASE_ORDER else len(PHASE_ORDER), c))
            rows.append(Row(f"host {thread}: {' / '.join(cats[:4])}",
                            [(s, NVTX_KIND.get(s.cat, "nvtx-other")) for s in at]))
    return rows + api_rows(trace, w)


def api_rows(trace: Trace, w: Window) -> list[Row]:
    """One row per host thread's CUDA API calls in the window (memory, copy, hint and
    synchronisation calls; the trace leaves kernel launches out)."""
    lane0 = (1 << 26) - 1
    by_thread: dict[int, list[Slice]] = {}
    for s in trace.slices:
        if s.pid == trace.host_pid and s.cat == "cuda_api" and s.end > w.t0 and s.ts < w.t1:
            by_thread.setdefault(s.tid & lane0, []).append(s)
    rows = []
    for tid in sorted(by_thread):
        name = trace.thread_names.get((trace.host_pid, tid), f"thread {tid} - CUDA API")
        rows.append(Row("host " + name.replace(" - ", ": "),
                        [(s, "api-wait" if s.name in WAITING_CALLS else "api")
                         for s in sorted(by_thread[tid], key=lambda s: s.ts)]))
    return rows


def _gpu_kind(s: Slice, on_compute: bool) -> str:
    if s.cat == "kernel":
        return "kernel" if on_compute else "kernel-other"
    if s.cat == "memcpy":
        kind = str(s.args.get("kind", "")) or s.name.replace("Memcpy ", "")
        return f"memcpy-{kind}" if kind in ("HtoD", "DtoH") else "memcpy-other"
    if s.cat == "memset":
        return "memset"
    return "um-DtoH" if "DtoH" in s.name else "um-HtoD"


def gpu_rows(trace: Trace, w: Window) -> list[Row]:
    """One row per GPU track with work in the window, in the trace's track order."""
    gpu = trace.gpu_pids
    by_track: dict[tuple[int, int], list[Slice]] = {}
    for s in trace.slices:
        if s.pid in gpu and s.cat in GPU_CATS and s.end > w.t0 and s.ts < w.t1:
            by_track.setdefault((s.pid, s.tid), []).append(s)
    compute_stream = _stream_of(trace.thread_names.get(w.compute, "")) if w.compute else None
    rows = []
    for key in sorted(by_track, key=lambda k: (k[0], trace.thread_order.get(k, k[1]), k[1])):
        name = trace.thread_names.get(key, f"track {key[1]}")
        on_compute = compute_stream is not None and _stream_of(name) == compute_stream \
            and "prefetch migrations" not in name
        prefix = f"{trace.process_names.get(key[0], 'GPU')} · " if len(gpu) > 1 else ""
        rows.append(Row(prefix + name, [(s, _gpu_kind(s, on_compute))
                                        for s in sorted(by_track[key], key=lambda s: s.ts)]))
    return rows


# --------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------
def short_name(name: str) -> str:
    """'void memstrat::gemm_tiled<32, 8>(float const*, ...)' -> 'gemm_tiled'."""
    base = name.split("(")[0]
    while "<" in base:
        base = re.sub(r"<[^<>]*>", "", base)
    base = base.split()[-1] if base.split() else name
    return base.split("::")[-1] or name


def plot_timeline(trace: Trace | str | Path, path: str | Path, epoch: int | None = None,
                  batches: int = 3, first_batch: int | None = None) -> Path:
    """Draw the window (module docstring: `batches` units from unit `first_batch`) and write
    PNG, SVG and PDF; returns the PNG path."""
    trace = trace if isinstance(trace, Trace) else load_trace(trace)
    w = choose_window(trace, epoch, batches, first_batch)
    rows = gpu_rows(trace, w) + host_rows(trace, w)
    span = w.t1 - w.t0
    pad = 0.015 * span
    fig, axes = plt.subplots(1, 1, squeeze=False, layout="constrained",
                             figsize=(12.0, 0.42 * len(rows) + 2.4))
    ax = axes[0][0]
    width_pt = 12.0 * 72 * 0.78            # the axes' width in points, roughly
    kinds_drawn = set()
    for r, row in enumerate(rows):
        y = len(rows) - 1 - r
        for s, kind in row.slices:
            a, b = max(s.ts, w.t0 - pad), min(s.end, w.t1 + pad)
            color = KINDS[kind][0]
            kinds_drawn.add(kind)
            ax.broken_barh([(a - w.t0, max(b - a, span * 1e-4))], (y - 0.36, 0.72),
                           facecolors=color, edgecolors="0.3", linewidth=0.3)
            label = short_name(s.name) if s.cat == "kernel" else s.name
            if (b - a) / (span + 2 * pad) * width_pt > 4.6 * len(label) + 4:
                ax.text((a + b) / 2 - w.t0, y, label, ha="center", va="center", fontsize=6.5,
                        color="white" if kind in ("kernel", "memcpy-HtoD", "um-DtoH",
                                                  "api-wait")
                        else "black", clip_on=True)
    for i in range(w.first, w.first + w.count + 1):
        if i >= len(w.starts):
            break
        x = w.starts[i] - w.t0
        ax.axvline(x, color="0.25", linestyle="--", linewidth=0.8)
        if i < w.first + w.count:
            ax.annotate(("" if w.detected else "≈ ") + w.labels[i], (x, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(3, 2),
                        textcoords="offset points", fontsize=8, color="0.2")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([row.label for row in reversed(rows)], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(-pad, span + pad)
    ax.set_xlabel(f"µs from the GPU start of {w.labels[w.first]}"
                  + ("" if w.detected else " (estimated)"))
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    strategy = trace.strategy() or trace.path.stem
    handles = [Patch(facecolor=KINDS[k][0], edgecolor="0.3", linewidth=0.3)
               for k in KINDS if k in kinds_drawn]
    labels = [KINDS[k][1] for k in KINDS if k in kinds_drawn]
    how = {("batch", True): "batch starts: the compute stream's first kernel of each step",
           ("launch", True): "one launch per chunk of batches: its starts are the compute "
                             "stream's first kernel of each launch",
           ("batch", False): "batch starts estimated: the epoch's GPU span divided evenly"}[
        (w.unit, w.detected)]
    if w.batches is None:
        how = ("no NVTX batch ranges: batch starts estimated as each occurrence of the "
               "compute stream's first kernel")
    last = w.first + w.count - 1
    if w.unit == "batch":
        shown = f"batches {w.first}-{last} of {len(w.starts)}" if w.count > 1 else \
            f"batch {w.first} of {len(w.starts)}"
    else:
        lo, hi = re.findall(r"\d+", w.labels[w.first])[0], re.findall(r"\d+", w.labels[last])[-1]
        shown = f"launches {w.first}-{last} of {len(w.starts)} (batches {lo}-{hi})"
    title = f"{strategy}: timeline of {shown}, epoch {w.epoch}"
    subtitle = (f"{trace.path.name} · GPU rows: kernels, copies and migrations per CUDA "
                "stream (CUPTI) · host rows: NVTX ranges and CUDA API calls, when the host "
                "enqueued the work · " + how)
    return _finish(fig, path, title, subtitle, handles, labels, ncol=3)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="timeline.py",
        description="Draw a few batches of one steady epoch from a memstrat trace "
                    "(`memstrat train --trace FILE.json`) as a per-stream timeline: PNG, SVG "
                    "and PDF.",
        epilog="Example: analysis/timeline.py traces/double-buffer.json --out docs/figures "
               "--batches 3")
    ap.add_argument("trace", help="Chrome trace-event file written by memstrat --trace")
    ap.add_argument("--out", required=True, help="folder for the figure")
    ap.add_argument("--epoch", type=int, help="epoch to draw (default: the middle steady one)")
    ap.add_argument("--batches", type=int, default=3,
                    help="batches to show (default 3); launches, in a one-launch-per-chunk "
                         "form")
    ap.add_argument("--first-batch", type=int,
                    help="first batch (or launch) shown (default: the middle of the epoch)")
    ap.add_argument("--name", help="file stem (default: timeline_<trace stem>)")
    args = ap.parse_args(argv)
    if args.batches < 1:
        ap.error("--batches must be at least 1")
    stem = args.name or f"timeline_{Path(args.trace).stem}"
    try:
        png = plot_timeline(args.trace, Path(args.out) / f"{stem}.png", args.epoch,
                            args.batches, args.first_batch)
    except TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: --out {args.out}: cannot write the figure: {e.strerror or e}",
              file=sys.stderr)
        return 2
    print(f"wrote {png}, {png.with_suffix('.svg')} and {png.with_suffix('.pdf')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
