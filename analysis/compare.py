#!/usr/bin/env python3
"""Guard against timing regressions: compare two sets of memstrat run records.

    analysis/compare.py BASE NEW [--threshold 0.10] [--metric wall_ms] [--any-epochs] [--json FILE]

BASE and NEW are records files, results folders (their records.jsonl) or results sets (the
run records under records/; transfer-primitive records are not compared). Records are
aggregated as for the report (analysis/aggregate.py: per process the median of its steady
epochs, per configuration the median over processes with its order-statistic interval; timing
from the runs with the profiler off where there are any). For every configuration present in
both sets it prints both medians with their intervals and NEW/BASE as the Hodges-Lehmann ratio
(the median of the ratios of every NEW process to every BASE process) with its Moses interval
(analysis/stats.ratio), and the two-sided Mann-Whitney U p-value, Holm-corrected over every
configuration compared (the family).

A configuration is a REGRESSION when NEW/BASE is above 1 + threshold AND the Holm-corrected
test says the two differ: the same test by which the report orders configurations. A
configuration with fewer than 3 processes on either side is listed as not judged, never
flagged. When the process counts leave Holm's correction no way to flag anything (5 processes
against 5 over more than 6 configurations: the smallest attainable p, 2 / C(10, 5), is too
large), the comparison says so and exits 2: a guard that cannot fail has not passed.
Configurations in only one set are listed and not compared.

GPUs (env.gpu_name): a configuration is keyed by its GPU too. When BASE and NEW ran on the same
GPUs, configurations are matched on the same GPU only; when each ran on one GPU and they differ
(a new machine against the published set), they are matched on everything but the GPU name and
a note says so. Any other mix (e.g. BASE on one GPU, NEW on that GPU and another) is refused
with exit 2, since some of NEW's runs would be matched against another GPU's or not compared
at all: split the records by GPU first.

Epochs: configurations of different epoch counts are different experiments unless --any-epochs
pairs them (a new results set against an older one run for fewer epochs a process): a process's
value is the median of its steady epochs 2..N either way, and the output names the counts.

Records read twice (the same run_id) count once; a torn last line of a records file is skipped
with a warning (analysis/records.py).

Exit status: 0 no regression, 1 at least one regression, 2 usage error (a missing, unreadable
or invalid input, sets that mix GPUs, no configuration in common, too few processes to judge
anything, an output file that cannot be written). With no configuration in common it names
the fields in which the two sets share no value (e.g. epochs: BASE 4; NEW 21).
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
from analysis.stats import (ALPHA, Effect, Summary, describe_interval,  # noqa: E402
                            holm, interval_text, min_attainable_p, ratio)

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
    effect: Effect | None     # NEW/BASE: Hodges-Lehmann ratio, Moses interval, Mann-Whitney p
    p_holm: float | None = None
    verdict: str = ""

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
            f"/h{key.hidden_label}/{key.gemm}" + (f"/e{key.epochs}" if key.epochs else ""))
    other = dict(key.other)
    # an option the configuration does not set (None) is left out: a label still differs from
    # every other, which sets it
    extra = [f"{k}={other.get(k)}" for k in varying if other.get(k) is not None]
    return text + (f" [{', '.join(extra)}]" if extra else "")


def verdict(c: Comparison, threshold: float) -> str:
    """What the Holm-corrected test and the ratio say about one configuration."""
    if c.effect is None or c.p_holm is None:
        return f"not judged: n={c.base.n}/{c.new.n}, too few processes"
    if c.p_holm >= ALPHA:
        return f"not significantly different (Holm p={c.p_holm:.2g})"
    slower = c.effect.estimate > 1.0
    if slower and c.effect.estimate > 1.0 + threshold:
        return REGRESSION
    if not slower and c.effect.estimate < 1.0 - threshold:
        return "faster"
    return ("slower" if slower else "faster") + f", within {threshold:.0%}"


def judge(rows: Sequence[Comparison], threshold: float) -> None:
    """Holm over every judged configuration (the family), then each verdict."""
    judged = [c for c in rows if c.effect is not None]
    for c, p in zip(judged, holm([c.effect.p for c in judged])):
        c.p_holm = p
    for c in rows:
        c.verdict = verdict(c, threshold)


def powerless(rows: Sequence[Comparison]) -> str | None:
    """Why no configuration of the family could ever be flagged, or None."""
    judged = [c for c in rows if c.effect is not None]
    if _best_case(judged) < ALPHA:
        return None
    sizes = sorted({(c.effect.n_base, c.effect.n_new) for c in judged})
    return (f"{len(judged)} configurations judged with {', '.join(f'{b}/{n}' for b, n in sizes)} "
            "processes (BASE/NEW): even two sets with no overlap at all could not pass Holm's "
            f"correction at {ALPHA:.0%} over {len(judged)} configurations; run more processes "
            "per configuration (experiments/matrix/matrices/guard.toml runs 7)")


def _best_case(judged: Sequence[Comparison]) -> float:
    """The smallest Holm-adjusted p the family could reach: the most processes, times the
    family size."""
    if not judged:
        return 1.0
    return min(min_attainable_p(c.effect.n_base, c.effect.n_new) for c in judged) * len(judged)


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


def _field_values(key: GroupKey) -> dict[str, Any]:
    """The configuration's fields by name: GroupKey's own, and each of `other` (config options)."""
    fields = {f.name: getattr(key, f.name) for f in dataclasses.fields(key) if f.name != "other"}
    fields.update(dict(key.other))
    return fields


def _shown(values: set) -> str:
    text = sorted(str(v) for v in values)
    return ", ".join(text[:4]) + (f" (+{len(text) - 4} more)" if len(text) > 4 else "")


def disjoint_fields(base: Sequence[GroupKey], new: Sequence[GroupKey]) -> list[str]:
    """Why two sets share no configuration: each field in which no value of BASE's is one of
    NEW's, as 'name: BASE v1, v2; NEW v3' (e.g. the epochs per process of a results set made
    with an older matrix). Fields that some keys lack count as None there."""
    def values(keys: Sequence[GroupKey]) -> dict[str, set]:
        out: dict[str, set] = {}
        for k in keys:
            for name, v in _field_values(k).items():
                out.setdefault(name, set()).add(v)
        return out
    vb, vn = values(base), values(new)
    names = sorted(set(vb) | set(vn))
    for name in names:  # a field one side never has is None on that side
        vb.setdefault(name, {None})
        vn.setdefault(name, {None})
    return [f"{name}: BASE {_shown(vb[name])}; NEW {_shown(vn[name])}"
            for name in names if not vb[name] & vn[name]]


def pairing(base_groups: Sequence[Group], new_groups: Sequence[Group], epochs_apart: bool
            ) -> Callable[[GroupKey], GroupKey]:
    """The key BASE's and NEW's configurations are paired on (matcher); with `epochs_apart`
    (--any-epochs) whatever their epoch counts: a process's value is the median of its steady
    epochs (2..N) whatever N is."""
    key_of = matcher(base_groups, new_groups)
    if not epochs_apart:
        return key_of
    return lambda key: dataclasses.replace(key_of(key), epochs=0)


def compare(base_groups: Sequence[Group], new_groups: Sequence[Group], metric: str,
            threshold: float, epochs_apart: bool = False
            ) -> tuple[list[Comparison], list[str], list[str]]:
    """(comparisons of the common configurations, labels only in BASE, only in NEW);
    UsageError when the sets mix GPUs in a way that cannot be paired (see matcher).
    epochs_apart: pair configurations whatever their epoch counts (pairing)."""
    key_of = pairing(base_groups, new_groups, epochs_apart)
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
        effect = ratio(base[k].process_values(metric), new[k].process_values(metric))
        rows.append(Comparison(label(k, varying), b, n, effect))
    judge(rows, threshold)
    only_base = [label(k, varying) for k in sorted(set(base) - set(new), key=sort_key)]
    only_new = [label(k, varying) for k in sorted(set(new) - set(base), key=sort_key)]
    return rows, only_base, only_new


def _epochs(counts: set[int]) -> str:
    return "/".join(str(c) for c in sorted(counts))


def _fmt(s: Summary) -> str:
    if s.ci is None:
        return f"{s.median:.4g} ({describe_interval(s)})"
    return f"{s.median:.4g} {describe_interval(s)} n={s.n}"


def _ratio_text(c: Comparison) -> str:
    if c.effect is None:
        return f"{c.new.median / c.base.median:.3f} (medians; no interval)"
    return f"{c.effect.estimate:.3f} {interval_text(c.effect.ci, lambda v: f'{v:.3f}')}"


def table(rows: Sequence[Comparison], metric: str) -> str:
    headers = ("configuration", f"BASE {metric}", f"NEW {metric}", "NEW/BASE [interval]",
               "verdict")
    cells = [(c.label, _fmt(c.base), _fmt(c.new), _ratio_text(c), c.verdict) for c in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])]
                     + [line(r) for r in cells])


def _summary_json(s: Summary) -> dict[str, Any]:
    return {"median": s.median, "ci_low": s.ci.low if s.ci else None,
            "ci_high": s.ci.high if s.ci else None,
            "ci_coverage": s.ci.coverage if s.ci else None, "n_processes": s.n,
            "unstable": s.unstable}


def as_json(rows: Sequence[Comparison], only_base: Sequence[str], only_new: Sequence[str],
            metric: str, threshold: float) -> dict[str, Any]:
    return {
        "metric": metric, "threshold": threshold,
        "ratio_interval": "Hodges-Lehmann ratio NEW/BASE with its Moses interval (coverage "
                          "per configuration); test: two-sided Mann-Whitney U, Holm-corrected "
                          "over the configurations compared",
        "regressions": sum(c.regression for c in rows),
        "configurations": [
            {"configuration": c.label, "base": _summary_json(c.base),
             "new": _summary_json(c.new),
             "ratio": c.effect.estimate if c.effect else None,
             "ratio_ci_low": c.effect.ci.low if c.effect else None,
             "ratio_ci_high": c.effect.ci.high if c.effect else None,
             "ratio_ci_coverage": c.effect.ci.coverage if c.effect else None,
             "p": c.effect.p if c.effect else None, "p_holm": c.p_holm,
             "verdict": c.verdict} for c in rows],
        "only_in_base": list(only_base), "only_in_new": list(only_new),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="compare.py",
        description="Compare the timing of two sets of memstrat records, configuration by "
                    "configuration; exit 1 when NEW is slower than BASE by more than the "
                    "threshold and a Mann-Whitney test, Holm-corrected over the configurations "
                    "compared, says they differ.",
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
    ap.add_argument("--any-epochs", action="store_true",
                    help="pair configurations whatever their epoch counts (e.g. a new results "
                         "set of 21 epochs a process against an older one of 4): a process's "
                         "value is the median of its steady epochs either way; the output "
                         "names the counts")
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
                                            args.threshold, args.any_epochs)
        if not rows:
            key_of = pairing(base_groups, new_groups, args.any_epochs)
            apart = disjoint_fields([key_of(g.key) for g in base_groups],
                                    [key_of(g.key) for g in new_groups])
            raise UsageError(
                f"no configuration with {args.metric} in both {args.base} and {args.new} "
                f"({len(only_base)} only in BASE, {len(only_new)} only in NEW)"
                + ("; they share no value of " + " | ".join(apart) if apart else ""))
        why = powerless(rows)
        if why:
            print(table(rows, args.metric), file=sys.stderr)
            raise UsageError(why)
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
        counts = ({g.key.epochs for g in base_groups}, {g.key.epochs for g in new_groups})
        if args.any_epochs and counts[0] != counts[1]:
            print(f"note: paired whatever the epoch count (BASE {_epochs(counts[0])}, NEW "
                  f"{_epochs(counts[1])} epochs a process): each process's value is the median "
                  "of its steady epochs 2..N")
        print(table(rows, args.metric))
        for name, only in (("BASE", only_base), ("NEW", only_new)):
            if only:
                print(f"\nonly in {name} (not compared): " + "; ".join(only))
        unjudged = sum(c.verdict.startswith("not judged") for c in rows)
        print(f"\n{len(rows)} configuration{'s' if len(rows) != 1 else ''} compared: "
              f"{len(regressions)} regression"
              f"{'s' if len(regressions) != 1 else ''} (slower by more than "
              f"{args.threshold:.0%} and significantly different after Holm's correction over "
              f"the {len(rows) - unjudged} configurations judged)"
              + (f", {unjudged} not judged (fewer than 3 processes)" if unjudged else "")
              + ".")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
