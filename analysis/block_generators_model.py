"""Generated blocks that explain the measurements: the transfer primitives and the cost model.

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module), so they follow the same rules: numbers come from the results set's records
(``records/primitives.jsonl`` and the run records), with their interval and n where there is
one, and a value the set does not hold reads NOT_MEASURED.

    <!-- generated:primitives from docs/results/nvidia-h200 -->
    <!-- generated:cost-model b256 u8 static from docs/results/nvidia-h200 -->
    <!-- generated:primitive-facts b256 hidden=256 from docs/results/nvidia-h200 -->
"""
from __future__ import annotations

from analysis import cost_model
from analysis.aggregate import compute_reference
from analysis.block_generators import (NOT_MEASURED, BlockArgs, generator, pick, select,
                                       value)
from analysis.document import fmt_num
from analysis.primitives import (PrimitiveTable, bandwidth_at, latest_curves, size_text,
                                 summary_row)
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


@generator("primitive-facts", required=("batch",))
def primitive_facts(rs: ResultsSet, a: BlockArgs) -> str:
    """What the primitives table says about one batch size, in words: where a batch's image copy
    lies on `pinned-h2d`'s curve (u8 and f32) and the share of the peak it runs at; what a
    prefetch call costs when nothing moves against the step it hides behind (resident's GPU time
    per batch at um-prefetch's launch form and step); and fault-driven migration's peak against
    the copy engine's."""
    curves = {name: c for (_, name), c in sorted(latest_curves(rs.primitives).items())}
    rows = {name: summary_row(c) for name, c in curves.items()}
    ok = {name: r for name, r in rows.items() if r["status"] == "ok"}
    out = []
    pinned = ok.get("pinned-h2d")
    if pinned is None:
        out.append(f"Where a batch's copy lies on the pinned copy's curve: {NOT_MEASURED}.")
    else:
        k50, k90, peak = pinned["knee50_bytes"], pinned["knee90_bytes"], pinned["peak_gbps"]
        parts = []
        for t in ("u8", "f32"):
            nbytes = a.batch * cost_model.IMAGE_PIXELS * cost_model.PIXEL_BYTES[t]
            whose = "the pinned copy's" if not parts else "its"
            where = (f"below {whose} 50% knee ({size_text(k50)})" if nbytes < k50 else
                     f"between {whose} 50% and 90% knees ({size_text(k50)}, "
                     f"{size_text(k90)})" if nbytes < k90 else
                     f"past {whose} 90% knee ({size_text(k90)})")
            share = bandwidth_at(curves["pinned-h2d"], nbytes) / peak
            parts.append(f"{'a' if t == 'u8' else 'an'} {t} batch's images "
                         f"({size_text(nbytes)}) lie {where} and copy at {share:.0%} of its "
                         "peak")
        out.append(f"At batch {a.batch}, {parts[0]}; {parts[1]} (`pinned-h2d`: "
                   f"{peak:.1f} GB/s at {size_text(pinned['peak_bytes'])}, a fixed cost of "
                   f"{fmt_num(pinned['fixed_cost_us'])} µs per call). A copy per batch pays that "
                   "fixed cost every time and runs the bus below its peak.")
    out.append(_prefetch_fact(rs, a, ok.get("um-prefetch-resident")))
    fault = ok.get("um-fault-h2d")
    if fault is None or pinned is None:
        out.append(f"Fault-driven migration against the copy engine: {NOT_MEASURED}.")
    else:
        out.append(f"Fault-driven migration (`um-fault-h2d`) peaks at {fault['peak_gbps']:.1f} "
                   f"GB/s, {fault['peak_gbps'] / pinned['peak_gbps']:.0%} of the copy "
                   "engine's.")
    return "\n\n".join(out)


def _prefetch_fact(rs: ResultsSet, a: BlockArgs, prefetch: dict | None) -> str:
    """A prefetch call on resident pages against the step it hides behind (um-prefetch's compute
    reference: resident at its launch form and step, GPU time per batch)."""
    if prefetch is None:
        return f"What a prefetch call costs when nothing moves: {NOT_MEASURED}."
    cost = prefetch["fixed_cost_us"]
    head = (f"A prefetch call costs {fmt_num(cost)} µs even when nothing moves "
            "(`um-prefetch-resident`'s fixed cost), and um-prefetch makes two per batch")
    groups = select(rs, BlockArgs(a.batch, "u8", "static", options=a.options))
    g = pick(groups, "um-prefetch")
    ref = compute_reference(rs.groups, g) if g is not None else None
    gpu = ref.median("gpu_ms") if ref is not None else None
    if gpu is None:
        return f"{head}; the step they hide behind at batch {a.batch}: {NOT_MEASURED}."
    step_us = 1000.0 * gpu / cost_model.shape_of(ref).batches
    than = "longer than" if cost > step_us else "shorter than"
    return (f"{head}: each is {than} the MLP step it is meant to hide behind ("
            f"{fmt_num(step_us)} µs at batch {a.batch}, u8: resident's GPU time per batch at "
            f"um-prefetch's launch form).")
