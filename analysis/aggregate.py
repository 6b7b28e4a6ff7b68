"""Aggregate run records over processes; the one place where floors and overlap are defined.

Runs are grouped by their configuration minus the seed, the run identity (run_id, run_tag,
started_at) and the profiler switch, and by GPU name, so the processes of one
configuration end up in one Group. For strategies without a pipeline (everything but
double-buffer) depth and copy streams are ignored, as they do not change what the run does.
`config.epoch_launch` (the whole epoch in one launch) and `config.epoch_form` (of a kernel or
of a CUDA graph, or per batch) are part of the key: a missing epoch_launch means a record
written before that option existed, i.e. one launch per batch; a missing epoch_form, one
written before the graph form existed (a one-launch epoch was then the kernel form). So are
the stream scenario's `config.workers`, `prefetch` and `augment` (None in other scenarios and
in records that predate them); analysis/stream.py reads those groups.

Per process (one record): the median of its steady epochs 2..N (all epochs when N == 1).
Per configuration: the median of those per-process values, its order-statistic interval,
the spread over processes (analysis/stats.py). Timing (CUDA events and the host clock)
comes from the runs with the CUPTI profiler off whenever the configuration has any, so
profiled and unprofiled runs are never pooled for timing; CUPTI counters (API calls,
unified-memory bytes and faults, kernel/memcpy time) come from the profiled runs.
Counters that are null in the records stay None here; they are never turned into zeros.

The compute-only reference, the floors and the overlap efficiency are defined once, below,
and written out in docs/methodology.md ("Floors and overlap efficiency").
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Iterable, Sequence

import numpy as np

from .stats import Effect, Interval, Summary, shift, summarize

# The strategy whose pipeline depth / copy streams the report sweeps (overlap figure, variants).
PIPELINED_STRATEGIES = ("double-buffer",)
DEFAULT_DEPTH = 2
DEFAULT_STREAMS = 1
DEFAULT_TRAIN_SAMPLES = 60000
STRATEGY_ORDER = ("resident", "pageable", "pinned", "pinned-graph", "double-buffer",
                  "double-buffer-graph", "zero-copy", "zero-copy-staged", "um", "um-prefetch",
                  "um-prefetch-coarse", "um-advise")

# Measured by the trainer (events, host clock) or counted by the strategy: valid with the
# profiler on or off, taken from the timing runs.
TIMING_METRICS = ("wall_ms", "gpu_ms", "host_ms", "copy_ms", "compute_ms", "stall_ms",
                  "h2d_bytes",
                  # the stream scenario's producers (null elsewhere)
                  "input_wait_ms", "input_wait_first_ms", "slot_wait_ms",
                  "producer_samples_per_s", "producer_worker_samples_per_s")
# Measured with the profiler on only, taken from the profiled runs: CUPTI's counters (null
# without it), and the data-parallel reduction's own time (absent without it: its events would
# slow the step the timing runs time).
COUNTER_METRICS = ("um_htod_bytes", "um_dtoh_bytes", "um_gpu_faults", "um_cpu_faults",
                   "kernel_ms", "memcpy_ms", "reduce_ms")
EPOCH_METRICS = TIMING_METRICS + COUNTER_METRICS
# Config fields (besides the named key fields) that make two runs different experiments.
_OTHER_CONFIG = ("lr", "momentum", "tf32", "graphs", "advise", "prefetch_chunk_mib",
                 "copy_chunk_mib", "stage_blocks", "step", "fused", "replicate",
                 "device_budget_gib")
# What a record written before a key existed ran: one copy of the training set (--replicate 1),
# no device budget (null). Such a record and a newer one with the default are one experiment.
_CONFIG_BEFORE_KEY: dict[str, Any] = {"replicate": 1}
# config.thread_placement -> the label's words (os, the scheduler's, has none)
THREAD_PLACEMENT_LABELS = {"apart": "driver threads on other cores",
                           "shared": "driver threads on the training thread's core"}
# Among them, the strategies' own options, with their defaults (memory_strategies/registry.cpp;
# a record has null where its strategy does not read one). They tell variants of one strategy
# apart, never what a figure compares: a slice, and so a compute-only reference, ignores them,
# and a variant's label names a value other than the default.
# What a run decided rather than what it was asked (config.step, config.fused): part of the group
# key, not of a slice; the step --fused on takes where nothing says otherwise.
RUN_DECISIONS = ("step", "fused")
DEFAULT_STEP = "single-launch"
# config.fused_off_reason of a run whose configuration turned the fused step off (--fused off)
FUSED_OFF_BY_REQUEST = "off in the configuration"
STRATEGY_OPTION_DEFAULTS: dict[str, Any] = {
    "advise": "read-mostly,preferred-device,accessed-by", "prefetch_chunk_mib": 8,
    "copy_chunk_mib": 8, "stage_blocks": 8}
_STRATEGY_OPTION_LABELS = {"advise": "advise {}", "prefetch_chunk_mib": "{} MiB prefetch chunks",
                           "copy_chunk_mib": "{} MiB copy chunks",
                           "stage_blocks": "{} staging blocks"}


@dataclasses.dataclass(frozen=True, order=True)
class GroupKey:
    gpu: str
    strategy: str
    scenario: str
    transfer: str
    batch: int
    hidden: tuple[int, ...]
    gemm: str
    depth: int | None
    streams: int | None
    epochs: int
    other: tuple = ()
    epoch_launch: bool = False
    epoch_form: str = "per-batch"   # "kernel" | "kernel-per-chunk" | "graph" | "per-batch"
    workers: int | None = None     # the stream scenario's input pipeline; None elsewhere
    prefetch: int | None = None
    augment: str | None = None
    # Whether the run took its strategy's own launch form (config.launch_form auto, or a record
    # that predates the option) rather than one named by --launch-form. Not part of the
    # configuration's identity: a form run both ways is one configuration (the matrices never
    # run it twice); it decides which form stands for the strategy (variant_rank).
    own_form: bool = dataclasses.field(default=True, compare=False)
    # Whether the run took the step `--fused on` picks for its strategy (no --fused on its command
    # line, or `--fused on`) rather than one the user forced (`--fused single|lt|off`). Not part
    # of the identity either (config.step and config.fused are): zero-copy's own step is the
    # layer-by-layer one (config.fused false, with the reason), and a run forcing the
    # single-launch step is its variant (variant_rank).
    own_step: bool = dataclasses.field(default=True, compare=False)

    @property
    def hidden_label(self) -> str:
        return "x".join(str(h) for h in self.hidden)

    @property
    def variant_label(self) -> str:
        """Strategy name plus pipeline settings and the epoch launch where they apply."""
        label = self.strategy
        if self.depth is not None and self.streams is not None:
            label += f" (depth {self.depth}, {self.streams} copy stream" + \
                ("s)" if self.streams != 1 else ")")
        elif self.depth is not None:
            label += f" (depth {self.depth})"
        for name, value in self.custom_strategy_options():
            label += f" ({_STRATEGY_OPTION_LABELS[name].format(value)})"
        if self.epoch_form == "kernel":
            label += " (one launch per epoch)"
        elif self.epoch_form == "kernel-per-chunk":
            label += " (one launch per chunk)"
        elif self.epoch_form == "graph":
            label += " (one graph per epoch)"
        if self.workers is not None:
            label += f" ({self.workers} workers, {self.prefetch} slots, {self.augment})"
        if self.option("consumer") == "none":
            label += " (no consumer: the pipeline alone)"
        if (self.option("replicate") or 1) > 1:
            label += f" ({self.option('replicate')} copies of the set)"
        if self.option("device_budget_gib") is not None:
            label += f" (device budget {self.option('device_budget_gib'):g} GiB)"
        if self.option("gpus", 1) > 1:
            per = ", a process each" if self.option("processes") == "per-gpu" else ""
            label += f" ({self.option('gpus')} GPUs{per}, {self.option('reduce')} reduction)"
        elif self.option("emulate_gpus", 1) > 1:
            label += f" ({self.option('emulate_gpus')} shards emulated on one GPU)"
        placement = self.option("thread_placement")
        if placement is not None:
            label += f" ({THREAD_PLACEMENT_LABELS[placement]})"
        step = self.step
        if step is not None and step != DEFAULT_STEP:
            label += f" ({step} step)"
        return label

    def option(self, name: str, default: Any = None) -> Any:
        """The value of `name` among the other config fields (`other`), or `default`."""
        return dict(self.other).get(name, default)

    @property
    def step(self) -> str | None:
        """config.step: the MLP step the run took (None in records that predate it)."""
        return self.option("step")

    def custom_strategy_options(self) -> list[tuple[str, Any]]:
        """(name, value) of the strategy's own options it ran with other than the default."""
        return [(k, v) for k, v in self.other
                if k in STRATEGY_OPTION_DEFAULTS and v is not None
                and v != STRATEGY_OPTION_DEFAULTS[k]]

    def slice_key(self, ignoring: tuple[str, ...] = ()) -> tuple:
        """What must be equal for two groups to be compared in one figure: not the strategies'
        own options (variants of a strategy, see STRATEGY_OPTION_DEFAULTS), nor the step the
        run took (--fused on picks it per strategy: zero-copy reads its batches in place and
        takes the layer-by-layer step; compute_reference matches the step), nor the other
        options named in `ignoring`."""
        return (self.gpu, self.hidden, self.gemm, self.epochs,
                tuple((k, v) for k, v in self.other
                      if k not in STRATEGY_OPTION_DEFAULTS and k not in RUN_DECISIONS
                      and k not in ignoring))

    @property
    def data_as_loaded(self) -> bool:
        """Whether the run trained on the data set as loaded (one copy) with the whole device
        (no device budget)."""
        return (self.option("replicate") or 1) == 1 and self.option("device_budget_gib") is None


