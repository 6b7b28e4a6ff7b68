"""memstrat analysis: run records (JSON Lines, schema v1) -> CSV, plots and a report.

    analysis/report.py results/<dir> --out reports/<dir>
    analysis/compare.py BASE NEW          # regression guard, exit 1 on a regression
    analysis/primitives.py P.jsonl --out DIR          # `memstrat primitives` records
    analysis/cost_model.py results/<dir> --primitives P.jsonl   # predicted vs measured
    analysis/advise.py --step-us X --bytes-per-sample Y --samples N --budget-gib W  # your model

Modules: jsonl (reading JSON Lines: a torn last line, records read twice), records (load +
validate), stats (median over processes and its order-statistic interval, effects between
configurations, Mann-Whitney tests with Holm's correction, ranks, stability), aggregate
(records -> configurations, the compute-only reference, floors, overlap efficiency, CSV), plots
(each figure as PNG, SVG and PDF; plot_style the shared look, strategy_pairs the best form ->
naive form table), timeline (a trace's per-stream timeline figure), document (the report's
Markdown/HTML),
report (the CLI: report.md + self-contained report.html), report_model (its primitives and
cost-model sections), compare (BASE vs NEW), primitives (transfer-primitive records, knees,
interpolated costs), cost_model (each strategy's epoch predicted from the primitives and the
compute-only epoch), advise (that model applied to a user's step time, data and device budget:
a recommended strategy) with advise_check (the advice against a results set's measured
winners), parity_plot (the cost model's predicted-vs-measured figure), docs_blocks
(the CLI that keeps the generated number blocks of README.md and docs/ current) with
results_set (a committed docs/results/<gpu>/ set) and block_generators (what each block says);
bench_report (times report.py on 100,000 synthetic records).
"""
