#!/usr/bin/env python3
"""Each strategy's steady epoch predicted from the transfer primitives and the compute-only epoch.

    analysis/cost_model.py results/full --primitives results/primitives.jsonl --out reports/model

Prints, per configuration (strategy x scenario x transfer x batch ...), the predicted and the
measured GPU time and wall time per epoch, the residual (measured - predicted) / measured, and
flags every |residual| over 25% as unexplained. With --out it writes ``cost_model.csv`` and
``cost_model_parity.png`` (predicted vs measured, log-log).

The model, every assumption it makes and what it leaves out are written once, in
docs/methodology.md, "Cost model"; this file implements that section (C: the compute-only
reference of analysis/aggregate.py; primitive costs: analysis/primitives.PrimitiveTable).
What each strategy moves, in which calls, through which primitive, serial or overlapped with
compute, is DATA: the ``MODELS`` table below, the one place to add a strategy. A strategy
without an entry gets "no model" with the reason, never a guess.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.aggregate import (IMAGE_PIXELS, LABEL_BYTES, REFERENCE_MISSING,  # noqa: E402
                                Group, aggregate, compute_reference)
from analysis.primitives import PrimitiveTable  # noqa: E402
from analysis.records import RecordError, load_records, ok_records  # noqa: E402
from analysis.stats import Summary, median_with_interval  # noqa: E402
from analysis.summary_csv import csv_value  # noqa: E402

UNEXPLAINED = 0.25            # |residual| above this: the model does not explain the time
DEFAULT_PREFETCH_CHUNK_MIB = 8   # um-prefetch-coarse's --prefetch-chunk default (registry.cpp)
DEFAULT_COPY_CHUNK_MIB = 8       # the graph forms' --copy-chunk default (registry.cpp)
PIXEL_BYTES = {"u8": 1, "f32": 4}
PACKED_ALIGN = 16             # the packed layout's alignment (batch_geometry.h, PackedLayout)
# The kernel the in-kernel costs subtract the launch of: sm-copy-mapped and um-fault-h2d time
# this copy kernel around its launch; in a strategy the step's own kernels do the reading.
LAUNCH_PRIMITIVE = "sm-copy-mapped"
SERIAL, OVERLAP = "serial", "overlap"


class NoModel(Exception):
    """The model cannot predict this configuration; str() says why."""


# ---- the shape of an epoch --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Shape:
    """What one configuration's epoch looks like to the model."""
    samples: int                 # training samples per epoch
    batch: int
    transfer: str                # "u8" | "f32"
    step: str | None = None      # config.step: which training-step path ran (None: not recorded)
    prefetch_chunk_mib: int = DEFAULT_PREFETCH_CHUNK_MIB
    # None: records written before --copy-chunk, when the graph forms copied one batch per copy
    copy_chunk_mib: int | None = DEFAULT_COPY_CHUNK_MIB
    # Input bytes per sample of another model's data (analysis/advise.py); None: an MNIST image,
    # IMAGE_PIXELS at the transfer's bytes per pixel
    input_bytes_per_sample: int | None = None

    @property
    def image_bytes_per_sample(self) -> int:
        if self.input_bytes_per_sample is not None:
            return self.input_bytes_per_sample
        return IMAGE_PIXELS * PIXEL_BYTES[self.transfer]

    @property
    def batches(self) -> int:
        return -(-self.samples // self.batch)

    def batch_rows(self) -> list[int]:
        """Rows of every batch (the last one may be partial)."""
        return [min(self.batch, self.samples - b * self.batch) for b in range(self.batches)]

    def batches_per_chunk(self, chunks: Chunks) -> int:
        """Whole batches per chunk: as many as fit in the chunk option's MiB, at least one, at
        most the epoch (memory_strategies/chunk_plan.cpp, ChunkPlan)."""
        mib = getattr(self, chunks.option)
        if mib is None:
            return 1
        full = chunks.batch_bytes(min(self.batch, self.samples), self)
        return max(1, min((mib << 20) // full, self.batches))

    def units(self, chunks: Chunks | None) -> list[tuple[int, int]]:
        """(rows, batches) of every unit of work: each batch (chunks None), or each chunk of
        whole batches."""
        rows = self.batch_rows()
        if chunks is None:
            return [(r, 1) for r in rows]
        per = self.batches_per_chunk(chunks)
        return [(sum(rows[i:i + per]), len(rows[i:i + per])) for i in range(0, len(rows), per)]


def images(rows: int, s: Shape) -> int:
    return rows * s.image_bytes_per_sample


def labels(rows: int, _s: Shape) -> int:
    return rows * LABEL_BYTES


def images_and_labels(rows: int, s: Shape) -> int:
    return images(rows, s) + labels(rows, s)


def packed_block(rows: int, s: Shape) -> int:
    """One packed block: images, padded to 16 bytes, then labels (PackedLayout::block_bytes)."""
    return -(-images(rows, s) // PACKED_ALIGN) * PACKED_ALIGN + labels(rows, s)


def packed_stride(rows: int, s: Shape) -> int:
    """A block of `rows` rounded up to 16 bytes: the distance between consecutive blocks."""
    return -(-packed_block(rows, s) // PACKED_ALIGN) * PACKED_ALIGN


def packed_chunk(rows: int, s: Shape) -> int:
    """One copy of the consecutive packed blocks that hold `rows` rows in whole batches (only
    the epoch's last batch is partial): every block but the last at the block stride, so the
    copy also moves the tail padding of all but the last block (ChunkPlan::packed_chunk)."""
    full, rest = divmod(rows, s.batch)
    if rest == 0:
        return (full - 1) * packed_stride(s.batch, s) + packed_block(s.batch, s)
    return full * packed_stride(s.batch, s) + packed_block(rest, s)


# Reads of a batch's images from mapped host memory per training step, by (config.step,
# transfer). u8 on the layer-by-layer and cuBLASLt paths: normalize_u8 reads each byte once and
# writes floats to device memory. f32 there: the forward GEMM (X.W1) and the weight-gradient
# GEMM (X^T.dZ1) each read X. Single-launch: phase A (forward) and phase C (gW1) read X,
# normalising u8 on load. Assumed: each of those kernels reads X once (as if its tiles shared X
# through the cache); more reads would show as a positive residual.
X_READS = {("layer-by-layer", "u8"): 1, ("cublaslt-fused", "u8"): 1,
           ("layer-by-layer", "f32"): 2, ("cublaslt-fused", "f32"): 2,
           ("single-launch", "u8"): 2, ("single-launch", "f32"): 2}


def x_reads(s: Shape) -> int:
    if s.step is None:
        raise NoModel("config.step not recorded (records predate it): how often the step "
                      "reads X from mapped memory is unknown")
    if (s.step, s.transfer) not in X_READS:
        raise NoModel(f"reads of X per step unknown for step {s.step!r} ({s.transfer}); "
                      "add it to X_READS")
    return X_READS[(s.step, s.transfer)]


# ---- the semantics table ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Move:
    """`count` calls of `primitive` per unit of work, each moving `nbytes(rows, shape)` bytes.

    in_kernel: the bytes are moved by the training step's own kernels (zero-copy reads, page
    faults), whose launches the compute-only epoch already pays, so each call costs the
    primitive's time minus the copy kernel's fixed cost (launch), and at least its bytes at the
    primitive's peak bandwidth. Otherwise a call costs the primitive's measured time.
    """
    primitive: str
    what: str
    nbytes: Callable[[int, Shape], int]
    count: Callable[[Shape], int] = lambda s: 1
    in_kernel: bool = False


@dataclasses.dataclass(frozen=True)
class Chunks:
    """Units of whole batches as ChunkPlan cuts them: as many as fit in `option` MiB (a Shape
    field, from the record's config key of that name), a full batch taking `batch_bytes(rows,
    shape)` bytes in the layout the strategy chunks."""
    option: str
    batch_bytes: Callable[[int, Shape], int]


# um-prefetch-coarse: the split layout (ChunkPlan::split), a batch is its images and labels.
PREFETCH_CHUNKS = Chunks("prefetch_chunk_mib", images_and_labels)
# pinned-graph, double-buffer-graph, zero-copy-staged: the packed layout (ChunkPlan::packed), a
# batch is a block stride.
COPY_CHUNKS = Chunks("copy_chunk_mib", packed_stride)


def two_calls(primitive: str) -> tuple[Move, ...]:
    """The split layout: one call for the images, one for the labels."""
    return (Move(primitive, "images", images), Move(primitive, "labels", labels))


@dataclasses.dataclass(frozen=True)
class Semantics:
    """How a strategy moves data in a steady epoch of one scenario.

    form: SERIAL (the compute stream waits for every transfer: C + all transfers) or OVERLAP
    (unit u+1's transfers run while unit u computes: the first unit's transfers, then per unit
    max(its step, the next unit's transfers)). per_unit: the transfers of each unit of work (a
    batch, or with `chunks` a chunk of whole batches). per_epoch: transfers before the first
    batch, serial, with the epoch's rows.
    """
    form: str
    per_unit: tuple[Move, ...] = ()
    per_epoch: tuple[Move, ...] = ()
    chunks: Chunks | None = None
    assumption: str = ""

    @property
    def unit(self) -> str:
        return "batch" if self.chunks is None else "chunk"


@dataclasses.dataclass(frozen=True)
class StrategyModel:
    static: Semantics
    refresh: Semantics

    def of(self, scenario: str) -> Semantics:
        if scenario not in ("static", "refresh"):
            raise NoModel(f"scenario {scenario!r} is not modelled")
        return getattr(self, scenario)


def both(sem: Semantics) -> StrategyModel:
    """The same movement in static and refresh (the strategy moves every byte every epoch)."""
    return StrategyModel(sem, sem)


NOTHING_MOVES = Semantics(SERIAL, assumption="nothing moves in a steady epoch: C")
PREFETCH_RESIDENT = Semantics(OVERLAP, two_calls("um-prefetch-resident"),
                              assumption="pages stay resident: each prefetch call costs what "
                                         "it costs when nothing moves")
PREFETCH_H2D = Semantics(OVERLAP, two_calls("um-prefetch-h2d"),
                         assumption="the host rewrite moved every page back: each prefetch "
                                    "migrates its batch")

# One entry per strategy: the only place that says what a strategy moves (a form that moves the
# same bytes the same way goes in SAME_AS below instead).
MODELS: dict[str, StrategyModel] = {
    "resident": StrategyModel(
        NOTHING_MOVES,
        Semantics(SERIAL, per_epoch=two_calls("pinned-h2d"),
                  assumption="the rewritten epoch goes up in two bulk copies (images, labels) "
                             "before batch 0; the compute stream waits")),
    "pageable": both(Semantics(SERIAL, two_calls("pageable-h2d"),
                               assumption="staged copies on the compute stream")),
    "pinned": both(Semantics(SERIAL, two_calls("pinned-h2d"),
                             assumption="copies on the compute stream")),
    "double-buffer": both(Semantics(OVERLAP, two_calls("pinned-h2d"),
                                    assumption="batch b+1's copies run while b computes; depth "
                                               "and copy streams do not change the model")),
    "zero-copy": both(Semantics(
        SERIAL, (Move("sm-copy-mapped", "images, read X_READS[config.step] times per step",
                      images, count=x_reads, in_kernel=True),
                 Move("sm-copy-mapped", "labels, read once per step", labels, in_kernel=True)),
        assumption="the step's kernels read mapped memory in place, at the SM copy's "
                   "bandwidth, on the compute stream")),
    "um": StrategyModel(
        Semantics(SERIAL, assumption="pages migrated in epoch 1 and stay: C"),
        Semantics(SERIAL, (Move("um-fault-h2d", "batch (images + labels)", images_and_labels,
                                in_kernel=True),),
                  assumption="the step's kernels fault each batch's pages in, serially")),
    "um-prefetch": StrategyModel(PREFETCH_RESIDENT, PREFETCH_H2D),
    "um-advise": StrategyModel(PREFETCH_RESIDENT, PREFETCH_H2D),
    "zero-copy-staged": both(Semantics(
        OVERLAP, (Move("sm-copy-mapped", "chunk of packed blocks", packed_chunk),),
        chunks=COPY_CHUNKS,
        assumption="one SM copy kernel per chunk of whole packed batches (config.copy_chunk_mib "
                   "MiB, default 8) while the previous chunk computes; depth and staging blocks "
                   "are not in the model; each chunk's steps are one launch (C: the kernel form) "
                   "with the single-launch step, the whole epoch one CUDA graph with another")),
    "pinned-graph": both(Semantics(
        SERIAL, (Move("pinned-h2d", "chunk of packed blocks", packed_chunk),), chunks=COPY_CHUNKS,
        assumption="one copy per chunk of whole packed batches (config.copy_chunk_mib MiB, "
                   "default 8) on the compute stream, before the chunk's first step; the whole "
                   "epoch is one CUDA graph (the launch overhead it saves is not in the model)")),
    "double-buffer-graph": both(Semantics(
        OVERLAP, (Move("pinned-h2d", "chunk of packed blocks", packed_chunk),), chunks=COPY_CHUNKS,
        assumption="one copy per chunk of whole packed batches (config.copy_chunk_mib MiB, "
                   "default 8) on a copy stream while the previous chunk computes; depth and "
                   "copy streams are not in the model; each chunk's steps are one launch (C: the "
                   "kernel form) with the single-launch step, the whole epoch one CUDA graph "
                   "with another")),
    "um-prefetch-coarse": StrategyModel(
        Semantics(SERIAL, assumption="static epochs after the first issue no prefetch: C"),
        Semantics(OVERLAP, two_calls("um-prefetch-h2d"), chunks=PREFETCH_CHUNKS,
                  assumption="chunks of whole batches (config.prefetch_chunk_mib MiB, default 8); "
                             "chunk c+1 is prefetched while chunk c computes")),
}
# Forms that move the same bytes the same way as another strategy and differ only in how the
# step is launched, mapped to the entry they take (none today: the graph forms also copy whole
# chunks of packed batches). The launch overhead such a form saves is not in the model
# (docs/methodology.md, "Cost model"): its residual shows it.
SAME_AS: dict[str, str] = {}
MODELS.update({name: MODELS[naive] for name, naive in SAME_AS.items()})


def describe(sem: Semantics) -> str:
    """'overlap; per batch: pinned-h2d (images), pinned-h2d (labels)': the entry in words."""
    parts = [sem.form]
    for where, moves in ((f"per {sem.unit}", sem.per_unit), ("per epoch", sem.per_epoch)):
        if moves:
            parts.append(f"{where}: " + ", ".join(
                f"{m.primitive} ({m.what}{'; in-kernel' if m.in_kernel else ''})"
                for m in moves))
    if not sem.per_unit and not sem.per_epoch:
        parts.append("no transfer")
    return "; ".join(parts)


# ---- arithmetic -------------------------------------------------------------------------------

def serial_epoch(compute_ms: float, transfers_ms: Sequence[float]) -> float:
    """C + every transfer: the compute stream waits for each one."""
    return compute_ms + sum(transfers_ms)


def overlap_epoch(steps_ms: Sequence[float], transfers_ms: Sequence[float]) -> float:
    """Unit 0's transfers exposed, then per unit u: max(step u, transfers of unit u+1)."""
    if len(steps_ms) != len(transfers_ms):
        raise ValueError("overlap_epoch: one step and one transfer time per unit")
    if not steps_ms:
        return 0.0
    after = list(transfers_ms[1:]) + [0.0]
    return transfers_ms[0] + sum(max(s, t) for s, t in zip(steps_ms, after))


def _need(table: PrimitiveTable, primitive: str) -> None:
    curve = table.curves.get(primitive)
    if curve is None:
        raise NoModel(f"needs primitive {primitive}: no record of it")
    if curve.status != "ok" or not curve.points:
        raise NoModel(f"needs primitive {primitive}: {curve.status}"
                      + (f" ({curve.reason})" if curve.reason else ""))


def move_us(table: PrimitiveTable, move: Move, nbytes: float) -> float:
    """Time of ONE call of `move` moving `nbytes` bytes, in µs (interpolated, see Move)."""
    _need(table, move.primitive)
    t = table.time_us_at(move.primitive, nbytes)
    if not move.in_kernel:
        return t
    _need(table, LAUNCH_PRIMITIVE)
    at_peak = nbytes / (table.peak_gbps(move.primitive) * 1e3)
    return max(at_peak, t - table.fixed_cost_us(LAUNCH_PRIMITIVE))


def moves_ms(table: PrimitiveTable, moves: Sequence[Move], rows: int, shape: Shape) -> float:
    return sum(m.count(shape) * move_us(table, m, m.nbytes(rows, shape)) for m in moves) / 1e3


def bytes_moved(sem: Semantics, shape: Shape) -> int:
    """Bytes the entry moves over the host link in a steady epoch (a read counted each time)."""
    per_unit = sum(m.count(shape) * m.nbytes(rows, shape)
                   for rows, _ in shape.units(sem.chunks) for m in sem.per_unit)
    return per_unit + sum(m.count(shape) * m.nbytes(shape.samples, shape) for m in sem.per_epoch)


@dataclasses.dataclass(frozen=True)
class Prediction:
    gpu_ms: float        # the predicted steady GPU time per epoch
    compute_ms: float    # C
    transfer_ms: float   # every modelled transfer, summed (hidden or not)
    semantics: Semantics


def semantics_of(strategy: str, scenario: str) -> Semantics:
    """The strategy's entry for the scenario; NoModel when there is none."""
    if strategy not in MODELS:
        raise NoModel(f"no entry for {strategy} in analysis/cost_model.py MODELS (what it "
                      "moves is not known to the model)")
    return MODELS[strategy].of(scenario)


def at_form(sem: Semantics, epoch_form: str | None) -> Semantics:
    """The entry as a launch form runs it. The kernel form launches the epoch's steps ONCE, after
    acquiring every batch (acquire-ahead): the launch waits for every unit's transfers, so an
    overlapped entry's transfers all come first, serial (C + all transfers). Every other form
    (per-batch, kernel-per-chunk, the epoch graph, whose captured copies keep their streams and
    events) runs the entry as written."""
    if epoch_form != "kernel" or sem.form != OVERLAP:
        return sem
    return dataclasses.replace(
        sem, form=SERIAL,
        assumption=sem.assumption + "; the kernel form's one launch waits for every transfer: "
                                    "none overlaps a step")


def predict(strategy: str, scenario: str, shape: Shape, compute_ms: float,
            table: PrimitiveTable, epoch_form: str | None = None) -> Prediction:
    """The steady GPU ms per epoch of `strategy` run at `epoch_form` (None: as the entry is
    written, the per-batch form's); raises NoModel with the reason."""
    sem = at_form(semantics_of(strategy, scenario), epoch_form)
    units = shape.units(sem.chunks)
    steps = [compute_ms * n / shape.batches for _, n in units]
    per_unit = [moves_ms(table, sem.per_unit, rows, shape) for rows, _ in units]
    epoch = moves_ms(table, sem.per_epoch, shape.samples, shape)
    gpu = epoch + (serial_epoch(compute_ms, per_unit) if sem.form == SERIAL
                   else overlap_epoch(steps, per_unit))
    return Prediction(gpu, compute_ms, epoch + sum(per_unit), sem)


# ---- against the measurements -----------------------------------------------------------------

def residual(measured: float | None, predicted: float | None) -> float | None:
    """(measured - predicted) / measured; None when either is missing or measured is 0."""
    if measured is None or predicted is None or measured == 0:
        return None
    return (measured - predicted) / measured


def unexplained(res: float | None) -> bool:
    return res is not None and abs(res) > UNEXPLAINED


@dataclasses.dataclass
class Comparison:
    """One configuration: what the model predicts and what was measured."""
    group: Group
    prediction: Prediction | None
    reason: str | None            # why there is no prediction
    is_reference: bool            # the compute-only reference itself (prediction = C)
    gpu: Summary | None           # measured gpu_ms over processes
    wall: Summary | None          # measured wall_ms over processes
    host_ms: float | None         # measured host_ms (median over processes)

    @property
    def predicted_gpu_ms(self) -> float | None:
        return self.prediction.gpu_ms if self.prediction else None

    @property
    def predicted_wall_ms(self) -> float | None:
        """GPU prediction + the measured host_ms (the host's data preparation)."""
        if self.prediction is None or self.host_ms is None:
            return None
        return self.prediction.gpu_ms + self.host_ms

    @property
    def gpu_residual(self) -> float | None:
        return residual(self.gpu.median if self.gpu else None, self.predicted_gpu_ms)

    @property
    def wall_residual(self) -> float | None:
        return residual(self.wall.median if self.wall else None, self.predicted_wall_ms)

    @property
    def label(self) -> str:
        """'double-buffer d2c1 refresh/u8/b256': short enough for one console column."""
        k = self.group.key
        variant = k.strategy + (f" d{k.depth}c{k.streams}" if k.depth is not None else "") \
            + (" epoch-launch" if k.epoch_launch else "")
        return f"{variant} {k.scenario}/{k.transfer}/b{k.batch}"


def _one(g: Group, key: str, default: Any = None) -> Any:
    values = {(r["config"].get(key) if r["config"].get(key) is not None else default)
              for r in g.records}
    if len(values) > 1:
        raise NoModel(f"the runs of this configuration disagree on config.{key} "
                      f"({', '.join(sorted(map(str, values)))})")
    return values.pop()


def shape_of(g: Group) -> Shape:
    return Shape(g.train_samples, g.key.batch, g.key.transfer, _one(g, "step"),
                 int(_one(g, "prefetch_chunk_mib", DEFAULT_PREFETCH_CHUNK_MIB)),
                 _one(g, "copy_chunk_mib"))


def predict_group(groups: Sequence[Group], g: Group,
                  tables: dict[str, PrimitiveTable]) -> Prediction:
    """The prediction for one group, with C from its compute-only reference among `groups`
    and the primitives of its GPU; NoModel with the first reason it cannot be made."""
    semantics_of(g.key.strategy, g.key.scenario)
    if g.key.transfer not in PIXEL_BYTES:
        raise NoModel(f"transfer {g.key.transfer!r} is not modelled")
    if g.key.gpu not in tables:
        raise NoModel(f"no primitive records for {g.key.gpu}")
    ref = compute_reference(groups, g)
    compute = ref.median("gpu_ms") if ref is not None else None
    if compute is None:
        raise NoModel(REFERENCE_MISSING)
    return predict(g.key.strategy, g.key.scenario, shape_of(g), compute, tables[g.key.gpu],
                   g.key.epoch_form)


def compare(groups: Sequence[Group], tables: dict[str, PrimitiveTable]) -> list[Comparison]:
    """One Comparison per group; `tables` maps a GPU name to its primitives."""
    out = []
    for g in groups:
        pred, reason = None, None
        try:
            pred = predict_group(groups, g, tables)
        except NoModel as e:
            reason = str(e)
        out.append(Comparison(g, pred, reason, compute_reference(groups, g) is g,
                              g.stat("gpu_ms"), g.stat("wall_ms"), g.median("host_ms")))
    return out


# ---- outputs ----------------------------------------------------------------------------------

CSV_COLUMNS = (
    "gpu", "strategy", "scenario", "transfer", "batch", "hidden", "gemm", "depth",
    "copy_streams", "epoch_launch", "n_processes", "form", "compute_ms", "transfer_ms",
    "predicted_gpu_ms", "measured_gpu_ms", "gpu_ci_low", "gpu_ci_high", "gpu_unstable",
    "gpu_residual", "gpu_unexplained", "host_ms", "predicted_wall_ms", "measured_wall_ms",
    "wall_ci_low", "wall_ci_high", "wall_unstable", "wall_residual", "wall_unexplained",
    "reference", "no_model_reason")


def csv_row(c: Comparison) -> dict[str, Any]:
    k, p = c.group.key, c.prediction
    ci = lambda s, end: getattr(s.ci, end) if s and s.ci else None  # noqa: E731
    return {
        "gpu": k.gpu, "strategy": k.strategy, "scenario": k.scenario, "transfer": k.transfer,
        "batch": k.batch, "hidden": k.hidden_label, "gemm": k.gemm, "depth": k.depth,
        "copy_streams": k.streams, "epoch_launch": k.epoch_launch,
        "n_processes": c.group.n_processes, "form": p.semantics.form if p else None,
        "compute_ms": p.compute_ms if p else None, "transfer_ms": p.transfer_ms if p else None,
        "predicted_gpu_ms": c.predicted_gpu_ms, "measured_gpu_ms": c.gpu.median if c.gpu else None,
        "gpu_ci_low": ci(c.gpu, "low"), "gpu_ci_high": ci(c.gpu, "high"),
        "gpu_unstable": c.gpu.unstable if c.gpu else None, "gpu_residual": c.gpu_residual,
        "gpu_unexplained": unexplained(c.gpu_residual) if c.prediction else None,
        "host_ms": c.host_ms, "predicted_wall_ms": c.predicted_wall_ms,
        "measured_wall_ms": c.wall.median if c.wall else None,
        "wall_ci_low": ci(c.wall, "low"), "wall_ci_high": ci(c.wall, "high"),
        "wall_unstable": c.wall.unstable if c.wall else None, "wall_residual": c.wall_residual,
        "wall_unexplained": unexplained(c.wall_residual) if c.prediction else None,
        "reference": c.is_reference, "no_model_reason": c.reason,
    }


def write_csv(comparisons: Sequence[Comparison], path: str | Path) -> Path:
    """One row per configuration; empty cell = no value (no model, no interval ...)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for c in comparisons:
            row = csv_row(c)
            w.writerow([csv_value(row[col]) for col in CSV_COLUMNS])
    return path


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def fmt_residual(res: float | None) -> str:
    if res is None:
        return "-"
    return f"{res:+.0%}" + (" !" if unexplained(res) else "")


def table_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """The console table: one line per configuration, then the ones without a model."""
    head = (f"{'configuration':<40} {'form':<7} {'C':>7} {'pred GPU':>9} "
            f"{'measured GPU [interval] n':>38} {'resid':>7} {'pred wall':>9} "
            f"{'measured wall [interval] n':>38} {'resid':>7}")
    lines = [head, "-" * len(head)]
    for c in comparisons:
        if c.prediction is None:
            continue
        lines.append(f"{c.label + (' (C)' if c.is_reference else ''):<40} "
                     f"{c.prediction.semantics.form:<7} {fmt_ms(c.prediction.compute_ms):>7} "
                     f"{fmt_ms(c.predicted_gpu_ms):>9} {median_with_interval(c.gpu, fmt_ms):>38} "
                     f"{fmt_residual(c.gpu_residual):>7} {fmt_ms(c.predicted_wall_ms):>9} "
                     f"{median_with_interval(c.wall, fmt_ms):>38} {fmt_residual(c.wall_residual):>7}")
    lines.append(f"ms per epoch; residual = (measured - predicted) / measured, '!' = |residual| "
                 f"> {UNEXPLAINED:.0%} (unexplained); (C) = the compute-only "
                 "reference itself; wall prediction = GPU prediction + measured host_ms")
    for c in comparisons:
        if c.prediction is None:
            lines.append(f"no model: {c.label}: {c.reason}")
    return lines


def build(inputs: Sequence[str | Path], primitives: Sequence[str | Path],
          out: str | Path | None = None) -> dict[str, Any]:
    """Load, compare, and (with `out`) write cost_model.csv and cost_model_parity.png (with
    its SVG and PDF)."""
    from analysis.parity_plot import plot_parity  # matplotlib only when a figure is written
    records = ok_records(load_records(inputs))
    if not records:
        raise RecordError(", ".join(map(str, inputs)), "no record with status ok")
    comparisons = compare(aggregate(records), PrimitiveTable.load_all(primitives))
    res: dict[str, Any] = {"comparisons": comparisons, "csv": None, "plot": None}
    if out is not None:
        out = Path(out)
        res["csv"] = write_csv(comparisons, out / "cost_model.csv")
        res["plot"] = plot_parity(comparisons, out / "cost_model_parity.png", UNEXPLAINED)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="cost_model.py",
        description="Predict each configuration's steady epoch from the transfer primitives "
                    "and the compute-only epoch, beside the measurement (docs/methodology.md, "
                    "Cost model).",
        epilog="Example: analysis/cost_model.py results/full --primitives "
               "results/primitives.jsonl --out reports/model")
    ap.add_argument("inputs", nargs="+", help="results folders and/or run record files (.jsonl)")
    ap.add_argument("--primitives", required=True, action="append", metavar="FILE",
                    help="records of `memstrat primitives --json` (repeat for more files)")
    ap.add_argument("--out", help="folder for cost_model.csv and cost_model_parity.png")
    args = ap.parse_args(argv)
    try:
        res = build(args.inputs, args.primitives, args.out)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(table_lines(res["comparisons"])))
    if args.out:
        print(f"wrote {res['csv']}" + (f" and {res['plot']}" if res["plot"] else
                                       " (no parity plot: nothing predicted)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
