#!/usr/bin/env python3
"""Build the memstrat report from run records.

    analysis/report.py results/quick --out reports/quick
    analysis/report.py a.jsonl b.jsonl --out reports/combined

Inputs are results folders (their records.jsonl) and/or JSON Lines files. Writes into
OUT: summary.csv (one row per configuration), plots/*.png, report.md (figures linked)
and report.html (one self-contained page, figures embedded). The report states the
environment the runs came from, ranks the strategies per scenario and transfer by
median ms per epoch, lists failed runs, and says which values were null/unavailable.
"""
from __future__ import annotations

import argparse
import base64
import datetime as _dt
import html
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.aggregate import (Group, aggregate, overlap_efficiency, present,  # noqa: E402
                                reference_batch, representative, slices,
                                strategies_in, write_csv)
from analysis.plots import PLOTS, SCENARIO_NOTE, context  # noqa: E402
from analysis.records import (RecordError, failed_records, load_records,  # noqa: E402
                              ok_records, resolve_inputs)

CAPTIONS = {
    "ms_per_epoch": "Wall-clock time per epoch, median of the steady-state epochs (2..N) "
                    "pooled over repeats; whiskers span the fastest to slowest steady "
                    "epoch. double-buffer is shown at its default depth 2 with one copy "
                    "stream.",
    "throughput_vs_batch": "Training samples per second at the median epoch time; the "
                           "band spans the p25-p75 epoch times.",
    "epoch_breakdown": "Steady-state medians per epoch. Stacked: compute-stream busy time, "
                       "stall (compute waiting for data) and host-side data preparation "
                       "(refresh rewrite); black tick: wall clock. Hatched: GPU time of "
                       "the strategy's own copies/prefetches; it runs on copy engines and "
                       "may overlap compute, so it is not stacked.",
    "epoch1_vs_steady": "Epoch 1 includes first-touch page faults, CUDA-graph capture and "
                        "library warm-up; steady state is the median of epochs 2..N.",
    "malloc_per_epoch": "cudaMalloc calls counted by CUPTI: in set-up (before epoch 1) and "
                        "in every epoch. A correct strategy allocates nothing after "
                        "set-up, so every epoch column should read 0.",
    "um_counters": "CUPTI unified-memory counters: GPU page faults and bytes migrated "
                   "host-to-device and device-to-host, epoch 1 vs steady state. Strategies "
                   "that do not use managed memory report null (n/a).",
    "overlap_efficiency": "max(copy-only, compute-only) / GPU ms of each double-buffer "
                          "run. copy-only = the run's own copy GPU time; compute-only = "
                          "the GPU ms of the resident run with the same scenario, transfer, "
                          "batch, hidden and GEMM (the compute floor). 1.0 = the shorter "
                          "of copy and compute is completely hidden.",
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
# Document model: a list of blocks rendered to Markdown and to HTML
# --------------------------------------------------------------------------------------
class Doc:
    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: Sequence[str]) -> None:
        if items:
            self.blocks.append(("ul", list(items)))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]],
              align: str = "") -> None:
        self.blocks.append(("table", list(headers), [list(map(_cell, r)) for r in rows],
                            align))

    def img(self, path: Path, rel: str, alt: str, caption: str) -> None:
        self.blocks.append(("img", path, rel, alt, caption))

    # -- Markdown
    def markdown(self) -> str:
        out: list[str] = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append("#" * b[1] + " " + b[2])
            elif kind == "p":
                out.append(b[1])
            elif kind == "ul":
                out.append("\n".join(f"- {i}" for i in b[1]))
            elif kind == "table":
                headers, rows, align = b[1], b[2], b[3]
                esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
                out.append("| " + " | ".join(esc(h) for h in headers) + " |")
                out.append("|" + "|".join(("---:" if (align and i < len(align) and
                                                      align[i] == "r") else "---")
                                          for i in range(len(headers))) + "|")
                out.extend("| " + " | ".join(esc(c) for c in r) + " |" for r in rows)
            elif kind == "img":
                out.append(f"![{b[3]}]({b[2]})\n\n*{b[4]}*")
            out.append("")
        return "\n".join(out)

    # -- HTML (self-contained)
    def html(self, title: str) -> str:
        body: list[str] = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                body.append(f"<h{b[1]}>{_inline(b[2])}</h{b[1]}>")
            elif kind == "p":
                body.append(f"<p>{_inline(b[1])}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1])
                            + "</ul>")
            elif kind == "table":
                headers, rows, align = b[1], b[2], b[3]
                cls = lambda i: (' class="r"' if align and i < len(align)  # noqa: E731
                                 and align[i] == "r" else "")
                head = "".join(f"<th{cls(i)}>{_inline(h)}</th>" for i, h in enumerate(headers))
                trs = "".join("<tr>" + "".join(f"<td{cls(i)}>{_inline(str(c))}</td>"
                                               for i, c in enumerate(r)) + "</tr>"
                              for r in rows)
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody>"
                            "</table>")
            elif kind == "img":
                data = base64.b64encode(Path(b[1]).read_bytes()).decode("ascii")
                body.append(f'<figure><img alt="{html.escape(b[3])}" '
                            f'src="data:image/png;base64,{data}">'
                            f"<figcaption>{_inline(b[4])}</figcaption></figure>")
        style = (
            "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;"
            "max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}"
            "table{border-collapse:collapse;margin:0.6em 0 1.2em}"
            "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:0.92em}"
            "th{background:#f0f0f0}td.r,th.r{text-align:right}"
            "figure{margin:1em 0 2em}img{max-width:100%;border:1px solid #ddd}"
            "figcaption{font-size:0.9em;color:#444;margin-top:0.3em}"
            "code{background:#f4f4f4;padding:0 3px}h2{border-bottom:1px solid #ddd}")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(title)}</title><style>{style}</style></head><body>\n"
                + "\n".join(body) + "\n</body></html>\n")


