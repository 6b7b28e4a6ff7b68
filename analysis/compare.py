#!/usr/bin/env python3
"""Guard against timing regressions: compare two sets of memstrat run records.

    analysis/compare.py BASE NEW [--threshold 0.10] [--metric wall_ms] [--json FILE]

BASE and NEW are records files, results folders (their records.jsonl) or results sets (the
run records under records/; transfer-primitive records are not compared). Records are
aggregated as for the report (analysis/aggregate.py: per process the median of its steady
epochs, per configuration the median over processes with a bootstrap 95% interval; timing
from the runs with the profiler off where there are any). For every configuration present
in both sets it prints both medians with their intervals and the ratio NEW/BASE of the
medians with a 95% interval obtained by bootstrapping the ratio (each set's processes
resampled on their own, 10,000 seeded resamples; analysis/stats.bootstrap_ratio_ci).

A configuration is a REGRESSION when NEW's median is more than the threshold slower
(ratio > 1 + threshold) AND the two configurations' intervals do not overlap (NEW's low
end above BASE's high end): the same rule by which the report refuses to order
overlapping intervals. A configuration with fewer than 3 processes on either side has no
interval and is listed as not judged, never flagged. Configurations in only one set are
listed and not compared.

GPUs (env.gpu_name): a configuration is keyed by its GPU too. When BASE and NEW ran on the same
GPUs, configurations are matched on the same GPU only; when each ran on one GPU and they differ
(a new machine against the published set), they are matched on everything but the GPU name and
a note says so. Any other mix (e.g. BASE on one GPU, NEW on that GPU and another) is refused
with exit 2, since some of NEW's runs would be matched against another GPU's or not compared
at all: split the records by GPU first.

Records read twice (the same run_id) count once; a torn last line of a records file is skipped
with a warning (analysis/records.py).

Exit status: 0 no regression, 1 at least one regression, 2 usage error (a missing, unreadable
or invalid input, sets that mix GPUs, no configuration in common, an output file that cannot
be written).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.aggregate import Group, GroupKey, aggregate, sort_key  # noqa: E402
from analysis.records import RecordError, load_records, ok_records  # noqa: E402
from analysis.stats import (Interval, Summary, bootstrap_ratio_ci,  # noqa: E402
                            describe_interval)

DEFAULT_THRESHOLD = 0.10
METRICS = ("wall_ms", "gpu_ms", "compute_ms", "stall_ms", "copy_ms", "host_ms")
REGRESSION = "REGRESSION"


class UsageError(Exception):
    """Input that cannot be compared; main() exits 2 with this message."""


@dataclasses.dataclass
class Comparison:
    label: str
    base: Summary
    new: Summary
    ratio: float
    ratio_ci: Interval | None
    verdict: str

    @property
    def regression(self) -> bool:
        return self.verdict == REGRESSION


def match_key(key: GroupKey) -> GroupKey:
    """The configuration without the GPU name."""
    return dataclasses.replace(key, gpu="")


def gpus(groups: Sequence[Group]) -> set[str]:
    return {g.key.gpu for g in groups}


def matcher(base_groups: Sequence[Group], new_groups: Sequence[Group]
            ) -> Callable[[GroupKey], GroupKey]:
    """How configurations of BASE and NEW are paired: on the same GPU when both sets ran on the
    same GPUs, across GPUs when each ran on one; UsageError for any other mix."""
    base, new = gpus(base_groups), gpus(new_groups)
    if len(base) == 1 and len(new) == 1:
        return match_key            # one GPU each: the name is no part of the label
    if base == new:
        return lambda key: key      # labels then start with the GPU's name
    raise UsageError(f"BASE ran on {_gpu_list(base)} and NEW on {_gpu_list(new)}: sets that mix "
                     "GPUs are compared only when both hold the same GPUs (each "
                     "configuration then against itself on its GPU); split the records by "
                     "env.gpu_name and compare one GPU at a time")


def _gpu_list(names: set[str]) -> str:
    return ", ".join(sorted(names)) if len(names) == 1 else \
        f"{len(names)} GPUs ({', '.join(sorted(names))})"


def label(key: GroupKey, varying: Sequence[str]) -> str:
    text = (f"{key.gpu + ': ' if key.gpu else ''}{key.variant_label} "
            f"{key.scenario}/{key.transfer}/b{key.batch}"
            f"/h{key.hidden_label}/{key.gemm}/e{key.epochs}")
    other = dict(key.other)
    extra = [f"{k}={other.get(k)}" for k in varying]
    return text + (f" [{', '.join(extra)}]" if extra else "")


def verdict(base: Summary, new: Summary, ratio: float, threshold: float) -> str:
    if base.ci is None or new.ci is None:
        return f"not judged: n={base.n}/{new.n}, no interval"
    if base.ci.overlaps(new.ci):
        return "indistinguishable (intervals overlap)"
    slower = new.ci.low > base.ci.high
    if slower and ratio > 1.0 + threshold:
        return REGRESSION
    if not slower and ratio < 1.0 - threshold:
        return "faster"
    return ("slower" if slower else "faster") + f", within {threshold:.0%}"


def check_output_file(path: str) -> None:
    """UsageError unless `path` can be written: its folder exists and it is not a folder."""
    p = Path(path)
    folder = p.parent
    if p.is_dir():
        raise UsageError(f"--json {path}: is a folder; give a file name")
    if not folder.is_dir():
        raise UsageError(f"--json {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"--json {path}: not writable")


def _load(path: str) -> list[Group]:
    if not Path(path).exists():
        raise UsageError(f"{path}: no such file or folder")
    try:
        ok = ok_records(load_records(path))
    except RecordError as e:
        raise UsageError(str(e)) from None
    if not ok:
        raise UsageError(f"{path}: no record with status ok")
    return aggregate(ok)


def compare(base_groups: Sequence[Group], new_groups: Sequence[Group], metric: str,
            threshold: float) -> tuple[list[Comparison], list[str], list[str]]:
    """(comparisons of the common configurations, labels only in BASE, only in NEW);
    UsageError when the sets mix GPUs in a way that cannot be paired (see matcher)."""
    key_of = matcher(base_groups, new_groups)
    base = {key_of(g.key): g for g in base_groups}
    new = {key_of(g.key): g for g in new_groups}
    keys = set(base) | set(new)
    names = {k for key in keys for k, _ in key.other}
    varying = sorted(n for n in names
                     if len({key.option(n) for key in keys}) > 1)
    rows = []
    for k in sorted(set(base) & set(new), key=sort_key):
        b, n = base[k].stat(metric), new[k].stat(metric)
        if b is None or n is None or b.median == 0:
            continue
        ratio = n.median / b.median
        ci = bootstrap_ratio_ci(base[k].process_values(metric), new[k].process_values(metric))
        rows.append(Comparison(label(k, varying), b, n, ratio, ci,
                               verdict(b, n, ratio, threshold)))
    only_base = [label(k, varying) for k in sorted(set(base) - set(new), key=sort_key)]
    only_new = [label(k, varying) for k in sorted(set(new) - set(base), key=sort_key)]
    return rows, only_base, only_new


def _fmt(s: Summary) -> str:
    if s.ci is None:
        return f"{s.median:.4g} ({describe_interval(s)})"
    return f"{s.median:.4g} {describe_interval(s)} n={s.n}"


def _ratio_text(c: Comparison) -> str:
    ci = (f" [{c.ratio_ci.low:.3f}, {c.ratio_ci.high:.3f}]" if c.ratio_ci
          else " (no interval)")
    return f"{c.ratio:.3f}{ci}"


def table(rows: Sequence[Comparison], metric: str) -> str:
    headers = ("configuration", f"BASE {metric}", f"NEW {metric}", "NEW/BASE [95% CI]",
               "verdict")
    cells = [(c.label, _fmt(c.base), _fmt(c.new), _ratio_text(c), c.verdict) for c in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])]
                     + [line(r) for r in cells])


def _summary_json(s: Summary) -> dict[str, Any]:
    return {"median": s.median, "ci_low": s.ci.low if s.ci else None,
            "ci_high": s.ci.high if s.ci else None, "n_processes": s.n,
            "unstable": s.unstable}


def as_json(rows: Sequence[Comparison], only_base: Sequence[str], only_new: Sequence[str],
            metric: str, threshold: float) -> dict[str, Any]:
    return {
        "metric": metric, "threshold": threshold,
        "ratio_interval": "bootstrap of median(NEW)/median(BASE), 95%, 10,000 resamples",
        "regressions": sum(c.regression for c in rows),
        "configurations": [
            {"configuration": c.label, "base": _summary_json(c.base),
             "new": _summary_json(c.new), "ratio": c.ratio,
             "ratio_ci_low": c.ratio_ci.low if c.ratio_ci else None,
             "ratio_ci_high": c.ratio_ci.high if c.ratio_ci else None,
             "verdict": c.verdict} for c in rows],
        "only_in_base": list(only_base), "only_in_new": list(only_new),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="compare.py",
        description="Compare the timing of two sets of memstrat records, configuration by "
                    "configuration; exit 1 when NEW is slower than BASE by more than the "
                    "threshold with non-overlapping 95% intervals.",
        epilog="GPUs: sets holding the same GPUs are compared GPU by GPU, one GPU against "
               "another with a note; any other mix (e.g. NEW adds a GPU) is refused with exit "
               "2: split the records by env.gpu_name. Exit status: 0 no regression, 1 "
               "regression, 2 usage error. Example: "
               "analysis/compare.py docs/results/nvidia-h200 results/matrix")
    ap.add_argument("base", metavar="BASE", help="records file, results folder or results set")
    ap.add_argument("new", metavar="NEW", help="records file, results folder or results set")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                    help="relative slowdown that counts as a regression (default: "
                         "%(default)s = 10%%)")
    ap.add_argument("--metric", default="wall_ms", choices=METRICS,
                    help="per-epoch timing to compare (default: %(default)s)")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the comparison as JSON to FILE ('-': stdout, instead "
                         "of the table)")
    args = ap.parse_args(argv)
    if args.threshold < 0:
        ap.error("--threshold must be >= 0")
    try:
        if args.json and args.json != "-":
            check_output_file(args.json)
        base_groups, new_groups = _load(args.base), _load(args.new)
        rows, only_base, only_new = compare(base_groups, new_groups, args.metric,
                                            args.threshold)
        if not rows:
            raise UsageError(f"no configuration with {args.metric} in both {args.base} and "
                             f"{args.new} ({len(only_base)} only in BASE, {len(only_new)} "
                             "only in NEW)")
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    regressions = [c for c in rows if c.regression]
    doc = as_json(rows, only_base, only_new, args.metric, args.threshold)
    if args.json and args.json != "-":
        try:
            Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        except OSError as e:
            print(f"error: --json {args.json}: cannot write: {e.strerror or e}", file=sys.stderr)
            return 2
    if args.json == "-":
        print(json.dumps(doc, indent=2))
    else:
        on = (gpus(base_groups), gpus(new_groups))
        if on[0] != on[1]:
            print(f"note: BASE ran on {', '.join(sorted(on[0]))}, NEW on "
                  f"{', '.join(sorted(on[1]))}")
        print(table(rows, args.metric))
        for name, only in (("BASE", only_base), ("NEW", only_new)):
            if only:
                print(f"\nonly in {name} (not compared): " + "; ".join(only))
        unjudged = sum(c.verdict.startswith("not judged") for c in rows)
        print(f"\n{len(rows)} configuration{'s' if len(rows) != 1 else ''} compared: "
              f"{len(regressions)} regression"
              f"{'s' if len(regressions) != 1 else ''} (slower by more than "
              f"{args.threshold:.0%} with non-overlapping 95% intervals)"
              + (f", {unjudged} not judged (fewer than 3 processes)" if unjudged else "")
              + ".")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
