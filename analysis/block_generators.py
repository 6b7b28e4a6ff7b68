"""What goes inside each generated block of README.md and docs/*.md (analysis/docs_blocks.py).

A generator is one function ``(ResultsSet, BlockArgs) -> Markdown`` registered under its
block name with ``@generator``; `render` appends the provenance line, so no generator can
leave it out. Adding one:

    @generator("resident-b256", defaults={"batch": 256, "transfer": "u8",
                                          "scenario": "static"})
    def resident_b256(rs, a):
        g = pick(select(rs, a), "resident", epoch_launch=True)
        return f"Resident: {group_value(g)} per epoch."

A marker's words after the block name are its arguments: ``b256`` (batch), ``u8``/``f32``
(transfer), ``static``/``refresh``/``stream`` (scenario), ``key=value`` options (the filters
in FILTERS, which pin a configuration down when the results set has several hidden sizes,
GEMMs, ...; plus the generator's own options, e.g. spread's ``variant=``), and, for
generators that take them, strategy names.

Rules every generator keeps: a number is given with its interval and n where the statistics
have one (`value`; the coverage is printed beside an interval below 95%); two values are put in
order only by a pairwise test corrected for multiplicity (`stats.rank_by_tests`); a value the
results set does not hold is NOT_MEASURED, never a number.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Sequence

from analysis.aggregate import Group, GroupKey, aggregate, representative, variant_rank
from analysis.document import Doc, fmt_num, fmt_places, interval_places
from analysis import spread as spread_rules
from analysis.results_set import ResultsSet
from analysis.stats import (MIN_PROCESSES, UNSTABLE_HALF_WIDTH, Effect, Summary, interval_text,
                            holm, rank_by_tests, ratio, stability_label)
from analysis.stream import ordered_curves, stop_table, stream_points
from analysis.strategy_pairs import IMPROVES  # best form -> naive form (one table)

NOT_MEASURED = "not measured in this results set"
TRANSFERS = ("u8", "f32")
SCENARIOS = ("static", "refresh", "stream")
COMMAND = "python3 analysis/docs_blocks.py"
# key=value filters every generator accepts: fields of the configuration (aggregate.GroupKey)
# The data-size options: runs on a replicated set or under a device budget (budget.toml) are
# slices of their own, which a block takes only where its marker names them (replicate=11,
# device_budget_gib=0.24); without them it reads the set as loaded on the whole device.
DATA_FILTERS = ("replicate", "device_budget_gib")
FILTERS = ("hidden", "gemm", "epochs", "depth", "streams", "lr", "momentum", "tf32",
           "graphs", "advise") + DATA_FILTERS
HEADLINE = {"batch": 256, "transfer": "u8", "scenario": "static"}


class BlockError(ValueError):
    """A block whose arguments cannot be used; docs_blocks adds file:line."""


@dataclasses.dataclass
class BlockArgs:
    batch: int | None = None
    transfer: str | None = None
    scenario: str | None = None
    names: list[str] = dataclasses.field(default_factory=list)
    options: dict[str, str] = dataclasses.field(default_factory=dict)

    def where(self) -> str:
        """'batch 256, u8, static' for the parts that are set."""
        parts = [f"batch {self.batch}" if self.batch is not None else None,
                 self.transfer, self.scenario]
        return ", ".join(p for p in parts if p) or "every configuration"


@dataclasses.dataclass(frozen=True)
class Generator:
    name: str
    fn: Callable[[ResultsSet, BlockArgs], str]
    required: tuple[str, ...]      # of batch, transfer, scenario, names
    defaults: dict[str, Any]
    options: tuple[str, ...]       # own key=value options besides FILTERS
    takes_names: bool


REGISTRY: dict[str, Generator] = {}


def generator(name: str, *, required: Sequence[str] = (), defaults: dict | None = None,
              options: Sequence[str] = (), names: bool = False):
    """Register `fn` as the generator of blocks called `name`."""
    def register(fn):
        REGISTRY[name] = Generator(name, fn, tuple(required), dict(defaults or {}),
                                   tuple(options), names)
        return fn
    return register


def parse_args(gen: Generator, words: Sequence[str]) -> BlockArgs:
    a = BlockArgs()
    for w in words:
        m = re.fullmatch(r"b(\d+)", w)
        slot, value = (("batch", int(m.group(1))) if m else
                       ("transfer", w) if w in TRANSFERS else
                       ("scenario", w) if w in SCENARIOS else (None, None))
        if slot:
            if getattr(a, slot) is not None:
                raise BlockError(f"{slot} given twice ({getattr(a, slot)} and {value})")
            setattr(a, slot, value)
        elif "=" in w:
            key, _, val = w.partition("=")
            if key not in FILTERS + gen.options:
                raise BlockError(f"unknown option {key!r} for {gen.name} (known: "
                                 f"{', '.join(FILTERS + gen.options)})")
            a.options[key] = val
        elif gen.takes_names:
            a.names.append(w)
        else:
            raise BlockError(f"unexpected argument {w!r} for {gen.name} (it takes bN, "
                             f"{'/'.join(TRANSFERS)}, {'/'.join(SCENARIOS)} and key=value)")
    for slot, value in gen.defaults.items():
        if getattr(a, slot) is None:
            setattr(a, slot, value)
    missing = [s for s in gen.required if not getattr(a, s)]
    if missing:
        raise BlockError(f"{gen.name} needs {', '.join(missing)} (e.g. "
                         f"`{gen.name} b256 u8 static`)")
    return a


def render(name: str, words: Sequence[str], rs: ResultsSet) -> str:
    """The block's Markdown body, ending with its provenance line."""
    gen = REGISTRY.get(name)
    if gen is None:
        raise BlockError(f"unknown block {name!r} (known: {', '.join(sorted(REGISTRY))})")
    body = gen.fn(rs, parse_args(gen, words)).rstrip("\n")
    return f"{body}\n\n{provenance_line(rs)}"


