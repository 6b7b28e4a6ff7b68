"""memstrat analysis: run records (JSON Lines, schema v1) -> CSV, plots and a report.

    analysis/report.py results/<dir> --out reports/<dir>

Modules: records (load + validate), aggregate (repeats -> medians/spread, CSV),
plots (one PNG per figure), report (the CLI: report.md + self-contained report.html).
"""
