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

Rules every generator keeps: a number is given with its 95% interval and n where the
statistics have one (`value`); two values whose intervals overlap are never put in order
(`stats.tiers`); a value the results set does not hold is NOT_MEASURED, never a number.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Sequence

from analysis.aggregate import (REFERENCE_MISSING, REFERENCE_STRATEGY, STRATEGY_ORDER, Group,
                                GroupKey, variant_rank, aggregate, floors, representative)
from analysis.document import Doc, fmt_num
from analysis.results_set import ResultsSet
from analysis.stats import (MIN_PROCESSES, UNSTABLE_HALF_WIDTH, Summary, bootstrap_ratio_ci,
                            stability_label, tiers)
from analysis.stream import ordered_curves, stop_table, stream_points

NOT_MEASURED = "not measured in this results set"
TRANSFERS = ("u8", "f32")
SCENARIOS = ("static", "refresh", "stream")
COMMAND = "python3 analysis/docs_blocks.py"
# Best forms -> the naive form each improves, as memory_strategies/registry.cpp names them
# (`improves`). A record's config.improves wins where present; for records without it this
# table is the one place to update when a best form is added.
IMPROVES = {"zero-copy-staged": "zero-copy", "um-prefetch-coarse": "um-prefetch",
            "pinned-graph": "pinned", "double-buffer-graph": "double-buffer"}
# key=value filters every generator accepts: fields of the configuration (aggregate.GroupKey)
FILTERS = ("hidden", "gemm", "epochs", "depth", "streams", "lr", "momentum", "tf32",
           "graphs", "advise")
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
            "n processes per value, 95% bootstrap interval in brackets._")


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


def select(rs: ResultsSet, a: BlockArgs) -> list[Group]:
    """Groups at the block's batch/transfer/scenario and filters, from one comparable slice
    (BlockError when they span several: the marker must say which)."""
    filters = {k: v for k, v in a.options.items() if k in FILTERS}
    out = [g for g in rs.groups
           if (a.batch is None or g.key.batch == a.batch)
           and (a.transfer is None or g.key.transfer == a.transfer)
           and (a.scenario is None or g.key.scenario == a.scenario)
           and all(key_fields(g.key).get(k) == v for k, v in filters.items())]
    slices = {g.key.slice_key() for g in out}
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
    """'6.16 ms [6.15, 6.18], n=5', '6.16 ms, n=2 (no interval)' or NOT_MEASURED."""
    if s is None:
        return NOT_MEASURED
    if s.ci is None:
        return f"{fmt_num(s.median)}{unit}, n={s.n} (no interval)"
    return f"{fmt_num(s.median)}{unit} [{fmt_num(s.ci.low)}, {fmt_num(s.ci.high)}], n={s.n}"


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


def ordered(groups: Sequence[Group]) -> tuple[list[list[Group]], list[Group]]:
    """(tiers fastest first, groups without an interval by median)."""
    loose = sorted((g for g in groups if wall(g) is not None and wall(g).ci is None),
                   key=lambda g: wall(g).median)
    return tiers(groups, wall), loose


def tier_text(tier: Sequence[Group]) -> str:
    """A tier's members with their values; says that they are not ordered."""
    text = "; ".join(f"{g.key.variant_label} {group_value(g)}" for g in tier)
    if len(tier) > 1:
        text += " (intervals overlap: not ordered, listed by median)"
    return text


def loose_note(loose: Sequence[Group]) -> str:
    return (f"not ordered (fewer than {MIN_PROCESSES} processes, no interval): "
            + "; ".join(f"{g.key.variant_label} {group_value(g)}" for g in loose))


# --------------------------------------------------------------------------------------
# The generators
# --------------------------------------------------------------------------------------
@generator("headline", defaults=HEADLINE)
def headline(rs: ResultsSet, a: BlockArgs) -> str:
    """GPU, commit, date; resident in one launch per epoch; the compute-only reference;
    the fastest tier of the strategies that move data to the GPU (all but resident)."""
    groups = select(rs, a)
    p = rs.provenance
    one_launch = pick(groups, REFERENCE_STRATEGY, epoch_launch=True)
    reference = pick(groups, REFERENCE_STRATEGY, epoch_launch=False)
    moving = [g for g in groups if g.key.strategy != REFERENCE_STRATEGY]
    ranked, loose = ordered(moving)
    if ranked:
        fastest = ("fastest data-moving strateg" + ("ies: " if len(ranked[0]) > 1 else "y: ")
                   + tier_text(ranked[0]))
    elif moving:
        fastest = "fastest data-moving strategy: not determined (no interval)"
    else:
        fastest = f"data-moving strategies: {NOT_MEASURED}"
    gpu_time = (f"; its GPU time, the compute floor: {group_value(reference, 'gpu_ms')}"
                if reference is not None else "")
    items = [f"resident, whole epoch in one kernel launch: {group_value(one_launch)}",
             f"compute-only reference (resident, one launch per batch): "
             f"{group_value(reference)}{gpu_time}", fastest]
    if loose:
        items.append(loose_note(loose))
    items += pooling_notes([g for g in (one_launch, reference, *moving) if g is not None])
    doc = Doc()
    doc.p(f"**{p.gpu}**, {p.commit}, {p.date}; ms per epoch (wall clock) at {a.where()}:")
    doc.ul(items)
    return doc.markdown()