def provenance_line(rs: ResultsSet) -> str:
    return (f"_Generated by `{COMMAND}` from {rs.label} (records of {rs.provenance.text()}); "
            "n processes per value; in brackets the distribution-free interval of the median "
            "(order statistics), whose exact coverage is at least 95% unless printed beside "
            "it (docs/methodology.md)._")


# --------------------------------------------------------------------------------------
# Selection and formatting shared by the generators
# --------------------------------------------------------------------------------------
def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


def key_fields(k: GroupKey) -> dict[str, str]:
    fields = {"hidden": k.hidden_label, "gemm": k.gemm, "epochs": str(k.epochs),
              "depth": _text(k.depth), "streams": _text(k.streams)}
    fields.update({name: _text(v) for name, v in k.other})
    return fields


def data_as_marked(g: Group, filters: dict[str, str]) -> bool:
    """Whether g's data (copies of the set, device budget) is what the block reads: the set as
    loaded on the whole device, unless the marker's filters name a data option (DATA_FILTERS;
    they then select by value)."""
    return any(k in filters for k in DATA_FILTERS) or g.key.data_as_loaded


# The stream tables name where each configuration augmented ("light (GPU)": stream.augment_label),
# so augmentation on the GPU sits in their slice beside the host's.
STREAM_SLICE_IGNORES = ("augment_device",)