@dataclasses.dataclass
class Stat:
    """Pooled statistics of every steady epoch of every timing run (within-process jitter
    plus process-to-process spread mixed together: descriptive only, never an interval)."""
    median: float
    p25: float
    p75: float
    min: float
    max: float
    n: int


def pooled_stat(values: Sequence[float | None]) -> Stat | None:
    """Median/p25/p75/min/max of the non-null values; None when there are none."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    arr = np.asarray(vals, dtype=float)
    return Stat(median=float(np.median(arr)), p25=float(np.percentile(arr, 25)),
                p75=float(np.percentile(arr, 75)), min=float(arr.min()),
                max=float(arr.max()), n=len(vals))


def _median_or_none(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    if len(vals) == 1:                     # a process with one steady epoch, or one value
        return float(vals[0])
    return float(statistics.median(vals)) if vals else None


def steady_epochs(record: dict[str, Any]) -> list[dict[str, Any]]:
    eps = record["epochs"]
    return eps[1:] if len(eps) > 1 else eps


def process_median(record: dict[str, Any], metric: str) -> float | None:
    """One process's value of `metric`: the median of its steady epochs (nulls dropped)."""
    return _median_or_none(ep.get(metric) for ep in steady_epochs(record))


def process_medians(records: Sequence[dict[str, Any]], metric: str) -> list[float | None]:
    """process_median of every record (the per-process values of one group and metric)."""
    return [process_median(r, metric) for r in records]


