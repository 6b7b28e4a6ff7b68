#!/usr/bin/env python3
"""Build the memstrat report from run records.

    analysis/report.py results/quick --out reports/quick
    analysis/report.py a.jsonl b.jsonl --out reports/combined

Inputs are results folders (their records.jsonl) and/or JSON Lines files. Writes into
OUT: summary.csv (one row per configuration), plots/*.png, report.md (figures linked)
and report.html (one self-contained page, figures embedded). With ``--primitives FILE``
(records of `memstrat primitives`) the report adds the "Transfer primitives" and "Cost model"
sections (analysis/report_model.py), writes cost_model.csv, and takes the floors' pinned bulk
bandwidth from the pinned-h2d peak (``--pinned-bandwidth`` overrides it). The report states the
environment the runs came from (and warns where the GPU's clocks were held down or moved:
analysis/environment.py), ranks the strategies per scenario and transfer by the
median over processes of ms per epoch (ordered only where a Mann-Whitney test, Holm-corrected
over the table's pairs, says so),
lists failed runs, and says which values were null/unavailable and which runs had the
profiler on. Runs of the stream scenario get their own section (analysis/stream.py: epoch
time and starvation against host workers, where each strategy stops starving). Statistics:
analysis/stats.py; floors and overlap: analysis/aggregate.py; all defined in
docs/methodology.md.

A record read twice (the same run_id; e.g. a file given twice) counts once, and a torn last line
of a records file is skipped; both are said on stderr and in the report (analysis/records.py).
Exit status: 0 written, 2 an input that cannot be read or used, or an OUT that cannot be written.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import inspect
import os
import sys
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import cost_model, figure_pool  # noqa: E402
from analysis.aggregate import (PIPELINED_STRATEGIES, Group, LinkRates, aggregate,  # noqa: E402
                                floors, overlap_efficiency, present, reference_batch,
                                representative, slices, strategies_in)
from analysis.document import Doc, also_as, fmt_num  # noqa: E402
from analysis.environment import environment_section  # noqa: E402
from analysis.plot_style import SCENARIO_NOTE, context  # noqa: E402
from analysis.summary_csv import write_csv  # noqa: E402
from analysis.plots import PLOTS  # noqa: E402
from analysis.primitives import PrimitiveTable  # noqa: E402
from analysis.records import (RecordError, failed_records, load_records,  # noqa: E402
                              ok_records, resolve_inputs)
from analysis.report_model import (cost_model_section, pinned_bandwidth,  # noqa: E402
                                   primitives_section, sm_mapped_rate)
from analysis import drift, spread  # noqa: E402
from analysis.stats import (MIN_PROCESSES, UNSTABLE_HALF_WIDTH,  # noqa: E402
                            describe_interval, median_with_interval, rank_by_tests,
                            stability_label)
from analysis.stream import figure_jobs as stream_figure_jobs  # noqa: E402
from analysis.stream import is_stream, section as stream_section  # noqa: E402

CAPTIONS = {
    "ms_per_epoch": "Wall-clock time per epoch: per process the median of its steady epochs "
                    "2..N, per point (strategy colour, one marker per batch size) the median over "
                    "processes; whiskers: the order-statistic interval of that median (coverage "
                    "at least 95% from 6 processes on; none below 3); ×: unstable. Dashed grey "
                    "line: compute floor; solid black line: floor "
                    "(docs/methodology.md, Floors). double-buffer is shown at its default "
                    "depth 2 with one copy stream.",
    "throughput_vs_batch": "Training samples per second at the median epoch time; the "
                           "whiskers span the order-statistic interval of the median over processes; "
                           "circles/solid: naive form, squares/dashed: best form.",
    "epoch_breakdown": "Medians over processes. Stacked: compute-stream busy time, "
                       "stall (compute waiting for data) and host-side data preparation "
                       "(refresh rewrite); black tick: wall clock with its interval. "
                       "Light blue: GPU time of the strategy's own copies/prefetches; it "
                       "runs on copy engines and may overlap compute, so it is not stacked. "
                       "Dashed grey line: compute floor; solid black line: floor.",
    "epoch1_vs_steady": "Epoch 1 includes first-touch page faults, CUDA-graph capture and "
                        "library warm-up; steady state is the median over processes of "
                        "each process's median of epochs 2..N. Hollow: epoch 1 (whisker "
                        "min-max over processes); filled: steady state (whisker: its interval).",
    "malloc_per_epoch": "cudaMalloc calls counted by CUPTI (profiled runs): in set-up "
                        "(before epoch 1) and in every epoch. A correct strategy allocates "
                        "nothing after set-up, so every epoch column should read 0.",
    "um_counters": "CUPTI unified-memory counters (profiled runs): GPU page faults and "
                   "bytes migrated host-to-device and device-to-host, epoch 1 vs steady "
                   "state. Strategies whose counters are all 0 (measured) or all null are named "
                   "above the figure, not drawn.",
    "overlap_efficiency": "Overlap efficiency of each double-buffer configuration "
                          "(docs/methodology.md, Overlap efficiency): 1 = the shorter of "
                          "copy and compute is completely hidden, 0 = they ran one after "
                          "the other. Compute-only = resident at the same launch form, static "
                          "data, same step, transfer, batch, hidden and GEMM. Colour and marker: "
                          "batch size; hollow: 2 copy streams.",
}
NULL_METRICS = {
    "copy_ms": "copy_ms (the strategy issues no copies or prefetches of its own)",
    "compute_ms": "compute_ms",
    "stall_ms": "stall_ms",
    "um_gpu_faults": "unified-memory counters um_* (not a managed-memory strategy, or "
                     "CUPTI counters unavailable)",
    "kernel_ms": "kernel_ms (CUPTI activity not recorded)",
    "memcpy_ms": "memcpy_ms (CUPTI activity not recorded)",
}


# --------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------
def _n_cell(g: Group) -> str:
    """'5 (profiler off)': processes behind the timing and whether CUPTI was on in them."""
    return f"{g.n_processes} (profiler {'on' if g.timing_profiled else 'off'})"


def _spread(g: Group) -> str:
    s = g.stat("wall_ms")
    if s is None:
        return "n/a"
    return fmt_num(s.min) if s.n == 1 else f"{fmt_num(s.min)}-{fmt_num(s.max)}"


def ranked_groups(groups: Sequence[Group]) -> tuple[list[tuple[int, Group]], list[Group]]:
    """([(rank, group)] by stats.rank_by_tests over wall time, the groups too small to test)."""
    timed = [g for g in groups if g.stat("wall_ms") is not None]
    ranked = rank_by_tests(timed, lambda g: g.process_values("wall_ms"))
    return ([(r.rank, r.item) for r in ranked if r.rank is not None],
            [r.item for r in ranked if r.rank is None])


def order_text(groups: Sequence[Group], label=lambda g: g.key.strategy) -> str:
    """'a < {b, c} < d' by rank, braces around strategies of one rank (not ordered)."""
    ranked, loose = ranked_groups(groups)
    by_rank: dict[int, list[str]] = {}
    for rank, g in ranked:
        by_rank.setdefault(rank, []).append(label(g))
    text = " < ".join(names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"
                      for _, names in sorted(by_rank.items()))
    if loose:
        text += ("; " if text else "") + "not ordered (fewer than " \
            f"{MIN_PROCESSES} processes): " + ", ".join(label(g) for g in loose)
    return text


def ranking(doc: Doc, groups: Sequence[Group], heading_level: int,
            failed: Sequence[dict] = ()) -> None:
    """Rank strategies per (scenario, transfer) by the median over processes of ms/epoch.

    Ranks come from stats.rank_by_tests: 1 + the number of strategies of the table that are
    significantly faster (Mann-Whitney U, Holm over every pair of the table); strategies with
    too few processes to be tested get no rank at all.
    """
    rep = representative(groups)
    ref = reference_batch(rep)
    batches = present(rep, "batch")
    other_batches = [b for b in batches if b != ref]
    for s in present(rep, "scenario", ("static", "refresh")):
        for t in present(rep, "transfer", ("u8", "f32")):
            cands = [g for g in rep if g.key.scenario == s and g.key.transfer == t
                     and g.key.batch == ref and g.stat("wall_ms") is not None]
            if not cands:
                continue
            best = min(g.median("wall_ms") for g in cands)
            doc.h(heading_level, f"{SCENARIO_NOTE.get(s, s)}, {t} transfer")
            headers = ["rank", "strategy", f"ms/epoch @ batch {ref}", "interval", "n",
                       "stability", "process min-max", "vs best median", "samples/s"]
            headers += [f"ms/epoch @ {b}" for b in other_batches]
            ranked, unranked = ranked_groups(cands)
            ties = {rank: sum(1 for r, _ in ranked if r == rank) for rank, _ in ranked}
            rows = []
            for rank_label, g in ([(str(r) if ties[r] == 1 else f"{r} (tie)", g)
                                   for r, g in ranked]
                                  + [("none", g) for g in unranked]):
                st = g.stat("wall_ms")
                row = [rank_label, g.key.variant_label, fmt_num(st.median),
                       describe_interval(st), _n_cell(g), stability_label(st), _spread(g),
                       f"{st.median / best:.2f}x", fmt_num(g.samples_per_s)]
                for b in other_batches:
                    o = next((x for x in rep if x.key.strategy == g.key.strategy
                              and x.key.scenario == s and x.key.transfer == t
                              and x.key.batch == b), None)
                    row.append(median_with_interval(o.stat("wall_ms"), fmt_num) if o else "n/a")
                rows.append(row)
            doc.table(headers, rows, align="rlrlrlrrr" + "r" * len(other_batches))
            notes = []
            for r in sorted(rank for rank, n in ties.items() if n > 1):
                names = ", ".join(g.key.variant_label for rank, g in ranked if rank == r)
                notes.append(f"Rank {r} (tie): {names}: as many strategies are "
                             "significantly faster than each; listed by median, which is not "
                             "an order.")
            if unranked:
                notes.append("Rank none: " + ", ".join(g.key.variant_label for g in unranked)
                             + f": fewer than {MIN_PROCESSES} processes, not tested, so no "
                               "order is claimed; listed by median only.")
            on = [g.key.variant_label for g in cands if g.timing_profiled]
            if on:
                notes.append("Timing with the CUPTI profiler ON (no run with --no-profile): "
                             + ("every strategy here" if len(on) == len(cands)
                                else ", ".join(on)) + "; its overhead is included.")
            for b in other_batches:
                at_b = [g for g in rep if g.key.scenario == s and g.key.transfer == t
                        and g.key.batch == b and g.stat("wall_ms") is not None]
                if at_b:
                    notes.append(f"Order at batch {b}: {order_text(at_b)}.")
            variants = [g for g in groups if g.key.strategy in PIPELINED_STRATEGIES
                        and g.key.scenario == s and g.key.transfer == t
                        and g.key.batch == ref and g.stat("wall_ms") is not None]
            if len(variants) > 1:
                notes.append(f"double-buffer variants at batch {ref} ({len(variants)} run; "
                             "the table shows depth 2, 1 stream): "
                             + order_text(variants, lambda g: f"d{g.key.depth}c{g.key.streams}"
                                          f" {fmt_num(g.median('wall_ms'))} ms")
                             + ".")
            listed = {g.key.strategy for g in cands}
            lost = sorted({(r.get("config") or {}).get("strategy") for r in failed
                           if (r.get("config") or {}).get("scenario") == s
                           and (r.get("config") or {}).get("transfer") == t
                           and (r.get("config") or {}).get("batch") == ref} - listed - {None})
            if lost:
                notes.append("Not ranked, every run failed: " + ", ".join(lost)
                             + " (see Failed runs).")
            doc.ul(notes)


def null_notes(groups: Sequence[Group], pinned_bw: LinkRates | float | None = None) -> list[str]:
    notes = []
    for metric, text in NULL_METRICS.items():
        null = [g for g in groups if g.median(metric) is None]
        if not null:
            continue
        if len(null) == len(groups):
            notes.append(f"{text}: null in every record; not shown.")
            continue
        names = sorted({g.key.strategy for g in null},
                       key=lambda n: strategies_in(groups).index(n))
        scen = sorted({g.key.scenario for g in null})
        notes.append(f"{text}: null for {', '.join(names)} ({'/'.join(scen)}); shown as "
                     "n/a, never as 0.")
    no_api = sorted({g.key.strategy for g in groups
                     if all(v is None for v in g.malloc_per_epoch)})
    if no_api:
        notes.append("api_calls: null (no profiled run, or run with --no-profile) for "
                     + ", ".join(no_api) + ".")
    reasons: dict[str, set[str]] = {}
    for key, f in floors(groups, pinned_bw).items():
        for why in f.reasons:
            reasons.setdefault(why, set()).add(key.strategy)
    for why, names in reasons.items():
        if why.startswith("no measured pinned"):
            notes.append("Transfer floor and floor: not drawn, " + why + " (pass "
                         "`--primitives FILE` with a pinned-h2d record of `memstrat "
                         "primitives`, or `--pinned-bandwidth GB/s`, the measured pinned bulk "
                         "host-to-device bandwidth); the compute floor is drawn where it "
                         "exists.")
        else:
            notes.append(f"Floors: {why}, for {', '.join(sorted(names))}.")
    points = overlap_efficiency(groups)
    for why in sorted({p.reason for p in points if p.reason}):
        missing = [p.group for p in points if p.reason == why]
        notes.append(f"Overlap efficiency: n/a for {len(missing)} configuration"
                     f"{'s' if len(missing) != 1 else ''} of "
                     + ", ".join(strategies_in(missing)) + f": {why}.")
    return notes


def statistics_notes(groups: Sequence[Group]) -> list[str]:
    """How many processes stand behind the numbers, and what that allows."""
    n = sorted({g.n_processes for g in groups})
    few = [g for g in groups if g.n_processes < MIN_PROCESSES]
    notes = [f"Processes per configuration: {n[0]}" + (f"-{n[-1]}" if len(n) > 1 else "")
             + "."]
    if len(few) == len(groups):
        notes.append(f"**Every configuration has fewer than {MIN_PROCESSES} processes "
                     f"(n={'/'.join(map(str, n))}, no interval):** no interval can be "
                     "given, so nothing below is ranked or called stable; medians are "
                     "listed for reference only. Run the matrix with `repeats >= 10` for "
                     "95% intervals and tests that can order strategies.")
    elif few:
        notes.append(f"{len(few)} of {len(groups)} configurations "
                     f"{'has' if len(few) == 1 else 'have'} fewer than {MIN_PROCESSES} "
                     "processes: 'n=..., no interval' in the tables, and no rank.")
    below = [g for g in groups if g.stat("wall_ms") and g.stat("wall_ms").ci is not None
             and not g.stat("wall_ms").ci.meets_target]
    if below:
        notes.append(f"{len(below)} of {len(groups)} configurations have 3-5 processes: their "
                     "interval is the range of the process values, whose coverage of the "
                     "median (75% to 93.75%) is printed beside it; stability is not assessed "
                     "for them, and 5 processes or fewer can never be ordered after Holm's "
                     "correction over more than a few pairs.")
    unstable = [g for g in groups if g.stat("wall_ms") and g.stat("wall_ms").unstable]
    if unstable:
        notes.append(f"{len(unstable)} configuration{'s are' if len(unstable) != 1 else ' is'}"
                     f" UNSTABLE (95% interval half-width > {UNSTABLE_HALF_WIDTH:.0%} of the "
                     "median): " + ", ".join(sorted({f"{g.key.variant_label} "
                                                     f"{g.key.scenario}/{g.key.transfer}/"
                                                     f"b{g.key.batch}" for g in unstable}))
                     + ".")
    on = [g for g in groups if g.timing_profiled]
    counters = ("; counters (API calls, unified-memory bytes and faults) come from the "
                "profiled runs.")
    if len(on) == len(groups):
        notes.append("**Timing comes from runs with the CUPTI profiler ON** in every "
                     "configuration (there is no run with --no-profile): its overhead is in "
                     "every number" + counters)
    elif on:
        notes.append(f"Timing comes from runs with the CUPTI profiler off, except for "
                     f"{len(on)} configuration{'s' if len(on) != 1 else ''} with only "
                     "profiled runs (tables say 'profiler on')" + counters)
    else:
        notes.append("Timing comes from runs with the CUPTI profiler off in every "
                     "configuration" + counters)
    return notes


def build_report(inputs: Sequence[str | Path], out: str | Path, title: str | None = None,
                 batch: int | None = None, pinned_bw: float | None = None,
                 primitives: Sequence[str | Path] = ()) -> dict[str, Any]:
    """Load, aggregate, plot and write the report; returns what was written.

    pinned_bw: measured pinned bulk host-to-device bandwidth in bytes/s, for the transfer
    floor; None takes the pinned-h2d peak of `primitives`, and without those leaves the
    transfer floor out (the report says so). primitives: `memstrat primitives` record files;
    given, the report has the Transfer primitives and Cost model sections.
    """
    out = Path(out)
    files = resolve_inputs(inputs)
    notes: list[str] = []        # what reading skipped: torn last lines, duplicate records
    records = load_records(files, notes)
    ok = ok_records(records)
    failed = failed_records(records)
    if not ok:
        raise RecordError(", ".join(map(str, files)),
                          f"no record with status ok ({len(failed)} failed); nothing to "
                          "report")
    groups = aggregate(ok)
    tables = PrimitiveTable.load_all(primitives) if primitives else {}
    bandwidth_note = (f"B = {pinned_bw / 1e9:.1f} GB/s, given with --pinned-bandwidth"
                      if pinned_bw is not None else "")
    if pinned_bw is None and tables:
        pinned_bw, bandwidth_note = pinned_bandwidth(tables, groups)
    sm_bw = sm_mapped_rate(tables, groups) if tables else None
    if sm_bw is not None:
        bandwidth_note += (f"; S = {sm_bw / 1e9:.1f} GB/s, the sm-copy-mapped peak, for the "
                           "strategies whose SMs read mapped host memory")
    rates = LinkRates(pinned_bw, sm_bw)
    out.mkdir(parents=True, exist_ok=True)
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    # Every figure (per configuration set, then the stream section's) is drawn by worker
    # processes while this one writes the tables (analysis/figure_pool.py).
    main = [g for g in groups if not is_stream(g)]     # the stream scenario: its own section
    parts = slices(main)
    options = {"batch": batch, "pinned_bw": rates}
    jobs, drawn = [], {}
    for si, part in enumerate(parts):
        suffix = "" if len(parts) == 1 else f"_{si + 1}"
        for name, (fn, _) in PLOTS.items():
            params = inspect.signature(fn).parameters
            kwargs = {k: v for k, v in options.items() if v is not None and k in params}
            drawn[(si, name)] = len(jobs)
            jobs.append((fn, (part, plots_dir / f"{name}{suffix}.png"), kwargs))
    stream_jobs = stream_figure_jobs(groups, plots_dir)
    figures = figure_pool.start(jobs + stream_jobs)
    csv_path = write_csv(groups, out / "summary.csv", rates)

    title = title or f"memstrat results: {', '.join(Path(f).parent.name or str(f) for f in files[:1])}"
    doc = Doc()
    doc.h(1, title)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc.p(f"Generated {now} from {len(records)} run records ({len(ok)} ok, {len(failed)} "
          f"failed) in {', '.join(f'`{f}`' for f in files)}; {len(groups)} configurations. "
          "Per-configuration numbers are in `summary.csv` (empty cell = null/unavailable).")
    if notes:
        doc.p("Reading the records: " + "; ".join(notes) + ".")

    doc.h(2, "Environment")
    environment_section(doc, records, [r for g in groups for r in g.timing_records])

    doc.h(2, "How to read the numbers")
    doc.ul([
        "**ms/epoch** is wall-clock time of one training epoch (host clock, includes the "
        "host-side data rewrite in `refresh`). Epoch 1 is warm-up and reported separately. "
        "Each process (one `memstrat train` run) gives one value, the median of its epochs "
        "2..N; a configuration's number is the **median over its processes**.",
        "**interval**: the distribution-free interval of that median from the order "
        "statistics of the process values; its coverage is exact (binomial) and at least 95% "
        "from 6 processes on (97.85% at 10); with 3-5 processes it is the range of the "
        "values and its lower coverage (75%-93.75%) is printed beside it; below "
        f"{MIN_PROCESSES} processes the table says 'n=..., no interval'. **n** counts the "
        "processes and says whether the CUPTI profiler was on in them. A configuration is "
        "**UNSTABLE** when an interval of at least 95% coverage is wider than "
        f"±{UNSTABLE_HALF_WIDTH:.0%} of the median (not assessed below 6 processes).",
        "**Ranks** come from tests, never from comparing intervals: two-sided Mann-Whitney U "
        "over processes for every pair of strategies in a table, Holm-corrected over the "
        "table's pairs (family-wise error 5%); a strategy's rank is 1 + the number of "
        "strategies significantly faster, so equal ranks, marked '(tie)', are not ordered; a "
        "strategy with too few processes to test gets rank 'none'.",
        "**static**: the training data never changes, so unified memory migrates once and "
        "then stays on the GPU. **refresh**: the host rewrites the data every epoch "
        "(augmentation), so every strategy must move every byte every epoch.",
        "**u8** moves raw pixels and normalises on the GPU; **f32** moves pre-normalised "
        "floats (4x the bytes).",
        "Rankings use the batch size shown in the table header; double-buffer is ranked at "
        "its default settings (depth 2, one copy stream).",
        "Floors and overlap efficiency are defined in docs/methodology.md.",
    ])
    doc.h(2, "Statistics behind the numbers")
    doc.ul(statistics_notes(groups))
    spread_rows = spread.table_rows(groups)
    if spread_rows:
        doc.h(3, "Where the spread of the unstable configurations lies")
        doc.p("Each process times many steady epochs, so its own epochs say whether the spread "
              "is between processes (each steady, at different levels) or inside them (a "
              "process changes level during its run). " + spread.RULE + " Within-process IQR: "
              "the median over processes of the interquartile range of its steady epochs, as a "
              "share of its median. " + spread.PARTS_NOTE)
        doc.table(spread.HEADERS, spread_rows)
    drifts = drift.measure(groups)
    if drifts:
        doc.h(3, "Machines, and drift over a machine's busy time")
        doc.p(drift.summary(drifts) + " " + drift.RULE)
        doc.table(*drift.table(drifts))

    written: dict[str, list[Path]] = {name: [] for name in PLOTS}
    rankings = []
    for si, part in enumerate(parts):      # the tables first, while the figures are drawn
        rdoc = Doc()
        ranking(rdoc, part, (3 if len(parts) > 1 else 2) + 1, failed)
        rankings.append(rdoc)
    pngs = figures.results()
    stream_pngs = pngs[len(jobs):]
    for si, part in enumerate(parts):
        level = 2
        if len(parts) > 1:
            doc.h(2, f"Configuration set {si + 1}: {context(part)}")
            level = 3
        doc.h(level, "Ranking by median ms/epoch over processes (lower is better)")
        doc.extend(rankings[si])
        doc.h(level, "Figures")
        missing = []
        for name, (fn, heading) in PLOTS.items():
            png = pngs[drawn[(si, name)]]
            if png is None:
                missing.append(heading)
                continue
            written[name].append(png)
            doc.h(level + 1, heading)
            doc.img(png, f"plots/{png.name}", heading, CAPTIONS[name] + also_as(png))
        if missing:
            doc.p("Not drawn for lack of data (no such runs, or the counters were null): "
                  + "; ".join(missing) + ".")

    written["stream"] = stream_section(doc, groups, plots_dir, pngs=stream_pngs)

    model_csv = None
    if tables:
        written["primitives"] = primitives_section(doc, tables, plots_dir, bandwidth_note)
        comparisons = cost_model.compare(main, tables)
        model_csv = cost_model.write_csv(comparisons, out / "cost_model.csv")
        parity = cost_model_section(doc, comparisons, plots_dir)
        written["cost_model_parity"] = [parity] if parity else []

    if main:
        doc.h(2, "Null and unavailable values")
        doc.ul(null_notes(main, rates) or ["None: every counter was recorded for every run."])

    if failed:
        doc.h(2, f"Failed runs ({len(failed)})")
        doc.p("Failed runs are kept in the records file and left out of every number "
              "above; the matrix runner retries them on its next run.")
        rows = []
        for r in failed:
            c = r.get("config") or {}
            rows.append([c.get("strategy"), c.get("scenario"), c.get("transfer"),
                         c.get("batch"), r.get("error") or "n/a", r.get("_source")])
        doc.table(["strategy", "scenario", "transfer", "batch", "error", "record"], rows)

    doc.h(2, "All configurations")
    doc.p("Timing columns: median over processes (n says how many, and whether the profiler "
          "was on in them); counters come from the profiled runs ('profiled runs').")
    fl = floors(groups, rates)
    eff = {p.group.key: p.efficiency for p in overlap_efficiency(groups)}
    rows = []
    for g in groups:
        k = g.key
        st = g.stat("wall_ms")
        rows.append([k.variant_label, k.scenario, k.transfer, k.batch, _n_cell(g),
                     len(g.counter_records), fmt_num(st.median) if st else "n/a",
                     describe_interval(st), stability_label(st),
                     fmt_num(g.epoch1["wall_ms"]), fmt_num(g.median("gpu_ms")),
                     fmt_num(g.median("copy_ms")), fmt_num(g.median("compute_ms")),
                     fmt_num(g.median("stall_ms")), fmt_num(fl[k].compute_ms),
                     fmt_num(fl[k].floor_ms), fmt_num(eff.get(k)),
                     fmt_num(g.samples_per_s), fmt_num(g.test_acc)])
    doc.table(["strategy", "scenario", "transfer", "batch", "n", "profiled runs",
               "ms/epoch", "interval", "stability", "epoch 1 ms", "GPU ms", "copy ms",
               "compute ms", "stall ms", "compute floor ms", "floor ms",
               "overlap eff.", "samples/s", "test acc"], rows,
              align="llllrrrllrrrrrrrrrr")

    md_path = out / "report.md"
    md_path.write_text(doc.markdown(), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(doc.html(title), encoding="utf-8")
    return {"markdown": md_path, "html": html_path, "csv": csv_path, "cost_model_csv": model_csv,
            "plots": [p for ps in written.values() for p in ps],
            "groups": groups, "records": records}


def out_folder_problem(out: Path) -> str | None:
    """Why the report cannot be written into `out` (checked before any work), or None."""
    if out.exists() and not out.is_dir():
        return "exists and is not a folder"
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created or written ({parent} is not a writable folder)"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="report.py",
        description="Turn memstrat run records into summary.csv, plots and a report "
                    "(Markdown + self-contained HTML).",
        epilog="Example: analysis/report.py results/quick --out reports/quick")
    ap.add_argument("inputs", nargs="+",
                    help="results folders (their records.jsonl) and/or .jsonl files")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--title", help="report title")
    ap.add_argument("--batch", type=int,
                    help="batch size for single-batch figures (default: 256 if present)")
    ap.add_argument("--primitives", action="append", default=[], metavar="FILE",
                    help="records of `memstrat primitives --json` (repeat for more files): "
                         "adds the Transfer primitives and Cost model sections and "
                         "cost_model.csv, and gives the floors the pinned-h2d peak bandwidth")
    ap.add_argument("--pinned-bandwidth", type=float, metavar="GB/s",
                    help="measured pinned bulk host-to-device bandwidth in GB/s (1e9 B/s) for "
                         "the transfer floor; overrides the pinned-h2d peak of --primitives "
                         "(without either the transfer floor is not drawn, and the report "
                         "says so)")
    args = ap.parse_args(argv)
    if args.pinned_bandwidth is not None and args.pinned_bandwidth <= 0:
        ap.error("--pinned-bandwidth must be a positive number of GB/s")
    problem = out_folder_problem(Path(args.out))
    if problem:
        print(f"error: --out {args.out}: {problem}", file=sys.stderr)
        return 2
    try:
        res = build_report(args.inputs, args.out, args.title, args.batch,
                           None if args.pinned_bandwidth is None
                           else args.pinned_bandwidth * 1e9, args.primitives)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = e.filename or args.out
        print(f"error: cannot write {where}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {res['markdown']}, {res['html']}, {res['csv']}"
          + (f", {res['cost_model_csv']}" if res["cost_model_csv"] else "") + " and "
          f"{len(res['plots'])} plots in {Path(args.out) / 'plots'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