def select(rs: ResultsSet, a: BlockArgs, ignoring: tuple[str, ...] = ()) -> list[Group]:
    """Groups at the block's batch/transfer/scenario and filters, from one comparable slice
    (BlockError when they span several: the marker must say which); `ignoring`: config fields
    that do not split the slice (GroupKey.slice_key)."""
    filters = {k: v for k, v in a.options.items() if k in FILTERS}
    out = [g for g in rs.groups
           if (a.batch is None or g.key.batch == a.batch)
           and (a.transfer is None or g.key.transfer == a.transfer)
           and (a.scenario is None or g.key.scenario == a.scenario)
           and all(key_fields(g.key).get(k) == v for k, v in filters.items())
           and data_as_marked(g, filters)]
    slices = {g.key.slice_key(ignoring) for g in out}
    if len(slices) > 1:
        differ = [f"{name} ({', '.join(sorted({_text(v) for v in vals}))})"
                  for name, vals in zip(("gpu", "hidden", "gemm", "epochs", "options"),
                                        zip(*slices)) if len(set(vals)) > 1]
        raise BlockError(f"the configurations at {a.where()} differ in "
                         f"{'; '.join(differ)}: add a filter such as hidden=256 to the marker")
    return out


def pick(groups: Sequence[Group], strategy: str, **fields: Any) -> Group | None:
    """The group of `strategy` whose key has the given field values; of several, the default
    variant (the strategy's own defaults, the step --fused on took: aggregate.representative's
    order)."""
    found = [g for g in groups if g.key.strategy == strategy
             and all(getattr(g.key, k) == v for k, v in fields.items())]
    return min(found, key=lambda g: variant_rank(g.key)) if found else None


def value(s: Summary | None, unit: str = " ms") -> str:
    """'6.16 ms [6.15, 6.18], n=10', '6.16 ms [6.1, 6.2] 93.75%, n=5' (the coverage of an
    interval below 95%), '6.16 ms, n=2 (no interval)' or NOT_MEASURED."""
    if s is None:
        return NOT_MEASURED
    if s.ci is None:
        return f"{fmt_num(s.median)}{unit}, n={s.n} (no interval)"
    return f"{fmt_num(s.median)}{unit} {interval_text(s.ci, fmt_num)}, n={s.n}"


def effect_text(e: Effect | None, unit: str = "×", signed: bool = False) -> str:
    """'0.675× [0.671, 0.676]': a Hodges-Lehmann ratio (or shift) with its Moses interval, all
    three at the decimals the interval resolves (document.interval_places); `signed`: a '+'
    before an estimate above zero as printed ('+0.210 ms [0.190, 0.230]', '0.000 ms [...]')."""
    if e is None:
        return NOT_MEASURED
    places = interval_places(e.estimate, e.ci.low, e.ci.high)
    sign = "+" if signed and round(e.estimate, places) > 0 else ""
    return (f"{sign}{fmt_places(e.estimate, places)}{unit} "
            f"{interval_text(e.ci, lambda v: fmt_places(v, places))}")


def group_value(g: Group | None, metric: str = "wall_ms") -> str:
    if g is None or g.stat(metric) is None:
        return NOT_MEASURED
    return value(g.stat(metric)) + (", profiler on" if g.timing_profiled else "")


def wall(g: Group) -> Summary | None:
    return g.stat("wall_ms")


def improves(rs: ResultsSet) -> dict[str, str]:
    """Best form -> naive form: IMPROVES, overridden by config.improves in the records."""
    pairs = dict(IMPROVES)
    for r in rs.runs:
        cfg = r.get("config") or {}
        if cfg.get("improves"):
            pairs[cfg["strategy"]] = cfg["improves"]
    return pairs


# Config fields that differ between the processes of one configuration by design. Fields
# ending in _reason explain a decision recorded in its own field, which is compared instead.
PER_PROCESS = ("seed", "run_tag", "profile", "device")


def _comparable(field: str, v: Any) -> str:
    if field == "dataset" and isinstance(v, dict):
        v = {k: x for k, x in v.items() if k != "path"}    # where the files were, not what
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def pooled_fields(g: Group) -> list[tuple[str, list[str]]]:
    """Config fields outside the configuration key whose values differ between the
    group's processes (e.g. a matrix axis the analysis does not know, such as cpus)."""
    skip = set(PER_PROCESS) | ({"depth", "streams"} if g.key.depth is None else set())
    out = []
    fields = {k for r in g.records for k in r["config"] if not k.endswith("_reason")}
    for field in sorted(fields - skip):
        vals = sorted({_comparable(field, r["config"].get(field)) for r in g.records})
        if len(vals) > 1:
            out.append((field, vals))
    return out


