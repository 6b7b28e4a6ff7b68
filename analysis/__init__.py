"""memstrat analysis: run records (JSON Lines, schema v1) -> CSV, plots and a report.

    analysis/report.py results/<dir> --out reports/<dir>
    analysis/compare.py BASE NEW          # regression guard, exit 1 on a regression

Modules: records (load + validate), stats (median over processes, bootstrap interval,
stability, tiers), aggregate (records -> configurations, the compute-only reference, floors,
overlap efficiency, CSV), plots (one PNG per figure), report (the CLI: report.md +
self-contained report.html), compare (BASE vs NEW), docs_blocks (the CLI that keeps the
generated number blocks of README.md and docs/ current) with results_set (a committed
docs/results/<gpu>/ set) and block_generators (what each block says).
"""