def profiled(record: dict[str, Any]) -> bool:
    """Whether the run had the CUPTI profiler on (memstrat's default when not recorded)."""
    return bool(record["config"].get("profile", True))


def api_count(calls: dict[str, int] | None, name: str) -> int | None:
    """Count of one API in an api_calls object; absent = 0, null object = None."""
    if calls is None:
        return None
    return int(calls.get(name, 0))


def reads_option(cfg: dict[str, Any], key: str) -> bool:
    """Whether the run's strategy reads its option `key` ("depth", "streams"). Newer records say
    so themselves, null where the strategy does not read it (they carry `prefetch_chunk_mib`,
    null or not); older ones carried every option for every strategy, and there only
    double-buffer read depth and copy streams."""
    if "prefetch_chunk_mib" in cfg:
        return cfg.get(key) is not None
    return cfg["strategy"] in PIPELINED_STRATEGIES


def group_key(record: dict[str, Any]) -> GroupKey:
    cfg = record["config"]
    env = record.get("env") or {}
    other = tuple((k, _freeze(cfg.get(k, _CONFIG_BEFORE_KEY.get(k)))) for k in _OTHER_CONFIG)
    # Augmentation on the GPU (config.augment_device) is its own configuration; host, the only
    # kind before the key existed, keeps the groups of older records.
    if cfg.get("augment_device") == "gpu":
        other += (("augment_device", "gpu"),)
    # The input pipeline alone (config.consumer none: no step took the batches) is its own
    # configuration; train, the only kind before the key existed, keeps the older groups.
    if cfg.get("consumer") == "none":
        other += (("consumer", "none"),)
    # Data-parallel training (config.gpus, emulate_gpus: the shards of a global batch; reduce:
    # how their gradients were combined) is its own configuration; one GPU, the only kind before
    # the keys existed, keeps the groups of older records.
    if (cfg.get("gpus") or 1) > 1 or (cfg.get("emulate_gpus") or 1) > 1:
        other += (("gpus", cfg.get("gpus") or 1), ("emulate_gpus", cfg.get("emulate_gpus") or 1),
                  ("reduce", cfg.get("reduce")))
    # One process per GPU under a launcher is its own configuration; one process, the only kind
    # before the key existed, keeps the groups of older records.
    if cfg.get("processes") == "per-gpu":
        other += (("processes", "per-gpu"),)
    # Threads placed by --thread-placement are their own configuration; os (the scheduler's), the
    # only kind before the key existed, keeps the groups of older records.
    if cfg.get("thread_placement") not in (None, "os"):
        other += (("thread_placement", cfg["thread_placement"]),)
    epoch_launch = bool(cfg.get("epoch_launch") or False)
    return GroupKey(
        gpu=str(env.get("gpu_name") or "unknown GPU"),
        strategy=cfg["strategy"], scenario=cfg["scenario"], transfer=cfg["transfer"],
        batch=int(cfg["batch"]), hidden=tuple(cfg["hidden"]), gemm=cfg["gemm"],
        depth=(cfg.get("depth") or DEFAULT_DEPTH) if reads_option(cfg, "depth") else None,
        streams=(cfg.get("streams") or DEFAULT_STREAMS) if reads_option(cfg, "streams") else None,
        epochs=int(cfg["epochs"]), other=other,
        epoch_launch=epoch_launch, epoch_form=epoch_form_of(cfg),
        own_form=cfg.get("launch_form") in (None, "auto"),
        own_step=fused_request(record) in (None, "on"),
        **({"workers": cfg.get("workers"), "prefetch": cfg.get("prefetch"),
            "augment": cfg.get("augment")} if cfg["scenario"] == "stream" else {}))