def pooling_notes(groups: Sequence[Group], split_by_key: str | None = None) -> list[str]:
    """One warning per group whose value mixes processes of different settings."""
    notes = []
    for g in groups:
        fields = [(f, v) for f, v in pooled_fields(g) if f != split_by_key]
        if fields:
            what = "; ".join(f"config.{f} ({', '.join(v)})" for f, v in fields)
            notes.append(f"{config_label(g)} pools processes that differ in {what}: its "
                         f"value mixes them; `spread {g.key.strategy} b{g.key.batch} "
                         f"variant={fields[0][0]}` shows them apart.")
    return notes


def config_label(g: Group) -> str:
    return f"{g.key.variant_label} ({g.key.scenario}, {g.key.transfer}, b{g.key.batch})"


RANK_RULE = ("rank: 1 + the number of configurations of the table significantly faster "
             "(two-sided Mann-Whitney U over processes, Holm-corrected over every pair of the "
             "table, family-wise error 5%); equal ranks are not ordered and are listed by "
             "median")


def ordered(groups: Sequence[Group]) -> tuple[list[tuple[int, Group]], list[Group]]:
    """([(rank, group)] fastest first, the groups with too few processes to be tested)."""
    timed = [g for g in groups if wall(g) is not None]
    ranked = rank_by_tests(timed, lambda g: g.process_values("wall_ms"))
    return ([(r.rank, r.item) for r in ranked if r.rank is not None],
            [r.item for r in ranked if r.rank is None])


def rank_labels(ranked: Sequence[tuple[int, Group]], loose: Sequence[Group]
                ) -> list[tuple[str, Group]]:
    """ordered()'s result as [(rank label, group)] fastest first: "2", "1 (tie)" where several
    share a rank, and "none (n<3)" last for the groups with too few processes to be tested."""
    counts = {rank: sum(1 for r, _ in ranked if r == rank) for rank, _ in ranked}
    labelled = [(str(rank) if counts[rank] == 1 else f"{rank} (tie)", g) for rank, g in ranked]
    return labelled + [(f"none (n<{MIN_PROCESSES})", g) for g in loose]


def holm_verdicts(effects: Sequence[Effect | None]) -> list[str | None]:
    """Per effect (new against base): the Mann-Whitney verdict, Holm-corrected over the effects
    given ("faster (Holm p=…)", "slower (…)", "not significantly different (…)"); None where
    there is no effect to test."""
    tested = [i for i, e in enumerate(effects) if e is not None]
    adjusted = dict(zip(tested, holm([effects[i].p for i in tested])))
    out: list[str | None] = []
    for i, e in enumerate(effects):
        if e is None:
            out.append(None)
            continue
        p = adjusted[i]
        out.append(("not significantly different" if p >= 0.05 else
                    "faster" if e.estimate < 1 else "slower") + f" (Holm p={p:.2g})")
    return out


def first_rank_text(ranked: Sequence[tuple[int, Group]]) -> str:
    """The configurations of rank 1 with their values; says that they are not ordered."""
    top = [g for rank, g in ranked if rank == 1]
    text = "; ".join(f"{g.key.variant_label} {group_value(g)}" for g in top)
    if len(top) > 1:
        text += " (not significantly different: not ordered, listed by median)"
    return text


def loose_note(loose: Sequence[Group]) -> str:
    return (f"not ordered (fewer than {MIN_PROCESSES} processes): "
            + "; ".join(f"{g.key.variant_label} {group_value(g)}" for g in loose))


