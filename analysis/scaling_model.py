#!/usr/bin/env python3
"""Data-parallel training on N GPUs predicted from one GPU's step and the measured collectives:
the cost model's terms for several GPUs (docs/methodology.md, "Cost model", "Several GPUs").

    python3 analysis/scaling_model.py --primitives results/primitives_x2.jsonl --gpus 2 \\
        --step-us 50 --hidden 256 --reduce ring

Weak scaling (every GPU trains its own batch of --batch rows): a step on N GPUs is

    step(N) = step(1) + transfer + combine(N)

- step(1): the one-GPU step at that batch, measured (--step-us);
- transfer: what the strategy moves per step at the rate each GPU gets while every GPU copies at
  once (h2d-all's per-GPU rate of `memstrat primitives --gpus N`): resident none; pinned the
  batch's images and labels, serial before the step;
- combine(N): --reduce ring: one ncclAllReduce per gradient bucket, as the trainer cuts them
  (experiments/core/gradient_buckets.cpp: never across layers, at most 4 MiB of floats, the
  last layer first), summed; --reduce exact: one ncclAllGather of every GPU's gradients (N x all
  parameters). Each collective's time at a size is read from its measured curve (median time,
  log-log interpolation between the sizes measured; below the smallest, the smallest's time;
  above the largest, the largest's bandwidth). Serial after the backward pass: the overlap the
  trainer may get is not counted, so the prediction is an upper bound on the step (a lower
  bound on the efficiency). The
  rank-ordered sum of --reduce exact is not counted either (a read of N x the parameters).

efficiency = step(1) / step(N): the fraction of N times one GPU's throughput that N GPUs reach.
"""
from __future__ import annotations

import argparse
import bisect
import math
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.aggregate import IMAGE_PIXELS as INPUT_FEATURES  # noqa: E402
from analysis.aggregate import LABEL_BYTES  # noqa: E402
from analysis.cost_model import PIXEL_BYTES  # noqa: E402
from analysis.jsonl import RecordError, read_jsonl  # noqa: E402

CLASSES = 10
RING_BUCKET_FLOATS = (4 << 20) // 4   # kRingBucketFloats (gradient_buckets.h)
STRATEGIES = ("resident", "pinned")     # the data paths that train on several GPUs


def layer_sizes(hidden: Sequence[int]) -> list[int]:
    return [INPUT_FEATURES, *hidden, CLASSES]


def bucket_floats(layers: Sequence[int], max_floats: int = RING_BUCKET_FLOATS) -> list[int]:
    """The sizes of the ring buckets in reduction order (gradient_buckets.cpp)."""
    if len(layers) < 2 or min(layers) < 1 or max_floats < 4:
        raise ValueError("need >= 2 layer sizes >= 1 and buckets of >= 4 floats")
    step = max_floats // 4 * 4
    out = []
    for lo, hi in reversed(list(zip(layers, layers[1:]))):
        n = lo * hi + hi            # W_l then b_l
        out += [min(step, n - b) for b in range(0, n, step)]
    return out


