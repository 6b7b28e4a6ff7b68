"""What benchmark_vs_pytorch.py compares, apart from how it runs things: the result of one run,
the speed table (memstrat strategy against its nearest PyTorch feeding mode) with its verdict,
and the batch-by-batch loss-curve comparison with its tolerances."""
from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# memstrat strategy -> the PyTorch mode it is compared with (double-buffer: pinned is PyTorch's
# nearest; it has no built-in double buffering).
PAIRINGS = (("resident", "resident"), ("pinned", "pinned"), ("double-buffer", "pinned"),
            ("pageable", "pageable"))


@dataclass
class RunResult:
    kind: str                  # "memstrat" | "pytorch"
    strategy: str              # memstrat strategy or pytorch mode
    transfer: str
    batch: int
    hidden: int
    epochs: int
    ok: bool = False
    error: str = ""
    record: dict | None = None
    seconds: float = 0.0

    @property
    def median_ms(self) -> float | None:
        if not self.ok or not self.record:
            return None
        return float(self.record["summary"]["wall_ms_median"])

    @property
    def spread(self) -> tuple[float, float] | None:
        if not self.ok or not self.record:
            return None
        s = self.record["summary"]
        return float(s["wall_ms_min"]), float(s["wall_ms_max"])


# ---------------------------------------------------------------------------------------------
# speed table

@dataclass
class Row:
    batch: int
    hidden: int
    memstrat: str
    pytorch: str
    memstrat_ms: dict[str, float | None]   # transfer -> median ms
    pytorch_ms: float | None

    def speedup(self, transfer: str) -> float | None:
        m = self.memstrat_ms.get(transfer)
        if m is None or self.pytorch_ms is None or m <= 0:
            return None
        return self.pytorch_ms / m


def build_rows(results: list[RunResult], transfers: Sequence[str]) -> list[Row]:
    mem = {(r.strategy, r.transfer, r.batch, r.hidden): r for r in results
           if r.kind == "memstrat"}
    pt = {(r.strategy, r.batch, r.hidden): r for r in results if r.kind == "pytorch"}
    configs = list(dict.fromkeys((r.batch, r.hidden) for r in results))
    rows = []
    for b, h in configs:
        for m, p in PAIRINGS:
            ms = {t: (mem[(m, t, b, h)].median_ms if (m, t, b, h) in mem else None)
                  for t in transfers}
            pr = pt.get((p, b, h))
            rows.append(Row(b, h, m, p, ms, pr.median_ms if pr else None))
    return rows


def _fmt_ms(v: float | None) -> str:
    return "failed" if v is None else f"{v:.2f}"


def _fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def speed_markdown(rows: list[Row], transfers: Sequence[str]) -> str:
    head = ["batch", "hidden", "memstrat", "PyTorch eager"]
    for t in transfers:
        head.append(f"memstrat {t} ms")
    head.append("PyTorch f32 ms")
    for t in transfers:
        head.append(f"speed-up ({t})")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.batch), str(r.hidden), r.memstrat, r.pytorch]
        cells += [_fmt_ms(r.memstrat_ms.get(t)) for t in transfers]
        cells.append(_fmt_ms(r.pytorch_ms))
        cells += [_fmt_x(r.speedup(t)) for t in transfers]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed_verdict(rows: list[Row], transfers: Sequence[str]) -> tuple[list[str], bool]:
    """Lines of verdict; True when memstrat is faster in every row with the transfer that is
    PyTorch's nearest equivalent (f32, else the first one given)."""
    lines, all_faster = [], True
    nearest = "f32" if "f32" in transfers else transfers[0]
    for t in transfers:
        ups = [(r.speedup(t), r) for r in rows]
        known = [(u, r) for u, r in ups if u is not None]
        if not known:
            continue
        faster = sum(1 for u, _ in known if u > 1.0)
        u_min, r_min = min(known, key=lambda x: x[0])
        u_max, r_max = max(known, key=lambda x: x[0])
        geo = statistics.geometric_mean([u for u, _ in known])
        lines.append(
            f"memstrat --transfer {t}: faster than PyTorch's nearest equivalent in {faster} of "
            f"{len(known)} configurations; speed-up {u_min:.2f}x (batch {r_min.batch}, hidden "
            f"{r_min.hidden}, {r_min.memstrat} vs {r_min.pytorch}) to {u_max:.2f}x (batch "
            f"{r_max.batch}, hidden {r_max.hidden}, {r_max.memstrat} vs {r_max.pytorch}), "
            f"geometric mean {geo:.2f}x" + ("" if len(known) == len(ups) else
                                            f"; {len(ups) - len(known)} rows lack a result"))
        if t == nearest and (faster < len(known) or len(known) < len(ups)):
            all_faster = False
    return lines, all_faster


# ---------------------------------------------------------------------------------------------
# loss curves

def read_curve(path: Path) -> dict[tuple[int, int], float]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or set(rows[0]) != {"epoch", "batch", "loss"}:
        raise ValueError(f"{path}: not an epoch,batch,loss CSV")
    return {(int(r["epoch"]), int(r["batch"])): float(r["loss"]) for r in rows}