# --------------------------------------------------------------------------------------
# The generators of the spread and the stream scenario (the comparisons: block_generators_ranking)
# --------------------------------------------------------------------------------------
def variant_value(rec: dict[str, Any], key: str) -> str:
    """The record's value of `key` (config.KEY, or a dotted path such as env.host); for
    run_tag the repeat index (`_r<N>`) is dropped, so that repeats stay together."""
    path = key.split(".") if "." in key else ["config", key]
    v: Any = rec
    for part in path:
        v = v.get(part) if isinstance(v, dict) else None
    if v is None:
        return f"{key} not recorded"
    if path == ["config", "run_tag"]:
        v = "_".join(p for p in str(v).split("_") if not re.fullmatch(r"r\d+", p))
    return _text(v)


def split_by(g: Group, key: str | None) -> list[tuple[str, Group]]:
    """[(variant value, its own group)]; the group itself when there is no key."""
    if key is None:
        return [("", g)]
    parts: dict[str, list[dict[str, Any]]] = {}
    for r in g.records:
        parts.setdefault(variant_value(r, key), []).append(r)
    return [(v, aggregate(recs)[0]) for v, recs in sorted(parts.items())]


@generator("spread", names=True, options=("variant", "parts"))
def spread(rs: ResultsSet, a: BlockArgs) -> str:
    """Per listed strategy, each configuration's process values: min..max, relative IQR,
    interval half-width, stability; with variant=KEY one row per value of that key; with
    parts=on also where the spread lies (analysis/spread.py: level shifts within processes,
    and each part of the epoch's range of process medians)."""
    if not a.names:
        raise BlockError("spread needs strategy names, e.g. `spread um-prefetch pinned b256`")
    key = a.options.get("variant")
    by_part = a.options.get("parts", "off")
    if by_part not in ("on", "off"):
        raise BlockError(f"parts is on or off, not {by_part!r}")
    by_part = by_part == "on"
    # the spread set runs some configurations with the driver's threads placed
    # (--thread-placement): other experiments, shown as rows of their own beside the
    # scheduler's, not another slice
    groups = select(rs, a, ignoring=("thread_placement",))
    rows, parts = [], []
    for name in a.names:
        mine = [g for g in groups if g.key.strategy == name]
        if not mine:
            rows.append([name, *([""] if key else []), NOT_MEASURED, "", "", "", "", "",
                         *(["", ""] if by_part else [])])
        for g in mine:
            for v, part in split_by(g, key):
                parts.append(part)
                s = wall(part)
                values = fmt_num(s.min) if s.n == 1 else f"{fmt_num(s.min)}..{fmt_num(s.max)}"
                rows.append([config_label(g), *([v] if key else []), s.n, f"{values} ms",
                             group_value(part),
                             "n/a" if s.rel_iqr is None or s.n < 2 else f"{s.rel_iqr * 100:.1f}%",
                             "n/a" if s.half_width_pct is None else f"±{s.half_width_pct:.1f}%",
                             stability_label(s), *(located(part) if by_part else [])])
    doc = Doc()
    doc.table(["configuration", *([key] if key else []), "n", "process values (min..max)",
               "median [interval]", "rel. IQR", "interval half-width", "stability",
               *(["level shifts", "by part, ms"] if by_part else [])], rows,
              align="l" + ("l" if key else "") + "rllrrl" + ("rl" if by_part else ""))
    notes = ["Process value: the median of one process's steady epochs (2..N); rel. IQR: "
             "(p75 - p25) / median over processes; interval half-width in % of the median; "
             f"UNSTABLE: a 95% interval wider than ±{UNSTABLE_HALF_WIDTH:.0%} (not assessed "
             "below 6 processes)."]
    if key:
        notes.append(f"One row per value of {key}: processes that the configuration key "
                     "alone would pool are split by it.")
    if by_part:
        notes.append("Level shifts: the processes whose steady epochs change level during the "
                     "run, of those with enough epochs to test. " + spread_rules.RULE + " "
                     + spread_rules.PARTS_NOTE)
    doc.ul(notes + pooling_notes(parts, key))
    return doc.markdown()


