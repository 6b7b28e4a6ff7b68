"""The generated block that sets memstrat beside the strongest PyTorch and JAX pipelines.

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module). It reads the records experiments/baselines/benchmark_pipelines.py wrote into the
results set (``baselines/records/pipelines.jsonl``: memstrat's run records and the PyTorch and
JAX ones, keyed by their run tags; kept apart from records/, as every baseline is) through that
script's own grouping and tests, so the block and the script's table cannot disagree.

    <!-- generated:pipelines b256 from docs/results/nvidia-h100 -->
"""
from __future__ import annotations

import sys
from pathlib import Path

from analysis.block_generators import NOT_MEASURED, BlockArgs, BlockError, generator, value
from analysis.jsonl import RecordError, read_jsonl
from analysis.results_set import ResultsSet
from analysis.stats import MIN_PROCESSES, summarize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments" / "baselines"))
import benchmark_pipelines as bp  # noqa: E402
from process_stats import overlap_cell, process_values, ratio_cell  # noqa: E402

FRAMEWORKS = (("pytorch", "strongest PyTorch pipeline"), ("jax", "JAX"))
HOW = "`bash experiments/scripts/reproduce.sh --stages pipelines`"
RECORDS = Path("baselines") / "records" / "pipelines.jsonl"


def pipeline_records(rs: ResultsSet) -> list[dict]:
    """The set's baselines/records/pipelines.jsonl, every line as read (memstrat's, PyTorch's,
    JAX's and the plan records); empty without the file."""
    path = rs.path / RECORDS
    if not path.is_file():
        return []
    try:
        return [rec for _, rec in read_jsonl(path) if isinstance(rec, dict)]
    except RecordError as e:
        raise BlockError(f"{rs.label}/{RECORDS.as_posix()}: {e}") from None


def _untested_faster(by_key: dict, aug: str, b: int, fw: str, chosen) -> str:
    """'; lower median, too few processes to test: V 20.00 ms, n=1 (no interval)', naming each
    variant of the framework with fewer than 3 processes whose median is below the chosen one's."""
    notes = []
    for v in bp.VARIANTS:
        recs = by_key.get((aug, b, v, "epoch"))
        if bp.FRAMEWORK[v] != fw or not recs or len(recs) >= MIN_PROCESSES:
            continue
        s = summarize(process_values(recs))
        if s is not None and chosen is not None and s.median < chosen.median:
            notes.append(f"{v} {value(s)}")
    return f"; lower median, too few processes to test: {', '.join(notes)}" if notes else ""


@generator("pipelines", defaults={"batch": 256})
def pipelines(rs: ResultsSet, a: BlockArgs) -> str:
    """Per augmentation, end to end: memstrat's resident with GPU augmentation, the PyTorch
    variant no other PyTorch variant beats by the tests, and JAX, each framework's ratio to
    memstrat with its interval and the Holm-corrected test."""
    b = a.batch
    by_key = bp.groups(pipeline_records(rs))
    augs = [g for g in bp.AUGMENTS if (g, b, bp.MEMSTRAT, "epoch") in by_key]
    if not augs:
        return (f"memstrat beside the strongest PyTorch pipelines and JAX, end to end at batch "
                f"{b}: {NOT_MEASURED} ({HOW}; experiments/baselines/benchmark_pipelines.py).")
    judged = dict(bp.pairs(by_key))
    head = "| augment | memstrat: resident, GPU augmentation |"
    for _, name in FRAMEWORKS:
        head += f" {name} | {name} / memstrat |"
    lines = [head, "|---|---|" + "---|---|" * len(FRAMEWORKS)]
    for aug in augs:
        mine = summarize(process_values(by_key[(aug, b, bp.MEMSTRAT, "epoch")]))
        row = f"| {aug} | {value(mine)} |"
        for fw, _ in FRAMEWORKS:
            v = bp.strongest(by_key, aug, b, "epoch", [fw])
            if v is None:
                row += " not measured | |"
                continue
            p = judged[(aug, b, v, "epoch")]
            row += f" {v}: {value(p.other)}{_untested_faster(by_key, aug, b, fw, p.other)} " \
                   f"| {ratio_cell(p)}; {overlap_cell(p, v)} |"
        lines.append(row)
    lines += ["", f"End to end (the epoch: the data made and every step) at batch {b}, u8, the "
              "stream scenario's sample order and augmented bytes, the same model and initial "
              "weights on every side. A framework's strongest variant: the one no other variant "
              "of it beats by the Holm-corrected pairwise tests. Ratio: the Hodges-Lehmann ratio "
              "of the processes' values with its Moses interval; the test: two-sided "
              "Mann-Whitney U, Holm-corrected over every variant against memstrat. Every "
              "variant, and the step and pipeline measures kept apart: "
              f"{rs.label}/baselines/vs_fast_pipelines.md."]
    return "\n".join(lines)