@dataclass
class CurveComparison:
    batches: int
    first_abs: float
    first_rel: float
    last_abs: float
    last_rel: float
    max_abs: float
    max_abs_at: tuple[int, int]
    max_rel: float
    mean_abs: float
    early_batches: int
    early_max_abs: float
    first_loss: float
    last_loss: float


def compare_curves(a: dict[tuple[int, int], float], b: dict[tuple[int, int], float],
                   early: int = 20) -> CurveComparison:
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b))[:3], sorted(set(b) - set(a))[:3]
        raise ValueError(f"the curves cover different batches ({len(a)} vs {len(b)}; only in "
                         f"memstrat's: {only_a}, only in PyTorch's: {only_b})")
    if not a:
        raise ValueError("empty loss curves")
    keys = sorted(a)
    diffs = [(abs(a[k] - b[k]), k) for k in keys]
    rel = [abs(a[k] - b[k]) / max(abs(a[k]), abs(b[k]), 1e-30) for k in keys]
    first, last = keys[0], keys[-1]
    max_abs, at = max(diffs)
    return CurveComparison(
        batches=len(keys), first_abs=diffs[0][0], first_rel=rel[0], last_abs=diffs[-1][0],
        last_rel=rel[-1], max_abs=max_abs, max_abs_at=at, max_rel=max(rel),
        mean_abs=sum(d for d, _ in diffs) / len(diffs), early_batches=min(early, len(keys)),
        early_max_abs=max(d for d, _ in diffs[:max(early, 1)]), first_loss=a[first],
        last_loss=a[last])


@dataclass
class Tolerance:
    first_rtol: float = 1e-5   # first batch, relative: forward pass from identical weights
    early_atol: float = 1e-4   # first `early` batches, absolute
    early: int = 20
    atol: float = 5e-3         # every batch of the epoch, absolute

    def ok(self, c: CurveComparison) -> bool:
        return (c.first_rel <= self.first_rtol and c.early_max_abs <= self.early_atol
                and c.max_abs <= self.atol)


TOLERANCE_RATIONALE = (
    "Why these tolerances: both sides compute in fp32 but sum in different orders (memstrat's "
    "GEMMs on W [in x out] vs torch's Linear on W^T [out x in], different softmax and "
    "bias-gradient reductions), so the curves cannot agree bitwise. The first batch depends "
    "only on the forward pass from identical weights: rounding only, ~1e-7 relative. After "
    "that, per-step rounding differences accumulate through the SGD-momentum updates. "
    "Measured on the CPU for this MLP (full MNIST, batch 256, 1 epoch), the PyTorch "
    "baseline in fp32 against a float64 numpy reference of the same training differs by at "
    "most 8.7e-6 over the first 20 batches and 6.5e-4 (hidden 256; 3.0e-5 at hidden 1024) "
    "over the epoch, while real semantic differences are far larger: learning rate 1% off "
    "gives 7.5e-3 within the first 20 batches, 0.1% off 7e-4..9e-4, momentum 0.89 instead "
    "of 0.9 1.4e-2..1.6e-2; weights read untransposed 7e-2 at the first batch; a missing "
    "1/batch, no momentum or dampened momentum >1 within 20 batches. So: first batch "
    "relative <= {first_rtol:g}, first {early} batches absolute <= "
    "{early_atol:g}, every batch absolute <= {atol:g} (losses are 0.05..2.4).")


def curve_markdown(results: list[tuple[int, CurveComparison | None, str, dict]],
                   tol: Tolerance, batch: int) -> tuple[str, bool]:
    lines = [
        f"Epoch 1, batch {batch}: memstrat `train --strategy resident --transfer f32 --gemm "
        "cublas` (no TF32) against the PyTorch baseline `--mode resident --init DIR` loading "
        "memstrat's exported initial weights and sample order. "
        + TOLERANCE_RATIONALE.format(first_rtol=tol.first_rtol, early=tol.early,
                                     early_atol=tol.early_atol, atol=tol.atol), "",
        "| hidden | batches | first batch loss | first batch rel diff | max abs diff, first "
        f"{tol.early} | max abs diff (at batch) | max rel diff | mean abs diff | last batch "
        "abs diff | memstrat / PyTorch test acc | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    ok_all = True
    for hidden, c, error, extra in results:
        if c is None:
            ok_all = False
            lines.append(f"| {hidden} | - | - | - | - | - | - | - | - | - | FAILED: {error} |")
            continue
        ok = tol.ok(c)
        ok_all &= ok
        lines.append(
            f"| {hidden} | {c.batches} | {c.first_loss:.6f} | {c.first_rel:.3g} | "
            f"{c.early_max_abs:.3g} | {c.max_abs:.3g} ({c.max_abs_at[1]}) | {c.max_rel:.3g} | "
            f"{c.mean_abs:.3g} | {c.last_abs:.3g} | {extra.get('acc', '-')} | "
            f"{'agree' if ok else 'DIFFER'} |")
    return "\n".join(lines), ok_all
