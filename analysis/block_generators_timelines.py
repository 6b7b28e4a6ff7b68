"""The timelines block: the results set's timeline figure of each strategy family, as images
in the doc that holds the marker (experiments/scripts/reproduce.sh's timelines stage traces
them into traces/<strategy>.json.gz and draws plots/timeline_<strategy>.svg with
analysis/timeline.py).

    <!-- generated:timelines relative_to=docs from docs/results/nvidia-h200 -->

`relative_to` names the folder of the doc, relative to the repository root, so that the image
links resolve from it (docs/profiling.md: `docs`). A set without the figures says so and how to
draw them. Registered with analysis/block_generators.py's ``@generator`` (analysis/docs_blocks.py
imports this module).
"""
from __future__ import annotations

import posixpath

from analysis.block_generators import NOT_MEASURED, BlockArgs, generator
from analysis.document import Doc
from analysis.results_set import ResultsSet

PREFIX = "timeline_"
HOW_TO_DRAW = ("`bash experiments/scripts/reproduce.sh --stages timelines` traces one run per "
               "strategy family and draws them")


@generator("timelines", options=("relative_to",))
def timelines(rs: ResultsSet, a: BlockArgs) -> str:
    figures = sorted((rs.path / "plots").glob(f"{PREFIX}*.svg"))
    doc = Doc()
    if not figures:
        doc.p(f"Timeline figures: {NOT_MEASURED}; {HOW_TO_DRAW}.")
        return doc.markdown()
    base = a.options.get("relative_to", ".")
    for f in figures:
        strategy = f.stem[len(PREFIX):]
        link = posixpath.relpath(f"{rs.label}/plots/{f.name}", base)
        doc.p(f"**{strategy}**: three batches of a steady epoch of the run the timelines stage "
              f"traced (trace `{rs.label}/traces/{strategy}.json.gz`)")
        doc.p(f"![{strategy}: the streams and host ranges of three batches]({link})")
    return doc.markdown()