class Curve:
    """Median time against size of one measured case (a multi-gpu-primitive record)."""

    def __init__(self, points: Iterable[tuple[int, float]]):
        pts = sorted((int(b), float(us)) for b, us in points if b > 0 and us > 0)
        if not pts:
            raise ValueError("a curve needs at least one size with a time")
        self.sizes = [b for b, _ in pts]
        self.us = [u for _, u in pts]

    def time_us(self, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        s, u = self.sizes, self.us
        if nbytes <= s[0]:
            return u[0]
        if nbytes >= s[-1]:
            return u[-1] * nbytes / s[-1]
        i = bisect.bisect_left(s, nbytes)
        if s[i] == nbytes:
            return u[i]
        f = (math.log(nbytes) - math.log(s[i - 1])) / (math.log(s[i]) - math.log(s[i - 1]))
        return math.exp(math.log(u[i - 1]) + f * (math.log(u[i]) - math.log(u[i - 1])))


def curves(records: Iterable[dict[str, Any]], gpus: int) -> dict[str, Curve]:
    """memstrat's curves at `gpus` GPUs by pattern: the collectives' median times, and h2d-all's
    per-GPU rate as a time (bytes / rate). The latest record of a pattern wins."""
    out: dict[str, Curve] = {}
    for rec in sorted(records, key=lambda r: r.get("started_at", "")):
        c = rec.get("config", {})
        if (rec.get("record") != "multi-gpu-primitive" or rec.get("status") != "ok"
                or rec.get("implementation") != "memstrat" or c.get("gpus") != gpus):
            continue
        pts = rec.get("results", [])
        if c.get("pattern") in ("nccl-all-reduce", "nccl-all-gather"):
            out[c["pattern"]] = Curve((p["bytes"], p["median_us"]) for p in pts)
        elif c.get("pattern") == "h2d-all":  # the slowest GPU's rate sets the step
            out["h2d-all"] = Curve((p["bytes"], p["bytes"] / (1e3 * min(p["per_gpu_gbps"])))
                                   for p in pts if p.get("per_gpu_gbps"))
    return out


def combine_us(layers: Sequence[int], gpus: int, reduce: str, c: dict[str, Curve]) -> float:
    if gpus == 1:
        return 0.0
    if reduce == "ring":
        need(c, "nccl-all-reduce")
        return sum(c["nccl-all-reduce"].time_us(4 * n) for n in bucket_floats(layers))
    if reduce == "exact":
        need(c, "nccl-all-gather")
        return c["nccl-all-gather"].time_us(4 * gpus * sum(bucket_floats(layers)))
    raise ValueError(f"unknown --reduce {reduce!r}; ring or exact")


def transfer_us(strategy: str, batch: int, transfer: str, c: dict[str, Curve]) -> float:
    if strategy == "resident":
        return 0.0
    if strategy == "pinned":
        need(c, "h2d-all")
        return c["h2d-all"].time_us(batch * (INPUT_FEATURES * PIXEL_BYTES[transfer] + LABEL_BYTES))
    raise ValueError(f"no several-GPU model for --strategy {strategy!r}; one of {STRATEGIES}")


def need(c: dict[str, Curve], pattern: str) -> None:
    if pattern not in c:
        raise KeyError(f"the primitives hold no ok memstrat '{pattern}' record at this GPU count "
                       f"(memstrat primitives --gpus N -p {pattern} --json FILE)")


def predict(step_us: float, hidden: Sequence[int], gpus: int, reduce: str, strategy: str,
            batch: int, transfer: str, c: dict[str, Curve]) -> dict[str, float]:
    layers = layer_sizes(hidden)
    move = transfer_us(strategy, batch, transfer, c) if gpus > 1 else 0.0
    comb = combine_us(layers, gpus, reduce, c)
    total = step_us + move + comb
    return {"parameters": float(sum(bucket_floats(layers))), "step_us": step_us,
            "transfer_us": move, "combine_us": comb, "step_n_us": total,
            "efficiency": step_us / total}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--primitives", required=True, metavar="FILE", action="append",
                    help="records of `memstrat primitives --gpus N` (repeatable)")
    ap.add_argument("--gpus", type=int, required=True, help="N >= 2")
    ap.add_argument("--step-us", type=float, required=True,
                    help="one GPU's training step at --batch, microseconds (> 0)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[256], help="hidden widths")
    ap.add_argument("--reduce", choices=("ring", "exact"), default="ring")
    ap.add_argument("--strategy", choices=STRATEGIES, default="resident")
    ap.add_argument("--batch", type=int, default=256, help="rows per GPU per step")
    ap.add_argument("--input", choices=sorted(PIXEL_BYTES), default="u8")
    a = ap.parse_args(argv)
    if a.gpus < 2:
        ap.error(f"--gpus {a.gpus}: the model is for N >= 2 GPUs")
    if not (a.step_us > 0 and math.isfinite(a.step_us)):
        ap.error(f"--step-us {a.step_us}: a time > 0")
    if a.batch < 1 or min(a.hidden) < 1:
        ap.error("--batch and --hidden must be >= 1")
    try:
        recs = [r for f in a.primitives for _, r in read_jsonl(f) if isinstance(r, dict)]
        p = predict(a.step_us, a.hidden, a.gpus, a.reduce, a.strategy, a.batch, a.input,
                    curves(recs, a.gpus))
    except (RecordError, KeyError, ValueError) as e:
        print(f"scaling_model.py: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
    print(f"{a.gpus} GPUs, {a.strategy}, --reduce {a.reduce}, hidden {a.hidden}, batch {a.batch} "
          f"per GPU: {int(p['parameters'])} parameters")
    print(f"  step(1) {p['step_us']:.1f} us + transfer {p['transfer_us']:.1f} us + combine "
          f"{p['combine_us']:.1f} us = step({a.gpus}) {p['step_n_us']:.1f} us")
    print(f"  weak-scaling efficiency {p['efficiency']:.3f} (a lower bound: no overlap of the "
          "reduction with the backward pass is counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
