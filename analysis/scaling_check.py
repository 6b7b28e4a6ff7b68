#!/usr/bin/env python3
"""The N-GPU scaling model (analysis/scaling_model.py) against measured `--gpus N` runs.

    analysis/scaling_check.py RECORDS... --primitives FILE [--primitives FILE ...]

For every data-parallel configuration in RECORDS (config.gpus N > 1) of a strategy the model
covers (scaling_model.STRATEGIES) whose one-GPU counterpart ran too, on the same GPU model (the
same strategy, scenario, transfer, per-GPU batch, hidden widths, GEMM, launch form, step, graphs
and strategy options; only gpus, reduce and processes differ), like with like:

- a process's step is its median steady epoch (wall time, epochs 2..) over the steps of an epoch:
  ceil(train_samples / (N x batch)) on N GPUs, ceil(train_samples / batch) on one;
- measured: the median of the processes' step(N), with its order-statistic interval, and the
  weak-scaling efficiency step(1) / step(N) (the fraction of N times one GPU's throughput that
  the N GPUs reach): the inverse of stats.ratio's Hodges-Lehmann estimate of step(N) / step(1),
  with its Moses interval;
- predicted: scaling_model.predict from the median measured step(1) and the collectives and
  host->device rates measured at N GPUs (the primitives' records), its step(N) also at the two
  ends of step(1)'s interval;
- agreement: the prediction within TOLERANCE of the measured median. The model counts the
  reduction serial after the backward pass (an upper bound on the step), so a prediction above
  the measurement by more than TOLERANCE says the trainer overlapped the reduction, one below it
  says a cost the model leaves out.

A configuration without a one-GPU counterpart, or without the primitives at its N, is listed as
not checked, with why.

Strong scaling, measured only (no prediction): for every data-parallel configuration at B rows per
GPU whose one-GPU counterpart ran at the same global batch, N x B rows (the same configuration
otherwise), the epochs have the same steps, so the speedup is epoch(1) / epoch(N) over processes,
wall time of the whole epoch: the inverse of stats.ratio's Hodges-Lehmann estimate of epoch(N) /
epoch(1) with its Moses interval, and the strong-scaling efficiency is the speedup over N.

Exit status 0 when every checked configuration agrees, 1 when one does not, 2 on bad input (the
strong-scaling lines never change it).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import scaling_model as sm  # noqa: E402
from analysis import stats  # noqa: E402
from analysis.aggregate import Group, GroupKey, aggregate, process_median  # noqa: E402
from analysis.jsonl import RecordError, read_jsonl  # noqa: E402

TOLERANCE = 0.15
_DATA_PARALLEL = ("gpus", "emulate_gpus", "reduce", "processes")


@dataclasses.dataclass(frozen=True)
class Check:
    key: GroupKey
    gpus: int
    reduce: str
    processes: str
    measured: stats.Summary | None = None          # step(N), us, over processes
    efficiency: float | None = None                 # step(1) / step(N)
    efficiency_ci: stats.Interval | None = None
    step1: stats.Summary | None = None             # step(1), us, over processes
    predicted: dict[str, float] | None = None       # scaling_model.predict at step(1)'s median
    predicted_range: tuple[float, float] | None = None  # step(N) at step(1)'s interval ends
    not_checked: str | None = None

    @property
    def ratio(self) -> float | None:
        """Predicted over measured step(N)."""
        if self.predicted is None or self.measured is None:
            return None
        return self.predicted["step_n_us"] / self.measured.median

    @property
    def agrees(self) -> bool | None:
        r = self.ratio
        return None if r is None else abs(r - 1.0) <= TOLERANCE


def _other(key: GroupKey) -> dict[str, Any]:
    return dict(key.other)


def one_gpu_key(key: GroupKey) -> GroupKey:
    """The key of the same configuration on one GPU: the data-parallel entries dropped."""
    return dataclasses.replace(
        key, other=tuple((k, v) for k, v in key.other if k not in _DATA_PARALLEL))


@dataclasses.dataclass(frozen=True)
class Strong:
    """One data-parallel configuration against one GPU at the same global batch."""
    key: GroupKey                    # the N-GPU configuration (batch: rows per GPU)
    gpus: int
    reduce: str
    processes: str
    epoch_n: stats.Summary | None     # ms, over processes
    epoch_1: stats.Summary | None     # ms, over processes, at N x batch rows on one GPU
    speedup: float | None
    speedup_ci: stats.Interval | None

    @property
    def efficiency(self) -> float | None:
        return None if self.speedup is None else self.speedup / self.gpus


# data_parallel_groups' result: every group by key, and the groups on N > 1 real GPUs
Grouped = tuple[dict[GroupKey, Group], list[tuple[Group, int, dict[str, Any]]]]


def data_parallel_groups(records: Sequence[dict[str, Any]]) -> Grouped:
    """(every group by key, [(group, N, its other fields)] of the runs on N > 1 real GPUs)."""
    groups = aggregate(records)
    out = []
    for g in groups:
        o = _other(g.key)
        gpus = int(o.get("gpus") or 1)
        if gpus >= 2 and int(o.get("emulate_gpus") or 1) == 1:
            out.append((g, gpus, o))
    return {g.key: g for g in groups}, out


def strong_scaling(records: Sequence[dict[str, Any]], grouped: Grouped | None = None
                   ) -> list[Strong]:
    """Every N-GPU configuration whose one-GPU counterpart at N x its batch ran (`grouped`:
    data_parallel_groups(records) where the caller has it already)."""
    by_key, several = grouped or data_parallel_groups(records)
    out = []
    for g, gpus, o in several:
        one = by_key.get(dataclasses.replace(one_gpu_key(g.key), batch=gpus * g.key.batch))
        if one is None:
            continue
        n_ms, one_ms = g.process_values("wall_ms"), one.process_values("wall_ms")
        r = stats.ratio(one_ms, n_ms)  # epoch(N) / epoch(1)
        out.append(Strong(
            g.key, gpus, str(o.get("reduce") or "exact"), str(o.get("processes") or "one"),
            stats.summarize(n_ms), stats.summarize(one_ms),
            None if r is None else 1.0 / r.estimate,
            None if r is None else stats.Interval(1.0 / r.ci.high, 1.0 / r.ci.low,
                                                  r.ci.coverage, r.ci.method)))
    return out


def strong_lines(rows: Sequence[Strong]) -> list[str]:
    out = []
    for c in rows:
        k = c.key
        if c.speedup is None:
            tail = (f"speedup not computed (fewer than {stats.MIN_PROCESSES} timed processes on "
                    "a side)")
        else:
            ci = c.speedup_ci
            tail = (f"speedup {c.speedup:.3f} [{ci.low:.3f}, {ci.high:.3f}], efficiency "
                    f"{c.efficiency:.3f} [{ci.low / c.gpus:.3f}, {ci.high / c.gpus:.3f}]")
        out.append(
            f"strong scaling, {k.gpu}: {k.strategy} x{c.gpus} ({c.processes} process"
            f"{'es' if c.processes == 'per-gpu' else ''}, --reduce {c.reduce}), {k.scenario}/"
            f"{k.transfer}/global batch {c.gpus * k.batch}/h{k.hidden_label}: epoch, ms: one GPU "
            f"{stats.median_with_interval(c.epoch_1, '{:.3f}'.format)}, {c.gpus} GPUs "
            f"{stats.median_with_interval(c.epoch_n, '{:.3f}'.format)}; {tail}")
    return out


def process_steps_us(g: Group, gpus: int) -> list[float | None]:
    """Each timing process's step: its median steady epoch over the epoch's steps, in us."""
    steps = math.ceil(g.train_samples / (gpus * g.key.batch))
    out = []
    for r in g.timing_records:
        v = process_median(r, "wall_ms")
        out.append(None if v is None else 1e3 * v / steps)
    return out


def check(records: Sequence[dict[str, Any]], primitives: Sequence[dict[str, Any]],
          grouped: Grouped | None = None) -> list[Check]:
    by_key, several = grouped or data_parallel_groups(records)
    out = []
    for g, gpus, o in several:
        c = Check(g.key, gpus, str(o.get("reduce") or "exact"), str(o.get("processes") or "one"))
        stepn = process_steps_us(g, gpus)
        c = dataclasses.replace(c, measured=stats.summarize(stepn))
        if g.key.strategy not in sm.STRATEGIES:
            out.append(dataclasses.replace(
                c, not_checked=f"the model covers {', '.join(sm.STRATEGIES)}"))
            continue
        one = by_key.get(one_gpu_key(g.key))
        if one is None:
            out.append(dataclasses.replace(
                c, not_checked="no one-GPU run of the same configuration (strategy, batch per "
                               "GPU, launch form, step, graphs)"))
            continue
        step1 = process_steps_us(one, 1)
        s1 = stats.summarize(step1)
        eff = stats.ratio(step1, stepn)
        c = dataclasses.replace(
            c, step1=s1,
            efficiency=None if eff is None else 1.0 / eff.estimate,
            efficiency_ci=None if eff is None else stats.Interval(
                1.0 / eff.ci.high, 1.0 / eff.ci.low, eff.ci.coverage, eff.ci.method))
        if s1 is None or c.measured is None:
            out.append(dataclasses.replace(c, not_checked="no steady epoch timed"))
            continue
        try:
            curves = sm.curves(primitives, gpus)
            args = (g.key.hidden, gpus, c.reduce, g.key.strategy, g.key.batch, g.key.transfer,
                    curves)
            pred = sm.predict(s1.median, *args)
            ends = (s1.ci.low, s1.ci.high) if s1.ci else (s1.median, s1.median)
            rng = tuple(sm.predict(v, *args)["step_n_us"] for v in ends)
        except (KeyError, ValueError) as e:
            out.append(dataclasses.replace(
                c, not_checked=e.args[0] if isinstance(e, KeyError) else str(e)))
            continue
        out.append(dataclasses.replace(c, predicted=pred, predicted_range=rng))
    return out


def _us(v: float) -> str:
    return f"{v:.1f}"


def lines(checks: Sequence[Check]) -> list[str]:
    out = []
    for c in checks:
        k = c.key
        head = (f"{k.gpu}: {k.strategy} x{c.gpus} ({c.processes} process"
                f"{'es' if c.processes == 'per-gpu' else ''}, --reduce {c.reduce}), {k.scenario}/"
                f"{k.transfer}/b{k.batch} per GPU/h{k.hidden_label}, {k.epoch_form}")
        if c.not_checked:
            out.append(f"{head}: not checked: {c.not_checked}")
            continue
        m, p = c.measured, c.predicted
        eff = "n/a" if c.efficiency is None else (
            f"{c.efficiency:.3f}" + (f" {stats.interval_text(c.efficiency_ci, '{:.3f}'.format)}"
                                     if c.efficiency_ci else ""))
        out.append(
            f"{head}: step(1), us: {stats.median_with_interval(c.step1, _us)}; "
            f"step({c.gpus}), us: measured {stats.median_with_interval(m, _us)}, "
            f"predicted {_us(p['step_n_us'])} [{_us(c.predicted_range[0])}, "
            f"{_us(c.predicted_range[1])}] (transfer {_us(p['transfer_us'])}, combine "
            f"{_us(p['combine_us'])}); predicted/measured {c.ratio:.3f}: "
            f"{'agrees' if c.agrees else 'disagrees'} (within {TOLERANCE:.0%}); efficiency "
            f"measured {eff}, predicted {p['efficiency']:.3f}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("records", nargs="+", help="run records: .jsonl files or results folders")
    ap.add_argument("--primitives", required=True, metavar="FILE", action="append",
                    help="records of `memstrat primitives --gpus N` (repeatable)")
    a = ap.parse_args(argv)
    from analysis.records import load_records
    try:
        recs = load_records(a.records)
        prims = [r for f in a.primitives for _, r in read_jsonl(f) if isinstance(r, dict)]
    except (RecordError, OSError, ValueError) as e:
        print(f"scaling_check.py: {e}", file=sys.stderr)
        return 2
    grouped = data_parallel_groups(recs)  # once for both: the check and the strong scaling
    checks = check(recs, prims, grouped)
    if not checks:
        print("scaling_check.py: no data-parallel run (config.gpus > 1) in the records",
              file=sys.stderr)
        return 2
    for ln in lines(checks) + strong_lines(strong_scaling(recs, grouped)):
        print(ln)
    done = [c for c in checks if c.agrees is not None]
    agree = sum(1 for c in done if c.agrees)
    print(f"{agree}/{len(done)} checked configurations agree within {TOLERANCE:.0%}; "
          f"{len(checks) - len(done)} not checked")
    return 0 if agree == len(done) else 1


if __name__ == "__main__":
    sys.exit(main())
