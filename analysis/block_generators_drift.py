"""The drift block: whether a results set's processes differ between the machines (boots) that
ran them, and slow down (or speed up) with their machine's busy time or their own set-up time,
per part of the epoch (analysis/drift.py's tests, rendered).

    <!-- generated:drift from docs/results/nvidia-h200 -->

Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py imports
this module). It reads every timed process of the set, whatever the marker's batch or scenario:
boots and busy time are the machine's, shared by all of them. A set whose records name no machine boot
(`env.boot_id`) or no start time says so instead of a table.
"""
from __future__ import annotations

from analysis import drift
from analysis.block_generators import NOT_MEASURED, BlockArgs, generator
from analysis.document import Doc
from analysis.results_set import ResultsSet


@generator("drift")
def drift_block(rs: ResultsSet, a: BlockArgs) -> str:
    drifts = drift.measure(rs.groups)
    if not drifts:
        return (f"{NOT_MEASURED.capitalize()}: its records name no machine boot "
                f"(`env.boot_id`) and start time for {drift.MIN_PROCESSES} or more processes of "
                f"two configurations.")
    doc = Doc()
    doc.p(drift.summary(drifts) + f" Processes from {drifts[0].machines} machine boot(s).")
    doc.table(*drift.table(drifts))
    doc.ul([drift.RULE])
    return doc.markdown()