def fused_request(record: dict[str, Any]) -> str | None:
    """What the run's command line asked of --fused (`--fused X` or `--fused=X`), None where it
    asked nothing; a record without its argv: "off" where config.fused_off_reason says the
    configuration turned it off, else None."""
    argv = record.get("argv")
    if not isinstance(argv, list):
        cfg = record.get("config") or {}
        return "off" if cfg.get("fused_off_reason") == FUSED_OFF_BY_REQUEST else None
    asked = None
    for i, word in enumerate(argv):
        if word == "--fused" and i + 1 < len(argv):
            asked = str(argv[i + 1])
        elif isinstance(word, str) and word.startswith("--fused="):
            asked = word.partition("=")[2]
    return asked


def epoch_form_of(cfg: dict[str, Any]) -> str:
    """config.epoch_form, or what a record written before it existed ran."""
    form = cfg.get("epoch_form")
    if form:
        return str(form)
    return "kernel" if cfg.get("epoch_launch") else "per-batch"


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


@dataclasses.dataclass
class Group:
    key: GroupKey
    records: list[dict[str, Any]]          # every ok run of the configuration
    timing_records: list[dict[str, Any]]   # the runs timing comes from (profiler off if any)
    counter_records: list[dict[str, Any]]  # the profiled runs (CUPTI counters)
    epoch1: dict[str, float | None]        # metric -> median over processes of epoch 1
    pooled_wall: Stat | None               # every steady epoch of the timing runs, pooled
    malloc_setup: float | None             # cudaMalloc calls before epoch 1 (median)
    malloc_per_epoch: list[float | None]   # cudaMalloc calls per epoch (median)
    train_samples: int
    test_acc: float | None
    _stats: dict[str, Summary | None] = dataclasses.field(default_factory=dict, repr=False)
    _medians: dict[str, list[float | None]] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def runs(self) -> int:
        return len(self.records)

    @property
    def timing_profiled(self) -> bool:
        """True when the timing comes from profiled runs (there is no unprofiled run)."""
        return all(profiled(r) for r in self.timing_records)

    def records_for(self, metric: str) -> list[dict[str, Any]]:
        return self.counter_records if metric in COUNTER_METRICS else self.timing_records

    def process_medians(self, metric: str) -> list[float | None]:
        """Each process's steady median of `metric`, None where it is null, in the order of
        records_for(metric) (computed once per group and metric)."""
        if metric not in self._medians:
            self._medians[metric] = process_medians(self.records_for(metric), metric)
        return self._medians[metric]

    def process_values(self, metric: str) -> list[float]:
        """Each process's steady median of `metric` (processes where it is null dropped)."""
        return [v for v in self.process_medians(metric) if v is not None]

    def stat(self, metric: str) -> Summary | None:
        """Median over processes with its interval and spread (stats.summarize)."""
        if metric not in self._stats:
            self._stats[metric] = summarize(self.process_values(metric))
        return self._stats[metric]

    def median(self, metric: str) -> float | None:
        s = self.stat(metric)
        return s.median if s else None

    @property
    def n_processes(self) -> int:
        s = self.stat("wall_ms")
        return s.n if s else 0

    def epoch1_values(self, metric: str) -> list[float]:
        vals = (r["epochs"][0].get(metric) for r in self.records_for(metric))
        return [float(v) for v in vals if v is not None]

    @property
    def samples_per_s(self) -> float | None:
        w = self.median("wall_ms")
        return self.train_samples / (w / 1000.0) if w else None

    def samples_per_s_interval(self) -> Interval | None:
        """Throughput at the ends of the wall-time interval (None without an interval)."""
        s = self.stat("wall_ms")
        if s is None or s.ci is None or s.ci.low <= 0:
            return None
        return Interval(self.train_samples / (s.ci.high / 1000.0),
                        self.train_samples / (s.ci.low / 1000.0), s.ci.coverage, s.ci.method)


