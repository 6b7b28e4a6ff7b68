"""What benchmark_vs_pytorch.py compares, apart from how it runs things, all of it from records
so that a saved records file gives the same report: the speed table (memstrat strategy against
its nearest PyTorch feeding mode, statistics over processes: process_stats.py) with its verdict,
and the batch-by-batch loss-curve comparison with its tolerances, kept as a record of its own
({"record": "loss-curve-check", ...}) beside the runs."""
from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from baseline_record import iso_utc_now
from process_runs import run_records, tag_of
from process_stats import (MEMSTRAT_FASTER, SideBySide, judge, ms_cell, overlap_cell,
                           process_values, ratio_cell, side_by_side, tally)

# memstrat strategy -> the PyTorch mode it is compared with (double-buffer: pinned is PyTorch's
# nearest; it has no built-in double buffering).
PAIRINGS = (("resident", "resident"), ("pinned", "pinned"), ("double-buffer", "pinned"),
            ("pageable", "pageable"))
TRANSFER_ORDER = ("f32", "u8")
SPEED_TAG = "vs-pytorch-"             # run tags of the speed runs ...
CURVE_TAG = "vs-pytorch-curve-"       # ... and of the loss-curve check's runs
CURVE_KIND = "loss-curve-check"
PYTORCH = "PyTorch"


# ---------------------------------------------------------------------------------------------
# speed table

def _hidden(cfg: dict) -> tuple[int, ...]:
    h = cfg["hidden"]
    return tuple(h) if isinstance(h, list) else (int(h),)


def speed_groups(records: Sequence[dict]) -> dict[tuple, list[dict]]:
    """Ok speed runs by configuration: ("memstrat", strategy, transfer, batch, hidden, epochs)
    or ("pytorch", mode, transfer, batch, hidden, epochs)."""
    out: dict[tuple, list[dict]] = {}
    for r in run_records(records):
        c, tag = r["config"], tag_of(r) or ""
        if r.get("status") != "ok" or not tag.startswith(SPEED_TAG) or tag.startswith(CURVE_TAG):
            continue
        side, name = ("pytorch", c["mode"]) if c.get("framework") == "pytorch" else \
            ("memstrat", c["strategy"])
        key = (side, name, c["transfer"], int(c["batch"]), _hidden(c), int(c["epochs"]))
        out.setdefault(key, []).append(r)
    return out


@dataclass
class Row:
    batch: int
    hidden: tuple[int, ...]
    epochs: int
    memstrat: str
    transfer: str
    pytorch: str
    pair: SideBySide


def build_rows(records: Sequence[dict]) -> list[Row]:
    """One row per configuration, pairing and memstrat transfer that has runs on either side;
    PyTorch's side is its f32 pipeline (the data set held as float32)."""
    g = speed_groups(records)
    configs = sorted({(k[3], k[4], k[5]) for k in g})
    transfers = [t for t in TRANSFER_ORDER if any(k[0] == "memstrat" and k[2] == t for k in g)]
    rows = []
    for b, h, e in configs:
        for m, p in PAIRINGS:
            pt = process_values(g.get(("pytorch", p, "f32", b, h, e), []))
            for t in transfers:
                mine = process_values(g.get(("memstrat", m, t, b, h, e), []))
                if mine or pt:
                    rows.append(Row(b, h, e, m, t, p, side_by_side(mine, pt)))
    judge([r.pair for r in rows])       # Holm over every pair of the table
    return rows


def speed_markdown(rows: Sequence[Row]) -> str:
    head = ["batch", "hidden", "epochs", "memstrat", "transfer",
            "memstrat ms/epoch [interval] n", "PyTorch eager", "PyTorch f32 ms/epoch [interval] n",
            "speed-up PyTorch / memstrat [interval]", "test"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * 3 + "---|---|---:|---|---:|---:|---|"]
    for r in rows:
        cells = [str(r.batch), "x".join(map(str, r.hidden)), str(r.epochs), r.memstrat,
                 r.transfer, ms_cell(r.pair.memstrat), r.pytorch, ms_cell(r.pair.other),
                 ratio_cell(r.pair), overlap_cell(r.pair, PYTORCH)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed_verdict(rows: Sequence[Row]) -> tuple[list[str], bool]:
    """Lines of verdict per transfer; True when, with the transfer that is PyTorch's nearest
    equivalent (f32, else the first present), memstrat is faster by the Holm-corrected test in
    every row."""
    transfers = list(dict.fromkeys(r.transfer for r in rows))
    nearest = "f32" if "f32" in transfers else (transfers[0] if transfers else None)
    lines, all_faster = [], True
    for t in transfers:
        mine = [r for r in rows if r.transfer == t]
        lines.append(f"memstrat --transfer {t} against PyTorch's nearest equivalent: "
                     + tally([r.pair for r in mine], PYTORCH))
        if t == nearest and any(r.pair.order != MEMSTRAT_FASTER for r in mine):
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


@dataclass(frozen=True)
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


def curve_record(hidden: int, batch: int, c: CurveComparison | None, error: str, acc: str,
                 tol: Tolerance) -> dict:
    """The check's result as a record of its own, so that the report can be rebuilt from the
    records file without the curve files."""
    return {"record": CURVE_KIND, "schema_version": 1,
            "status": "ok" if c is not None else "failed", "started_at": iso_utc_now(),
            "hidden": hidden, "batch": batch,
            "comparison": dataclasses.asdict(c) if c is not None else None,
            "error": error or None, "test_acc": acc or None, "tolerance": dataclasses.asdict(tol)}


def curve_sections(records: Sequence[dict]) -> list[tuple[int, Tolerance, list]]:
    """(batch, tolerance, [(hidden, comparison or None, error, extra)]) per batch and tolerance
    of the loss-curve-check records, as curve_markdown takes them."""
    out: dict[tuple, list] = {}
    for r in records:
        if r.get("record") != CURVE_KIND:
            continue
        c = r.get("comparison")
        comp = CurveComparison(**{**c, "max_abs_at": tuple(c["max_abs_at"])}) if c else None
        key = (int(r["batch"]), Tolerance(**r["tolerance"]))
        out.setdefault(key, []).append((int(r["hidden"]), comp, r.get("error") or "",
                                        {"acc": r["test_acc"]} if r.get("test_acc") else {}))
    return [(b, tol, results) for (b, tol), results in out.items()]
