"""Generated blocks that explain the measurements: the transfer primitives and the cost model.

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module), so they follow the same rules: numbers come from the results set's records
(``records/primitives.jsonl`` and the run records), with their interval and n where there is
one, and a value the set does not hold reads NOT_MEASURED.

    <!-- generated:primitives from docs/results/nvidia-h200 -->
    <!-- generated:cost-model b256 u8 static from docs/results/nvidia-h200 -->
"""
from __future__ import annotations

from analysis import cost_model
from analysis.block_generators import (NOT_MEASURED, BlockArgs, generator, select,
                                       value)
from analysis.document import fmt_num
from analysis.primitives import PrimitiveTable, latest_curves, size_text, summary_row
from analysis.results_set import ResultsSet

UNEXPLAINED = cost_model.UNEXPLAINED


def _size(b) -> str:
    return size_text(b) if b is not None else "-"


@generator("primitives")
def primitives(rs: ResultsSet, a: BlockArgs) -> str:
    """Per primitive: peak bandwidth, the sizes where it reaches 50% and 90% of it, the 4 KiB
    latency and the fixed cost per call."""
    curves = latest_curves(rs.primitives)
    if not curves:
        return f"Transfer primitives: {NOT_MEASURED}."
    lines = ["| primitive | timed by | peak GB/s | at | 50% of peak at | 90% at | 4 KiB latency "
             "| fixed cost per call |", "|---|---|---|---|---|---|---|---|"]
    for (_, name), c in sorted(curves.items()):
        r = summary_row(c)
        if r["status"] != "ok":
            lines.append(f"| {name} | {r['timed_by']} | {r['status']}: {r['reason']} "
                         "| | | | | |")
            continue
        lines.append(
            f"| {name} | {r['timed_by']} | {r['peak_gbps']:.1f} | {_size(r['peak_bytes'])} "
            f"| {_size(r['knee50_bytes'])} | {_size(r['knee90_bytes'])} "
            f"| {fmt_num(r['latency_4k_us'])} µs | {fmt_num(r['fixed_cost_us'])} µs |")
    lines += ["", "Median of the samples at each size; the knees are interpolated in log size "
              "(docs/methodology.md, Transfer primitives)."]
    return "\n".join(lines)


@generator("cost-model", required=("batch", "transfer", "scenario"))
def cost_model_block(rs: ResultsSet, a: BlockArgs) -> str:
    """Predicted vs measured GPU time per epoch for every strategy of one configuration."""
    tables = PrimitiveTable.by_gpu(rs.primitives)
    groups = select(rs, a)
    if not tables or not groups:
        return f"Cost model at {a.where()}: {NOT_MEASURED}."
    comps = [c for c in cost_model.compare(rs.groups, tables) if c.group in groups]
    lines = ["| strategy | form | predicted GPU ms | measured GPU ms | residual | |",
             "|---|---|---|---|---|---|"]
    for c in comps:
        label = c.group.key.variant_label
        if c.prediction is None:
            lines.append(f"| {label} | | no model: {c.reason} | {value(c.gpu)} | | |")
            continue
        res = c.gpu_residual
        flag = ("unexplained (docs/strategies.md)" if res is not None and abs(res) > UNEXPLAINED
                else "")
        lines.append(f"| {label}{' (the reference, C)' if c.is_reference else ''} "
                     f"| {c.prediction.semantics.form} | {fmt_num(c.predicted_gpu_ms)} | {value(c.gpu)} "
                     f"| {'-' if res is None else f'{res:+.0%}'} | {flag} |")
    lines += ["", f"At {a.where()}. Residual = (measured - predicted) / measured; beyond "
              f"±{UNEXPLAINED:.0%} a configuration is flagged unexplained. The model and its "
              "assumptions: docs/methodology.md, Cost model."]
    return "\n".join(lines)