def _inline(text: str) -> str:
    """Escape for HTML; `code` and **bold** spans become tags."""
    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)


def _cell(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return _num(v)
    return str(v)


def _num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    return f"{v:.{digits}g}" if a < 1 else f"{v:.2f}"


# --------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------
def environment_rows(records: Sequence[dict]) -> tuple[list[list[str]], list[str]]:
    """Rows for the environment table, and warnings when runs came from different set-ups."""
    envs = [r.get("env") or {} for r in records if r.get("env")]

    def values(fmt) -> list[str]:
        seen: list[str] = []
        for e in envs:
            v = fmt(e)
            if v is not None and v not in seen:
                seen.append(v)
        return seen

    def gpu(e):
        if not e.get("gpu_name"):
            return None
        extra = []
        if e.get("compute_capability"):
            extra.append(f"cc {e['compute_capability']}")
        if e.get("sm_count"):
            extra.append(f"{e['sm_count']} SMs")
        if e.get("gpu_memory_bytes"):
            extra.append(f"{e['gpu_memory_bytes'] / 2**30:.1f} GiB")
        return e["gpu_name"] + (f" ({', '.join(extra)})" if extra else "")

    def pcie(e):
        g, w = e.get("pcie_gen"), e.get("pcie_width")
        if g is None and w is None:
            return None
        return f"gen {g if g is not None else '?'} x{w if w is not None else '?'}"

    def git(e):
        if not e.get("git_sha"):
            return None
        return e["git_sha"] + (" (uncommitted changes)" if e.get("git_dirty") else "")

    def um(e):
        if "concurrent_managed_access" not in e:
            return None
        return (f"concurrentManagedAccess={int(bool(e['concurrent_managed_access']))}, "
                f"pageableMemoryAccess={int(bool(e.get('pageable_memory_access')))}")

    spec = [
        ("GPU", gpu),
        ("Driver / runtime", lambda e: (f"{e.get('driver_version') or 'n/a'} / "
                                        f"{e.get('runtime_version') or 'n/a'}")
         if (e.get("driver_version") or e.get("runtime_version")) else None),
        ("PCIe link", pcie),
        ("Copy engines", lambda e: None if e.get("async_engine_count") is None
         else str(e["async_engine_count"])),
        ("Managed memory", um),
        ("Host", lambda e: e.get("host")),
        ("memstrat", lambda e: e.get("memstrat_version")),
        ("git revision", git),
    ]
    rows, warnings = [], []
    for label, fmt in spec:
        vals = values(fmt)
        rows.append([label, ", ".join(vals) if vals else "n/a (not in the records)"])
        if len(vals) > 1 and label in ("GPU", "Driver / runtime", "git revision", "PCIe link"):
            warnings.append(f"The runs come from more than one {label}: {', '.join(vals)}. "
                            "Groups are split by GPU; compare across the others with care.")
    started = sorted(r["started_at"] for r in records if isinstance(r.get("started_at"), str))
    if started:
        rows.append(["Runs started", f"{started[0]} to {started[-1]}" if len(started) > 1
                     else started[0]])
    return rows, warnings


def ranking(doc: Doc, groups: Sequence[Group], heading_level: int,
            failed: Sequence[dict] = ()) -> None:
    """Rank strategies per (scenario, transfer) by median ms/epoch at each batch size."""
    rep = representative(groups)
    ref = reference_batch(rep)
    batches = present(rep, "batch")
    other_batches = [b for b in batches if b != ref]
    for s in present(rep, "scenario", ("static", "refresh")):
        for t in present(rep, "transfer", ("u8", "f32")):
            cands = [g for g in rep if g.key.scenario == s and g.key.transfer == t
                     and g.key.batch == ref and g.median("wall_ms") is not None]
            if not cands:
                continue
            cands.sort(key=lambda g: g.median("wall_ms"))
            best = cands[0].median("wall_ms")
            doc.h(heading_level, f"{SCENARIO_NOTE.get(s, s)}, {t} transfer")
            headers = ["rank", "strategy", f"ms/epoch @ batch {ref}", "p25-p75",
                       "vs best", "samples/s"]
            headers += [f"ms/epoch @ {b}" for b in other_batches]
            rows = []
            for i, g in enumerate(cands, 1):
                st = g.steady["wall_ms"]
                row = [i, g.key.variant_label, _num(st.median), f"{_num(st.p25)}-"
                       f"{_num(st.p75)}", f"{st.median / best:.2f}x",
                       _num(g.samples_per_s)]
                for b in other_batches:
                    o = next((x for x in rep if x.key.strategy == g.key.strategy
                              and x.key.scenario == s and x.key.transfer == t
                              and x.key.batch == b), None)
                    row.append(_num(o.median("wall_ms")) if o else "n/a")
                rows.append(row)
            doc.table(headers, rows, align="rlrrrr" + "r" * len(other_batches))
            notes = []
            for b in other_batches:
                at_b = sorted((g for g in rep if g.key.scenario == s and g.key.transfer == t
                               and g.key.batch == b and g.median("wall_ms") is not None),
                              key=lambda g: g.median("wall_ms"))
                if at_b:
                    notes.append(f"Order at batch {b}: "
                                 + " < ".join(g.key.strategy for g in at_b) + ".")
            variants = [g for g in groups if g.key.depth is not None
                        and g.key.scenario == s and g.key.transfer == t
                        and g.key.batch == ref and g.median("wall_ms") is not None]
            if len(variants) > 1:
                v = min(variants, key=lambda g: g.median("wall_ms"))
                notes.append(f"Fastest double-buffer variant at batch {ref}: depth "
                             f"{v.key.depth}, {v.key.streams} copy "
                             f"stream{'s' if v.key.streams != 1 else ''}, "
                             f"{_num(v.median('wall_ms'))} ms/epoch (of {len(variants)} "
                             "variants run; the table shows depth 2, 1 stream).")
            ranked = {g.key.strategy for g in cands}
            lost = sorted({(r.get("config") or {}).get("strategy") for r in failed
                           if (r.get("config") or {}).get("scenario") == s
                           and (r.get("config") or {}).get("transfer") == t
                           and (r.get("config") or {}).get("batch") == ref} - ranked - {None})
            if lost:
                notes.append("Not ranked, every run failed: " + ", ".join(lost)
                             + " (see Failed runs).")
            doc.ul(notes)


def null_notes(groups: Sequence[Group]) -> list[str]:
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
        notes.append("api_calls: null (run with --no-profile) for " + ", ".join(no_api) + ".")
    pts = overlap_efficiency(groups)
    fb = [p for p in pts if p.compute_source != "resident"]
    if fb:
        notes.append("Overlap efficiency: no matching resident run for "
                     + ", ".join(f"{p.group.key.scenario}/{p.group.key.transfer}/batch "
                                 f"{p.group.key.batch}/depth {p.group.key.depth}" for p in fb)
                     + "; the double-buffer run's own compute_ms was used as compute-only "
                       "time instead (hollow markers).")
    return notes


def build_report(inputs: Sequence[str | Path], out: str | Path, title: str | None = None,
                 batch: int | None = None) -> dict[str, Any]:
    """Load, aggregate, plot and write the report; returns what was written."""
    out = Path(out)
    files = resolve_inputs(inputs)
    records = load_records(files)
    ok = ok_records(records)
    failed = failed_records(records)
    if not ok:
        raise RecordError(", ".join(map(str, files)),
                          f"no record with status ok ({len(failed)} failed); nothing to "
                          "report")
    groups = aggregate(ok)
    out.mkdir(parents=True, exist_ok=True)
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    csv_path = write_csv(groups, out / "summary.csv")

    title = title or f"memstrat results: {', '.join(Path(f).parent.name or str(f) for f in files[:1])}"
    doc = Doc()
    doc.h(1, title)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc.p(f"Generated {now} from {len(records)} run records ({len(ok)} ok, {len(failed)} "
          f"failed) in {', '.join(f'`{f}`' for f in files)}; {len(groups)} configurations. "
          "Per-configuration numbers are in `summary.csv` (empty cell = null/unavailable).")

    doc.h(2, "Environment")
    env_rows, env_warn = environment_rows(records)
    doc.table(["what", "value"], env_rows)
    for w in env_warn:
        doc.p("**Note:** " + w)

    doc.h(2, "How to read the numbers")
    doc.ul([
        "**ms/epoch** is wall-clock time of one training epoch (host clock, includes the "
        "host-side data rewrite in `refresh`). Epoch 1 is warm-up and reported separately; "
        "every other figure is the median of epochs 2..N, pooled over repeats, with the "
        "spread given as p25-p75 (tables) or min-max (bars).",
        "**static**: the training data never changes, so unified memory migrates once and "
        "then stays on the GPU. **refresh**: the host rewrites the data every epoch "
        "(augmentation), so every strategy must move every byte every epoch.",
        "**u8** moves raw pixels and normalises on the GPU; **f32** moves pre-normalised "
        "floats (4x the bytes).",
        "Rankings use the batch size shown in the table header; double-buffer is ranked at "
        "its default settings (depth 2, one copy stream).",
    ])

    written: dict[str, list[Path]] = {name: [] for name in PLOTS}
    parts = slices(groups)
    for si, part in enumerate(parts):
        suffix = "" if len(parts) == 1 else f"_{si + 1}"
        level = 2
        if len(parts) > 1:
            doc.h(2, f"Configuration set {si + 1}: {context(part)}")
            level = 3
        doc.h(level, "Ranking by median ms/epoch (lower is better)")
        ranking(doc, part, level + 1, failed)
        doc.h(level, "Figures")
        missing = []
        for name, (fn, heading) in PLOTS.items():
            kwargs = ({"batch": batch} if batch and "batch" in
                      inspect.signature(fn).parameters else {})
            png = fn(part, plots_dir / f"{name}{suffix}.png", **kwargs)
            if png is None:
                missing.append(heading)
                continue
            written[name].append(png)
            doc.h(level + 1, heading)
            doc.img(png, f"plots/{png.name}", heading, CAPTIONS[name])
        if missing:
            doc.p("Not drawn for lack of data (no such runs, or the counters were null): "
                  + "; ".join(missing) + ".")

    doc.h(2, "Null and unavailable values")
    notes = null_notes(groups)
    doc.ul(notes or ["None: every counter was recorded for every run."])

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
    rows = []
    for g in groups:
        k = g.key
        st = g.steady["wall_ms"]
        rows.append([k.variant_label, k.scenario, k.transfer, k.batch, g.runs,
                     _num(st.median) if st else "n/a",
                     f"{_num(st.p25)}-{_num(st.p75)}" if st else "n/a",
                     _num(g.epoch1["wall_ms"]), _num(g.median("gpu_ms")),
                     _num(g.median("copy_ms")), _num(g.median("compute_ms")),
                     _num(g.median("stall_ms")), _num(g.samples_per_s),
                     _num(g.test_acc)])
    doc.table(["strategy", "scenario", "transfer", "batch", "runs", "ms/epoch",
               "p25-p75", "epoch 1 ms", "GPU ms", "copy ms", "compute ms", "stall ms",
               "samples/s", "test acc"], rows, align="llllrrrrrrrrrr")

    md_path = out / "report.md"
    md_path.write_text(doc.markdown(), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(doc.html(title), encoding="utf-8")
    return {"markdown": md_path, "html": html_path, "csv": csv_path,
            "plots": [p for ps in written.values() for p in ps],
            "groups": groups, "records": records}


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
    args = ap.parse_args(argv)
    try:
        res = build_report(args.inputs, args.out, args.title, args.batch)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {res['markdown']}, {res['html']}, {res['csv']} and "
          f"{len(res['plots'])} plots in {Path(args.out) / 'plots'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
