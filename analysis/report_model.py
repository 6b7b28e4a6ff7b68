"""The report's sections built from `memstrat primitives` records (analysis/report.py
--primitives): "Transfer primitives" (bandwidth and latency against size, and per primitive its
peak, knees, 4 KiB latency and fixed cost: analysis/primitives.py) and "Cost model" (each
configuration's predicted and measured epoch, residuals, the parity plot and every residual over
25% listed as unexplained: analysis/cost_model.py). Also where the floors' pinned bulk bandwidth
comes from when the primitives are given."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .aggregate import Group
from .cost_model import (MODELS, UNEXPLAINED, Comparison, describe, fmt_residual,
                         unexplained)
from .document import Doc, also_as, fmt_num
from .parity_plot import plot_parity
from .primitives import PrimitiveTable, plot_primitives, size_text, summary_row
from .stats import median_with_interval

PINNED = "pinned-h2d"
SM_MAPPED = "sm-copy-mapped"


PRIMITIVES_CAPTION = (
    "memstrat primitives: every primitive's bandwidth (bytes / median time) and time per "
    "transfer against its size, log-log; band: p25-p75 of the samples; solid: timed with CUDA "
    "events, dashed: with the host clock; dotted line: the PCIe link's raw rate before protocol "
    "overhead (docs/methodology.md, Transfer primitives).")
PARITY_CAPTION = (
    "Each configuration's steady epoch as the cost model predicts it (x) and as measured (y, "
    "median over processes), GPU time and wall time; grey band: "
    f"|residual| <= {UNEXPLAINED:.0%}. One row of panels per batch size; colour: the "
    "strategy's approach, circle: naive form, square: best form; filled: u8 transfer, hollow: "
    "f32; ×: unstable; whiskers: the measured median's order-statistic interval (coverage in "
    "the legend). The compute-only reference is left out (its prediction is its measurement). "
    "docs/methodology.md, Cost model.")


def pinned_bandwidth(tables: dict[str, PrimitiveTable],
                     groups: Sequence[Group]) -> tuple[float | None, str]:
    """(pinned bulk host-to-device bytes/s for the floors, a sentence saying where it comes
    from): the pinned-h2d peak measured on the runs' GPU; None when the runs come from several
    GPUs or that GPU has no ok pinned-h2d record."""
    gpus = sorted({g.key.gpu for g in groups})
    if len(gpus) != 1:
        return None, ("the runs come from several GPUs; the floors take one bandwidth: pass "
                      "`--pinned-bandwidth GB/s`")
    curve = tables.get(gpus[0], PrimitiveTable({})).curves.get(PINNED)
    if curve is None or curve.status != "ok" or not curve.points:
        return None, f"no ok {PINNED} record for {gpus[0]} in the primitive records"
    row = summary_row(curve)
    return row["peak_gbps"] * 1e9, (
        f"B = {row['peak_gbps']:.1f} GB/s, the {PINNED} peak that `memstrat primitives` "
        f"measured on {gpus[0]} (at {size_text(row['peak_bytes'])})")


def sm_mapped_rate(tables: dict[str, PrimitiveTable], groups: Sequence[Group]) -> float | None:
    """The sm-copy-mapped peak in bytes/s measured on the runs' one GPU (the transfer floor of
    the strategies that stage through SMs); None with several GPUs or no ok record."""
    gpus = sorted({g.key.gpu for g in groups})
    if len(gpus) != 1:
        return None
    curve = tables.get(gpus[0], PrimitiveTable({})).curves.get(SM_MAPPED)
    if curve is None or curve.status != "ok" or not curve.points:
        return None
    return summary_row(curve)["peak_gbps"] * 1e9


def primitives_section(doc: Doc, tables: dict[str, PrimitiveTable], plots_dir: Path,
                       bandwidth_note: str) -> list[Path]:
    """'Transfer primitives': per GPU the figure and the table; returns the PNGs written."""
    doc.h(2, "Transfer primitives")
    doc.p("What each way of moving bytes costs on its own, against transfer size (`memstrat "
          "primitives`, docs/methodology.md, Transfer primitives). **Knee**: the smallest size "
          "at which a primitive reaches 50% / 90% of its peak bandwidth; **fixed cost**: the "
          "smallest size's median time minus its bytes at peak bandwidth. Floors: "
          + bandwidth_note + ".")
    written = []
    for i, (gpu, table) in enumerate(tables.items()):
        if len(tables) > 1:
            doc.h(3, gpu)
        name = "primitives.png" if len(tables) == 1 else f"primitives_{i + 1}.png"
        png = plot_primitives(list(table.curves.values()), plots_dir / name)
        if png is not None:
            written.append(png)
            doc.img(png, f"plots/{png.name}", f"Transfer primitives on {gpu}",
                    PRIMITIVES_CAPTION + also_as(png))
        rows = []
        for c in table.curves.values():
            r = summary_row(c)
            if c.status != "ok" or not c.points:
                rows.append([c.primitive, c.timed_by, c.direction, f"{c.status}: {c.reason}",
                             "", "", "", ""])
                continue
            rows.append([c.primitive, c.timed_by, c.direction,
                         f"{r['peak_gbps']:.1f} (at {size_text(r['peak_bytes'])})",
                         size_text(r["knee50_bytes"]), size_text(r["knee90_bytes"]),
                         fmt_num(r["latency_4k_us"]), fmt_num(r["fixed_cost_us"])])
        doc.table(["primitive", "clock", "direction", "peak GB/s", "50% knee", "90% knee",
                   "4 KiB latency µs", "fixed cost µs"], rows, align="lllrrrrr")
    return written


def cost_model_section(doc: Doc, comparisons: Sequence[Comparison],
                       plots_dir: Path) -> Path | None:
    """'Cost model': what each strategy moves, predicted vs measured, the parity plot, the
    unexplained residuals and the configurations without a model; returns the PNG."""
    doc.h(2, "Cost model")
    doc.p("Each configuration's steady epoch predicted from the primitives above and the "
          "compute-only epoch **C** (the median GPU ms of `resident`, static, with the same "
          "launch form, transfer, batch, hidden layers and GEMM). **serial**: the compute stream "
          "waits for every transfer, GPU time = C + the transfers. **overlap**: the next batch's "
          "(or chunk's) transfers run while the current one computes, GPU time = the first "
          "transfers + Σ max(step, next transfers), with C split evenly over the batches. "
          "Predicted wall = predicted GPU + the measured host_ms (the host's data preparation, "
          "not modelled). Residual = (measured − predicted) / measured; beyond "
          f"±{UNEXPLAINED:.0%} the configuration is **unexplained**. Every assumption: "
          "docs/methodology.md, Cost model.")
    used = sorted({c.group.key.strategy for c in comparisons} & set(MODELS),
                  key=list(MODELS).index)
    doc.table(["strategy", "static (steady epoch)", "refresh", "assumption"],
              [[s, describe(MODELS[s].static), describe(MODELS[s].refresh),
                "; ".join(dict.fromkeys(a for a in (MODELS[s].static.assumption,
                                                    MODELS[s].refresh.assumption) if a))]
               for s in used])
    rows = []
    for c in comparisons:
        p, k = c.prediction, c.group.key
        if p is None:
            continue
        rows.append([k.variant_label + (" (is C)" if c.is_reference else ""), k.scenario,
                     k.transfer, k.batch, p.semantics.form, fmt_num(p.compute_ms),
                     fmt_num(p.transfer_ms), fmt_num(c.predicted_gpu_ms), median_with_interval(c.gpu, fmt_num),
                     fmt_residual(c.gpu_residual), fmt_num(c.predicted_wall_ms),
                     median_with_interval(c.wall, fmt_num), fmt_residual(c.wall_residual)])
    png = None
    if rows:
        doc.table(["configuration", "scenario", "transfer", "batch", "form", "C ms",
                   "transfers ms", "predicted GPU ms", "measured GPU ms [interval]",
                   "residual", "predicted wall ms", "measured wall ms [interval]", "residual"],
                  rows, align="lllrl" + "r" * 8)
        doc.p("'transfers ms': every modelled transfer summed (in an overlapping form most of "
              "it is hidden); '(n=1)': one process, no interval; '!': "
              f"|residual| > {UNEXPLAINED:.0%}.")
        png = plot_parity(comparisons, plots_dir / "cost_model_parity.png", UNEXPLAINED)
        if png is not None:
            doc.img(png, f"plots/{png.name}", "Cost model parity plot",
                    PARITY_CAPTION + also_as(png))
    doc.h(3, f"Unexplained (|residual| > {UNEXPLAINED:.0%})")
    doc.ul(unexplained_lines(comparisons)
           or [f"None: every predicted configuration is within ±{UNEXPLAINED:.0%}."])
    missing: dict[str, list[str]] = {}
    for c in comparisons:
        if c.prediction is None:
            missing.setdefault(c.reason or "", []).append(c.label)
    if missing:
        doc.h(3, "No model")
        doc.ul([f"{why}: {', '.join(labels)}." for why, labels in missing.items()])
    return png


def unexplained_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """One line per unexplained residual (GPU and wall apart), with the configuration."""
    lines = []
    for c in comparisons:
        for what, pred, meas, res in (("GPU", c.predicted_gpu_ms, c.gpu, c.gpu_residual),
                                      ("wall", c.predicted_wall_ms, c.wall, c.wall_residual)):
            if unexplained(res):
                lines.append(f"{c.label}: {what} measured {fmt_num(meas.median)} ms, predicted "
                             f"{fmt_num(pred)} ms, residual {res:+.0%}"
                             + (" (measured above the model: time it does not account for)"
                                if res > 0 else " (measured below the model: it over-counts)"))
    return lines