def located(g: Group) -> list[str]:
    """[level shifts, by part] of one configuration's timing processes (analysis/spread.py)."""
    recs = g.timing_records
    d = spread_rules.diagnose([spread_rules.steady_values(r) for r in recs])
    shifts = ("n/a" if d is None else
              f"not tested (< {2 * spread_rules.MIN_HALF} steady epochs)" if d.tested == 0 else
              f"{d.shifted} of {d.tested}")
    return [shifts, spread_rules.format_parts(spread_rules.part_spreads(recs))]


def fastest_workers(points: Sequence[Any]) -> tuple[Any, str]:
    """(the point that stands for a strategy's fastest stream epoch, its label): the smallest
    median among rank 1 of Holm-corrected Mann-Whitney tests over the worker counts, with the
    counts the tests cannot tell from it; without enough processes to test, said so."""
    ranked = rank_by_tests(points, lambda p: p.group.process_values("wall_ms"))
    top = [r.item for r in ranked if r.rank == 1] or list(points)
    best = min(top, key=lambda p: p.epoch_ms.median)
    if not any(r.rank is not None for r in ranked):
        return best, f"{best.workers} (smallest median; too few processes to test)"
    tied = sorted(p.workers for p in top if p is not best)
    return best, f"{best.workers}" + (f" (tied with {', '.join(map(str, tied))})" if tied else "")


@generator("stream", defaults={"batch": 256, "transfer": "u8"})
def stream(rs: ResultsSet, a: BlockArgs) -> str:
    """The stream scenario: where each strategy stops starving (analysis/stream.py's table),
    then per augmentation each strategy's fastest stream epoch against its static epoch, and
    the host the workers ran on."""
    groups = select(rs, dataclasses.replace(a, scenario="stream"), STREAM_SLICE_IGNORES)
    points = stream_points(groups)
    doc = Doc()
    if not points:
        doc.p(f"Stream scenario at batch {a.batch}, {a.transfer}: {NOT_MEASURED}.")
        return doc.markdown()
    headers, rows = stop_table(points)
    doc.table(headers, rows)
    static = representative(select(rs, dataclasses.replace(a, scenario="static")))
    rows = []
    for (augment, strategy), curve in ordered_curves(points):
        timed = [p for p in curve if p.epoch_ms is not None]
        if not timed:
            continue
        best, fastest = fastest_workers(timed)
        base = pick(static, strategy)
        over = NOT_MEASURED
        if base is not None and wall(base) is not None:
            over = effect_text(ratio(base.process_values("wall_ms"),
                                     best.group.process_values("wall_ms")))
        rows.append([augment, strategy, fastest, value(best.epoch_ms),
                     group_value(base), over])
    doc.table(["augment", "strategy", "fastest at workers", "stream ms/epoch there",
               "static ms/epoch", "stream/static [interval]"], rows, align="llrlll")
    envs = [r.get("env") or {} for g in groups for r in g.timing_records]
    hosts = {e.get("cpu_model") for e in envs}
    cores = {e.get("cpu_count") for e in envs}
    doc.p(f"At batch {a.batch}, {a.transfer}. Fastest at workers: the smallest median among "
          "the worker counts no other count of the strategy beats (two-sided Mann-Whitney over "
          "processes, Holm-corrected over the strategy's worker counts), with those the tests "
          "cannot tell from it. Stream/static: its epoch "
          "over the same strategy's static epoch (the Hodges-Lehmann ratio with its Moses "
          "interval). Host: " + ", ".join(sorted(map(str, hosts))) + "; "
          + ", ".join(sorted(map(str, cores))) + " logical CPUs, shared by the workers, the "
          "training thread and the CUDA driver's threads.")
    return doc.markdown()