def aggregate(records: Iterable[dict[str, Any]]) -> list[Group]:
    """Group ok records by configuration and compute their statistics (sorted)."""
    buckets: dict[GroupKey, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("status") != "ok":
            continue
        buckets.setdefault(group_key(rec), []).append(rec)
    groups = [_make_group(k, recs) for k, recs in buckets.items()]
    groups.sort(key=lambda g: sort_key(g.key))
    return groups


def sort_key(key: GroupKey) -> tuple:
    order = (STRATEGY_ORDER.index(key.strategy) if key.strategy in STRATEGY_ORDER
             else len(STRATEGY_ORDER))
    return (key.gpu, key.hidden, key.gemm, key.epochs, str(key.other), key.scenario,
            key.transfer, key.batch, order, key.strategy, key.depth or 0, key.streams or 0,
            key.epoch_launch, key.epoch_form, key.augment or "", key.prefetch or 0,
            key.workers or 0)


def _make_group(key: GroupKey, recs: list[dict[str, Any]]) -> Group:
    unprofiled = [r for r in recs if not profiled(r)]
    timing = unprofiled or recs
    counters = [r for r in recs if profiled(r)]
    epoch1 = {m: _median_or_none(r["epochs"][0].get(m)
                                 for r in (counters if m in COUNTER_METRICS else timing))
              for m in EPOCH_METRICS}
    n_epochs = max(len(r["epochs"]) for r in recs)
    malloc_per_epoch = [
        _median_or_none(api_count(r["epochs"][i].get("api_calls"), "cudaMalloc")
                        for r in counters if i < len(r["epochs"]))
        for i in range(n_epochs)]
    malloc_setup = _median_or_none(
        api_count((r.get("setup") or {}).get("api_calls"), "cudaMalloc") for r in counters)
    samples = {((r["config"].get("dataset") or {}).get("train_samples")
                or DEFAULT_TRAIN_SAMPLES) for r in recs}
    test_acc = _median_or_none((r.get("final") or {}).get("test_acc") for r in recs)
    return Group(key=key, records=recs, timing_records=timing, counter_records=counters,
                 epoch1=epoch1,
                 pooled_wall=pooled_stat([ep.get("wall_ms") for r in timing
                                   for ep in steady_epochs(r)]),
                 malloc_setup=malloc_setup, malloc_per_epoch=malloc_per_epoch,
                 train_samples=int(max(samples)), test_acc=test_acc)


# --------------------------------------------------------------------------------------
# Selections used by plots and the report
# --------------------------------------------------------------------------------------
def slices(groups: Sequence[Group]) -> list[list[Group]]:
    """Partition groups into comparable sets (same GPU, hidden, gemm, epochs, options)."""
    out: dict[tuple, list[Group]] = {}
    for g in groups:
        out.setdefault(g.key.slice_key(), []).append(g)
    return list(out.values())


def representative(groups: Sequence[Group]) -> list[Group]:
    """One group per (strategy, scenario, transfer, batch): the strategy's own options at their
    defaults when run; for double-buffer the default variant (depth 2, 1 copy stream) when it
    was run, else the smallest depth/streams; the strategy's own launch form (config.launch_form
    auto) when run, else one launch per epoch where the strategy allows it."""
    best: dict[tuple, Group] = {}
    for g in groups:
        k = (g.key.strategy, g.key.scenario, g.key.transfer, g.key.batch)
        cur = best.get(k)
        if cur is None or variant_rank(g.key) < variant_rank(cur.key):
            best[k] = g
    return sorted(best.values(), key=lambda g: sort_key(g.key))


def variant_rank(key: GroupKey) -> tuple:
    """Lower first: the variants a figure shows first. The strategy's own options at their
    defaults and the step --fused on took (whatever it took: own_step); the default pipeline
    depth; the strategy's own launch form (a form named by --launch-form is a variant of it);
    then the smaller depth/streams and one launch per epoch. The first two entries are (0, 0) for a strategy at its defaults,
    whatever its launch form."""
    launch = 0 if key.epoch_launch else 1
    own = 0 if key.own_form else 1
    custom = len(key.custom_strategy_options()) + (0 if key.own_step else 1)
    if key.depth is None:
        return (custom, 0, own, 0, 0, launch)
    is_default = key.depth == DEFAULT_DEPTH and key.streams == DEFAULT_STREAMS
    return (custom, 0 if is_default else 1, own, key.depth, key.streams or 0, launch)


def reference_batch(groups: Sequence[Group]) -> int | None:
    """The batch size single-batch figures use: 256 if present, else the median size."""
    batches = sorted({g.key.batch for g in groups})
    if not batches:
        return None
    if 256 in batches:
        return 256
    return batches[(len(batches) - 1) // 2]


def present(groups: Sequence[Group], attr: str, order: Sequence[Any] = ()) -> list[Any]:
    vals = {getattr(g.key, attr) for g in groups}
    ordered = [v for v in order if v in vals]
    return ordered + sorted(v for v in vals if v not in ordered)


def strategies_in(groups: Sequence[Group]) -> list[str]:
    return present(groups, "strategy", STRATEGY_ORDER)


# --------------------------------------------------------------------------------------
# Compute-only reference, floors, overlap efficiency (docs/methodology.md)
# --------------------------------------------------------------------------------------
REFERENCE_STRATEGY = "resident"
# Launch forms (config.epoch_form), the axis orthogonal to the data path: how the host issues an
# epoch's steps. Words for tables.
LAUNCH_FORMS = {"per-batch": "one launch per batch", "graph": "one graph per epoch",
                "kernel-per-chunk": "one launch per chunk", "kernel": "one launch per epoch"}
LAUNCH_FORM_ORDER = ("per-batch", "graph", "kernel-per-chunk", "kernel")
# Which link bounds each strategy's transfer: the copy engines (the pinned-h2d primitive's bulk
# rate) or SM loads of mapped host memory (the sm-copy-mapped primitive's: its bus rate is
# below the copy engine's, a measured property of the path, not a defect).
COPY_ENGINE, SM_MAPPED = "copy-engine", "sm-mapped"
# How each strategy's bytes cross the host link in an epoch: whether that transfer can run
# while the compute stream works ("overlapping") or the compute waits for it ("serial"),
# what measures the bytes: an epoch field, or "dataset" (every byte of the training set;
# zero-copy kernels read the mapped host copy and no counter sees those reads), and the link.
TRANSFER_FORMS: dict[str, tuple[str, str, str]] = {
    "resident": ("serial", "h2d_bytes", COPY_ENGINE),   # refresh: whole-set upload first
    "pageable": ("serial", "h2d_bytes", COPY_ENGINE),
    "pinned": ("serial", "h2d_bytes", COPY_ENGINE),     # copies ordered on the compute stream
    "double-buffer": ("overlapping", "h2d_bytes", COPY_ENGINE),
    "zero-copy": ("overlapping", "dataset", SM_MAPPED),
    "um": ("serial", "um_htod_bytes", COPY_ENGINE),      # kernels wait on their own faults
    "um-prefetch": ("overlapping", "um_htod_bytes", COPY_ENGINE),
    "um-advise": ("overlapping", "um_htod_bytes", COPY_ENGINE),
    "pinned-graph": ("serial", "h2d_bytes", COPY_ENGINE),          # one copy per chunk
    "double-buffer-graph": ("overlapping", "h2d_bytes", COPY_ENGINE),
    "zero-copy-staged": ("overlapping", "h2d_bytes", SM_MAPPED),   # the staging kernels' bytes
    "um-prefetch-coarse": ("overlapping", "um_htod_bytes", COPY_ENGINE),
}
IMAGE_PIXELS = 28 * 28     # MNIST and Fashion-MNIST
LABEL_BYTES = 4            # int32 label per sample


@dataclasses.dataclass(frozen=True)
class LinkRates:
    """Measured bulk host-to-device rates in bytes/s, per link (None: not measured)."""
    copy_engine: float | None = None   # the pinned-h2d primitive's peak
    sm_mapped: float | None = None     # the sm-copy-mapped primitive's peak

    def of(self, link: str) -> float | None:
        return self.sm_mapped if link == SM_MAPPED else self.copy_engine


def link_rates(rates: "LinkRates | float | None") -> LinkRates:
    """A LinkRates from what callers pass: LinkRates, the pinned bulk rate alone, or None."""
    if isinstance(rates, LinkRates):
        return rates
    return LinkRates(copy_engine=rates)


BUDGET = ("device_budget_gib",)   # the data path's constraint, not the compute's


def compute_reference(groups: Sequence[Group], g: Group) -> Group | None:
    """The compute-only reference of `g`: `resident`, scenario static, at the SAME launch form
    (config.epoch_form; in one launch per chunk, with the same --copy-chunk) and with the same
    MLP step, on the same GPU, transfer, batch, hidden, GEMM, epochs and other options (the same
    copies of the set: --replicate) but the device budget, which constrains the data path
    only: resident with the whole device (no budget) is the reference of every budget; None
    when no such group was run. Time under it is what the
    launch form and the step cost with no byte moving; time above it is data movement."""
    chunked = g.key.epoch_form == "kernel-per-chunk"   # the same chunks: the same launches
    for r in groups:
        k = r.key
        if (k.strategy == REFERENCE_STRATEGY and k.epoch_form == g.key.epoch_form
                and k.scenario == "static" and k.option("device_budget_gib") is None
                and k.slice_key(ignoring=BUDGET) == g.key.slice_key(ignoring=BUDGET)
                and k.step == g.key.step
                and k.transfer == g.key.transfer and k.batch == g.key.batch
                and (not chunked or k.option("copy_chunk_mib") == g.key.option("copy_chunk_mib"))):
            return r
    return None


REFERENCE_MISSING = ("no compute-only reference (a resident run, static, at the same launch "
                     "form, step, transfer, batch, hidden and GEMM)")


def dataset_bytes(g: Group) -> int:
    """Bytes of the training set as the strategy holds it: pixels (1 B u8, 4 B f32) and
    labels."""
    per_pixel = 1 if g.key.transfer == "u8" else 4
    return g.train_samples * (IMAGE_PIXELS * per_pixel + LABEL_BYTES)


def bytes_per_epoch(g: Group) -> tuple[float | None, str | None]:
    """(bytes the strategy moves host->device in a steady epoch, why None when unknown)."""
    form = TRANSFER_FORMS.get(g.key.strategy)
    if form is None:
        return None, f"{g.key.strategy}: transfer form unknown to analysis/aggregate.py"
    source = form[1]
    if source == "dataset":
        return float(dataset_bytes(g)), None
    v = g.median(source)
    if v is None:
        return None, (f"{g.key.strategy}: {source} is null"
                      + (" (needs a profiled run)" if source in COUNTER_METRICS else ""))
    return v, None


@dataclasses.dataclass
class Floor:
    """Lower bounds on a configuration's steady GPU time per epoch, in ms, at its launch form."""
    compute_ms: float | None       # C: the reference's (resident, same form) median gpu_ms
    transfer_ms: float | None      # T: bytes per epoch / the bulk rate of its link
    form: str | None               # "overlapping" | "serial" | None (unknown strategy)
    floor_ms: float | None         # max(C, T) overlapping, C + T serial
    reasons: list[str]             # why a part is None
    link: str | None = None        # COPY_ENGINE | SM_MAPPED: whose rate T uses

    def gpu_ratio(self, g: "Group") -> float | None:
        """measured GPU time / floor: GPU time against a GPU floor, never wall against it."""
        gpu = g.median("gpu_ms")
        if gpu is None or self.floor_ms is None or self.floor_ms <= 0:
            return None
        return gpu / self.floor_ms


def floor_of(groups: Sequence[Group], g: Group, rates: "LinkRates | float | None") -> Floor:
    """The floors of `g` at its launch form; `rates` = the measured bulk rates (LinkRates, or
    the pinned bulk bytes/s alone, or None)."""
    rates = link_rates(rates)
    reasons: list[str] = []
    ref = compute_reference(groups, g)
    compute = ref.median("gpu_ms") if ref is not None else None
    if ref is None:
        reasons.append(REFERENCE_MISSING)
    form, _, link = TRANSFER_FORMS.get(g.key.strategy, (None, None, None))
    transfer = None
    bw = rates.of(link) if link else None
    if link is None:
        reasons.append(f"{g.key.strategy}: transfer form unknown to analysis/aggregate.py")
    elif bw is None or bw <= 0:
        reasons.append("no measured pinned bulk bandwidth given" if link != SM_MAPPED else
                       "no measured sm-copy-mapped bulk bandwidth given")
    else:
        nbytes, why = bytes_per_epoch(g)
        if why:
            reasons.append(why)
        else:
            transfer = nbytes / bw * 1000.0
    combined = None
    if compute is not None and transfer is not None and form is not None:
        combined = max(compute, transfer) if form == "overlapping" else compute + transfer
    return Floor(compute, transfer, form, combined, reasons, link)


def floors(groups: Sequence[Group], rates: "LinkRates | float | None") -> dict[GroupKey, Floor]:
    return {g.key: floor_of(groups, g, rates) for g in groups}


def data_movement(groups: Sequence[Group], g: Group, metric: str = "wall_ms") -> Effect | None:
    """The data-movement cost of `g`: its epoch minus the compute-only reference's (resident,
    static, the same launch form, step and batch), as a Hodges-Lehmann shift over processes
    with its Moses interval (stats.shift); `metric` wall_ms (wall with wall) or gpu_ms (GPU
    with GPU). None without a reference or with too few processes."""
    ref = compute_reference(groups, g)
    if ref is None:
        return None
    return shift(ref.process_values(metric), g.process_values(metric))


# Below this share of the longer part, the shorter part is within the noise of the measured
# time and (C + X - M) / min(C, X) would only amplify that noise.
MIN_SHORTER_SHARE = 0.05


def overlap_value(compute_only: float | None, copy_only: float | None,
                  measured: float | None) -> float | None:
    """(C + X - M) / min(C, X): the share of the shorter of compute and copy that was
    hidden. 1 = fully hidden (M = max(C, X)), 0 = serial (M = C + X); not clamped. None
    when a part is missing or the shorter part is under MIN_SHORTER_SHARE of the longer."""
    if compute_only is None or copy_only is None or measured is None:
        return None
    shorter, longer = sorted((compute_only, copy_only))
    if shorter <= 0 or shorter < MIN_SHORTER_SHARE * longer:
        return None
    return (compute_only + copy_only - measured) / shorter


@dataclasses.dataclass
class OverlapPoint:
    group: Group
    compute_only_ms: float | None   # C: reference median gpu_ms
    copy_only_ms: float | None      # X: the group's median copy_ms
    measured_ms: float | None       # M: the group's median gpu_ms
    efficiency: float | None
    process_efficiencies: list[float]   # each process's own X and M, the same C
    reason: str | None


def overlap_efficiency(groups: Sequence[Group]) -> list[OverlapPoint]:
    """One point per group that times copies of its own (copy_ms not null)."""
    points = []
    for g in groups:
        copy = g.median("copy_ms")
        if copy is None:
            continue
        ref = compute_reference(groups, g)
        compute = ref.median("gpu_ms") if ref is not None else None
        measured = g.median("gpu_ms")
        eff = overlap_value(compute, copy, measured)
        per_process = [overlap_value(compute, c, m) for c, m in
                       zip(g.process_medians("copy_ms"), g.process_medians("gpu_ms"))]
        reason = None
        if ref is None:
            reason = REFERENCE_MISSING
        elif eff is None:
            reason = (f"the shorter of compute-only and copy-only time is under "
                      f"{MIN_SHORTER_SHARE:.0%} of the longer (nothing measurable to hide)")
        points.append(OverlapPoint(g, compute, copy, measured, eff,
                                   [e for e in per_process if e is not None], reason))
    return points