def _floor_cells(g: Group, floor, ms: Summary | None) -> tuple[str, str]:
    if floor.floor_ms is None:
        if any(r.startswith("no measured pinned") for r in floor.reasons):
            why = "pinned bandwidth not measured"
        else:
            why = "; ".join("no compute-only reference" if r == REFERENCE_MISSING else r
                            for r in floor.reasons) or "unknown"
        return f"no floor: {why}", "n/a"
    ratio = f"{fmt_num(ms.median / floor.floor_ms)}×" if ms and floor.floor_ms > 0 else "n/a"
    return fmt_num(floor.floor_ms), ratio


@generator("strategy-table", required=("batch", "transfer", "scenario"))
def strategy_table(rs: ResultsSet, a: BlockArgs) -> str:
    """One row per strategy (and variant): median [CI] n, tier, stability, floor, ratio to
    the floor, and the naive form a best form improves."""
    groups = select(rs, a)
    if not groups:
        return f"No configuration at {a.where()}: {NOT_MEASURED}."
    fl = floors(rs.groups, rs.pinned.bytes_per_s if rs.pinned else None)
    best_of = improves(rs)
    ranked, loose = ordered(groups)
    rows = []
    labelled = [(str(i) if len(t) == 1 else f"{i} (tie)", g)
                for i, t in enumerate(ranked, 1) for g in t]
    labelled += [(f"none (n<{MIN_PROCESSES})", g) for g in loose]
    for tier, g in labelled:
        floor_ms, ratio = _floor_cells(g, fl[g.key], wall(g))
        rows.append([g.key.variant_label, tier, group_value(g), stability_label(wall(g)),
                     floor_ms, ratio, best_of.get(g.key.strategy, "")])
    doc = Doc()
    doc.table(["strategy", "tier", "ms/epoch [95% CI], n", "stability", "floor ms",
               "measured/floor", "best form of"], rows, align="llllrrl")
    notes = [f"Tier 1 is the fastest; a tier holds strategies whose 95% intervals overlap, "
             f"which are not ordered (listed by median). UNSTABLE: interval half-width above "
             f"{UNSTABLE_HALF_WIDTH:.0%} of the median."]
    notes += [f"Tier {i}: {', '.join(g.key.variant_label for g in t)}: intervals overlap, "
              "not ordered." for i, t in enumerate(ranked, 1) if len(t) > 1]
    if loose:
        notes.append(f"Tier none: {', '.join(g.key.variant_label for g in loose)}: fewer than "
                     f"{MIN_PROCESSES} processes, no interval, not ordered.")
    if rs.pinned:
        notes.append(f"Floors (docs/methodology.md): pinned bandwidth {rs.pinned.gb_per_s:.1f} "
                     f"GB/s, the median peak of {rs.pinned.records} pinned-h2d primitive "
                     "record(s); measured/floor = median ms/epoch / floor.")
    else:
        notes.append("No floor: pinned bandwidth not measured (no pinned-h2d primitive "
                     "record in this results set).")
    doc.ul(notes + pooling_notes(groups))
    return doc.markdown()


def _pair_verdict(naive: Group | None, best: Group | None) -> tuple[str, str]:
    """(best/naive ratio with its interval, what the intervals allow saying)."""
    if naive is None or best is None or wall(naive) is None or wall(best) is None:
        return NOT_MEASURED, NOT_MEASURED
    n, b = wall(naive), wall(best)
    ratio = fmt_num(b.median / n.median) + "×"
    ci = bootstrap_ratio_ci(naive.process_values("wall_ms"), best.process_values("wall_ms"))
    if ci is not None:
        ratio += f" [{fmt_num(ci.low)}, {fmt_num(ci.high)}]"
    if n.ci is None or b.ci is None:
        return ratio, f"no interval (n<{MIN_PROCESSES}): not compared"
    if n.ci.overlaps(b.ci):
        return ratio, "intervals overlap: not distinguishable"
    return ratio, "best form faster" if b.median < n.median else "best form slower"


@generator("naive-vs-best", required=("batch", "transfer", "scenario"))
def naive_vs_best(rs: ResultsSet, a: BlockArgs) -> str:
    """Each (naive, best form) pair: both medians, best/naive with a bootstrap interval of
    the ratio, and whether the two intervals overlap."""
    rep = representative(select(rs, a))
    pairs = sorted(improves(rs).items(), key=lambda bn: (
        STRATEGY_ORDER.index(bn[1]) if bn[1] in STRATEGY_ORDER else len(STRATEGY_ORDER), bn))
    rows, shown = [], []
    for best_name, naive_name in pairs:
        naive, best = pick(rep, naive_name), pick(rep, best_name)
        rows.append([naive_name, best_name, group_value(naive), group_value(best),
                     *_pair_verdict(naive, best)])
        shown += [g for g in (naive, best) if g is not None]
    doc = Doc()
    doc.table(["naive form", "best form", "naive ms/epoch", "best form ms/epoch",
               "best/naive [95% CI]", "intervals"], rows, align="llllll")
    doc.p(f"At {a.where()}. best/naive: ratio of the medians, its interval a bootstrap of the "
          "ratio (each side's processes resampled on their own). A pair whose intervals "
          "overlap is not ordered.")
    doc.ul(pooling_notes(shown))
    return doc.markdown()


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


@generator("spread", names=True, options=("variant",))
def spread(rs: ResultsSet, a: BlockArgs) -> str:
    """Per listed strategy, each configuration's process values: min..max, relative IQR,
    interval half-width, stability; with variant=KEY one row per value of that key."""
    if not a.names:
        raise BlockError("spread needs strategy names, e.g. `spread um-prefetch pinned b256`")
    key = a.options.get("variant")
    groups = select(rs, a)
    rows, parts = [], []
    for name in a.names:
        mine = [g for g in groups if g.key.strategy == name]
        if not mine:
            rows.append([name, *([""] if key else []), NOT_MEASURED, "", "", "", "", ""])
        for g in mine:
            for v, part in split_by(g, key):
                parts.append(part)
                s = wall(part)
                values = fmt_num(s.min) if s.n == 1 else f"{fmt_num(s.min)}..{fmt_num(s.max)}"
                rows.append([config_label(g), *([v] if key else []), s.n, f"{values} ms",
                             group_value(part),
                             "n/a" if s.rel_iqr is None or s.n < 2 else f"{s.rel_iqr * 100:.1f}%",
                             "n/a" if s.half_width_pct is None else f"±{s.half_width_pct:.1f}%",
                             stability_label(s)])
    doc = Doc()
    doc.table(["configuration", *([key] if key else []), "n", "process values (min..max)",
               "median [95% CI]", "rel. IQR", "CI half-width", "stability"], rows,
              align="l" + ("l" if key else "") + "rllrrl")
    notes = ["Process value: the median of one process's steady epochs (2..N); rel. IQR: "
             "(p75 - p25) / median over processes; CI half-width in % of the median; UNSTABLE "
             f"above {UNSTABLE_HALF_WIDTH:.0%}."]
    if key:
        notes.append(f"One row per value of {key}: processes that the configuration key "
                     "alone would pool are split by it.")
    doc.ul(notes + pooling_notes(parts, key))
    return doc.markdown()


@generator("stream", defaults={"batch": 256, "transfer": "u8"})
def stream(rs: ResultsSet, a: BlockArgs) -> str:
    """The stream scenario: where each strategy stops starving (analysis/stream.py's table),
    then per augmentation each strategy's fastest stream epoch against its static epoch, and
    the host the workers ran on."""
    groups = select(rs, dataclasses.replace(a, scenario="stream"))
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
        best = min(timed, key=lambda p: p.epoch_ms.median)
        base = pick(static, strategy)
        ratio = NOT_MEASURED
        if base is not None and wall(base) is not None:
            ratio = fmt_num(best.epoch_ms.median / wall(base).median) + "×"
            ci = bootstrap_ratio_ci(base.process_values("wall_ms"),
                                    best.group.process_values("wall_ms"))
            if ci is not None:
                ratio += f" [{fmt_num(ci.low)}, {fmt_num(ci.high)}]"
        rows.append([augment, strategy, f"{best.workers}", value(best.epoch_ms),
                     group_value(base), ratio])
    doc.table(["augment", "strategy", "fastest at workers", "stream ms/epoch there",
               "static ms/epoch", "stream/static [95% CI]"], rows, align="llrlll")
    envs = [r.get("env") or {} for g in groups for r in g.timing_records]
    hosts = {e.get("cpu_model") for e in envs}
    cores = {e.get("cpu_count") for e in envs}
    doc.p(f"At batch {a.batch}, {a.transfer}. Stream/static: the fastest worker count's epoch "
          "over the same strategy's static epoch (the ratio of the medians, a bootstrap "
          "interval of the ratio). Host: " + ", ".join(sorted(map(str, hosts))) + "; "
          + ", ".join(sorted(map(str, cores))) + " logical CPUs, shared by the workers, the "
          "training thread and the CUDA driver's threads.")
    return doc.markdown()
