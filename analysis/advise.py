#!/usr/bin/env python3
"""Which memory strategy for YOUR model: the cost model applied to your step time and data.

    analysis/advise.py --step-us 180 --bytes-per-sample 3072 --samples 50000 --budget-gib 2 \\
        --primitives docs/results/nvidia-h200/records/primitives.jsonl

Inputs: the time of one training step with the batch already on the GPU (X µs: the compute-only
step, so the compute-only epoch is C = X x batches), the bytes of one sample's input (labels:
4 bytes more), the samples per epoch, the batch, the device memory the data may take, whether
the host rewrites the data every epoch (refresh) or not (static), and the transfer primitives of
the GPU (`memstrat primitives --json`, measured here when no file is given).

For every strategy analysis/cost_model.py has an entry for, it prints the predicted steady GPU
time per epoch (cost_model.predict: the ONE model, nothing of it is restated here), the data
movement cost (prediction - C) and its share of C; a strategy whose device footprint is larger
than the budget "does not fit". Then the recommendation: the fastest that fits, or, when others
are predicted within TIE_TOLERANCE of it, the simplest of those (SIMPLICITY), with one line of
why. docs/methodology.md, "Choosing a strategy for your model", says what it does not model;
analysis/advise_check.py compares the advice with a results set's measured winners.

With --gpus G >= 2 (data-parallel training, each GPU its own batch of --batch rows per step), the
terms are analysis/scaling_model.py's (the ONE several-GPU model): step(G) = X + transfer +
combine(G) from `memstrat primitives --gpus G` records, for the strategies it models (resident:
every GPU holds the whole set; pinned); the epoch is ⌈samples / (G x batch)⌉ steps of step(G)
(the trainer's ShardPlan). The gradient size is --parameters P, cut into ring buckets as one layer
of P floats (at most 4 MiB each): an approximation of the trainer's per-layer cut. Every other
strategy has "no several-GPU model". The recommendation follows the same rule (choose).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import cost_model as M  # noqa: E402
from analysis import scaling_model as SM  # noqa: E402
from analysis.aggregate import DEFAULT_DEPTH, LABEL_BYTES  # noqa: E402
from analysis.jsonl import read_jsonl  # noqa: E402
from analysis.primitives import PrimitiveTable  # noqa: E402
from analysis.records import RecordError  # noqa: E402
from analysis.stats import UNSTABLE_HALF_WIDTH  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BATCH = 256
GIB, MIB = 1 << 30, 1 << 20
# Two predictions closer than this are a tie. The project calls a measured median unstable when
# its 95% interval's half-width exceeds this share of it (stats.UNSTABLE_HALF_WIDTH): predictions
# closer than the spread a stable measurement still has could not be told apart by measuring
# them, and the model's own residuals are rarely smaller (docs/methodology.md, "Cost model").
TIE_TOLERANCE = UNSTABLE_HALF_WIDTH
# The step a user's own model takes: one kernel per layer, so zero-copy's reads of X per step
# are cost_model.X_READS[(USER_STEP, input)]: u8 normalised once into device memory, f32 read by
# the forward and the weight-gradient GEMM (the path the suite's zero-copy runs take as well).
USER_STEP = "layer-by-layer"
NOT_MODELLED = (
    "The model predicts data movement for a given step time. What a launch form saves (a whole "
    "epoch as one CUDA graph: pinned-graph; one launch per chunk of steps: double-buffer-graph, "
    "zero-copy-staged) is outside it: their prediction uses your per-batch step; measure your "
    "step at that form and pass it to see their gain. GPU time only: the host's own preparation "
    "of the data (the refresh rewrite, augmentation) comes on top.")
NO_PRIMITIVES_HINT = (
    "pass --primitives FILE: records of `memstrat primitives --json FILE` run on your GPU (or on "
    "one like it, e.g. docs/results/nvidia-h200/records/primitives.jsonl for an H200)")
GPUS_NOT_MODELLED = (
    "Several GPUs: analysis/scaling_model.py's weak scaling, each GPU its own batch: step(G) = "
    "your step + the batch's transfer at h2d-all's per-GPU rate (every GPU copying at once) + "
    "combine(G) from the measured NCCL curves, counted after the backward pass with no overlap "
    "(an upper bound on the step); the last, partial step counts as a full one. The gradients "
    "are --parameters floats cut as one layer: the trainer's per-layer cut makes at least one "
    "bucket per layer, so a model of many small layers pays more per-collective latency than "
    "shown. Only resident and pinned have a several-GPU model.")

# Ties go to the simplest strategy: what a user has to write and keep right, simplest first.
SIMPLICITY: tuple[tuple[str, str], ...] = (
    ("resident", "one device allocation and one upload; a batch is a pointer offset"),
    ("um", "one cudaMallocManaged allocation and no copy code"),
    ("pageable", "one device batch buffer and a cudaMemcpy per batch"),
    ("pinned", "pinned host memory and a cudaMemcpyAsync per batch on the compute stream"),
    ("zero-copy", "mapped pinned host memory that the kernels read in place"),
    ("um-prefetch", "managed memory and a prefetch per batch on a side stream, with events"),
    ("um-advise", "um-prefetch plus cudaMemAdvise hints"),
    ("double-buffer", "K device batch buffers, copy stream(s), events handing batches over"),
    ("um-prefetch-coarse", "um-prefetch in chunks of whole batches, skipping resident ranges"),
    ("pinned-graph", "a packed host layout, chunked copies, the epoch captured as a CUDA graph"),
    ("double-buffer-graph", "a packed layout, a ring of chunk slots on copy streams, one launch "
                            "per chunk of steps"),
    ("zero-copy-staged", "a packed mapped layout, an SM staging kernel beside the step, a ring "
                         "of chunk slots"),
)
SIMPLICITY_RANK = {name: i for i, (name, _) in enumerate(SIMPLICITY)}


class AdviceError(Exception):
    """Bad input or no primitives: one line for the user, exit 2."""


# ---- device footprints ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Footprint:
    """The device memory a strategy's data takes (its buffers; the model's own are the user's)."""
    what: str
    nbytes: Callable[[M.Shape], int]


def data_set(s: M.Shape) -> int:
    return s.samples * (s.image_bytes_per_sample + LABEL_BYTES)


def one_batch(s: M.Shape) -> int:
    return M.images_and_labels(min(s.batch, s.samples), s)


def chunk_slot(s: M.Shape) -> int:
    """ChunkPlan::packed_slot_bytes: room for the first (largest) chunk of packed blocks."""
    return M.packed_chunk(min(s.batches_per_chunk(M.COPY_CHUNKS) * s.batch, s.samples), s)


def chunk_ring(s: M.Shape) -> int:
    """SlotRing::allocate: min(depth, chunks) chunk slots."""
    return min(DEFAULT_DEPTH, len(s.units(M.COPY_CHUNKS))) * chunk_slot(s)


# What each strategy allocates on the device in attach(), from memory_strategies/*.cpp, at the
# registry's defaults (registry.cpp: --depth 2, --copy-chunk 8 MiB unless --copy-chunk is given).
WHOLE_SET = "the data set"
FOOTPRINTS: dict[str, Footprint] = {
    "resident": Footprint(WHOLE_SET + " (resident.cpp)", data_set),
    # managed.cpp, check_managed_fits: the suite never oversubscribes managed memory
    **{name: Footprint(WHOLE_SET + ", managed (managed.cpp)", data_set)
       for name in ("um", "um-prefetch", "um-advise", "um-prefetch-coarse")},
    "pageable": Footprint("one batch buffer (copy_on_compute.cpp)", one_batch),
    "pinned": Footprint("one batch buffer (copy_on_compute.cpp)", one_batch),
    "double-buffer": Footprint(f"{DEFAULT_DEPTH} batch buffers (double_buffer.cpp, --depth)",
                               lambda s: DEFAULT_DEPTH * one_batch(s)),
    "zero-copy": Footprint("none: the kernels read mapped host memory (zero_copy.cpp)",
                           lambda s: 0),
    "pinned-graph": Footprint("one packed chunk slot (pinned_graph.cpp, --copy-chunk)",
                              chunk_slot),
    "double-buffer-graph": Footprint(f"{DEFAULT_DEPTH} packed chunk slots (slot_ring.cpp, "
                                     "--depth, --copy-chunk)", chunk_ring),
    "zero-copy-staged": Footprint(f"{DEFAULT_DEPTH} packed chunk slots (slot_ring.cpp, "
                                  "--depth, --copy-chunk)", chunk_ring),
}


# ---- the procedure ----------------------------------------------------------------------------

def user_shape(samples: int, batch: int, bytes_per_sample: int, input_kind: str,
               copy_chunk_mib: int = M.DEFAULT_COPY_CHUNK_MIB,
               prefetch_chunk_mib: int = M.DEFAULT_PREFETCH_CHUNK_MIB) -> M.Shape:
    return M.Shape(samples, batch, input_kind, USER_STEP, prefetch_chunk_mib, copy_chunk_mib,
                   bytes_per_sample)


@dataclasses.dataclass(frozen=True)
class Option:
    """One strategy for the user's shape: its prediction (or why none) and whether it fits."""
    strategy: str
    prediction: M.Prediction | None
    no_model: str | None
    device_bytes: int
    footprint: str
    fits: bool
    moved_bytes: int | None

    @property
    def usable(self) -> bool:
        return self.prediction is not None and self.fits

    @property
    def predicted_ms(self) -> float | None:
        return self.prediction.gpu_ms if self.prediction else None

    @property
    def movement_ms(self) -> float | None:
        return self.prediction.gpu_ms - self.prediction.compute_ms if self.prediction else None


@dataclasses.dataclass(frozen=True)
class Advice:
    shape: M.Shape
    scenario: str
    compute_ms: float
    budget_bytes: float | None       # None: no limit
    options: tuple[Option, ...]      # fitting by prediction, then not fitting, then no model
    recommended: Option | None
    tied: tuple[Option, ...]         # every fitting option within TIE_TOLERANCE of the fastest

    @property
    def is_tie(self) -> bool:
        return len(self.tied) > 1


def option(strategy: str, scenario: str, shape: M.Shape, compute_ms: float,
           table: PrimitiveTable, budget_bytes: float | None,
           epoch_form: str | None = None) -> Option:
    fp = FOOTPRINTS[strategy]
    need = fp.nbytes(shape)
    try:
        pred = M.predict(strategy, scenario, shape, compute_ms, table, epoch_form)
        why, moved = None, M.bytes_moved(pred.semantics, shape)
    except M.NoModel as e:
        pred, why, moved = None, str(e), None
    return Option(strategy, pred, why, need, fp.what,
                  budget_bytes is None or need <= budget_bytes, moved)


def choose(options: Iterable[Option]) -> tuple[Option | None, tuple[Option, ...]]:
    """(recommended, tied): the fastest fitting option, or the simplest of those predicted within
    TIE_TOLERANCE of it."""
    usable = sorted((o for o in options if o.usable),
                    key=lambda o: (o.predicted_ms, SIMPLICITY_RANK[o.strategy]))
    if not usable:
        return None, ()
    limit = usable[0].predicted_ms * (1.0 + TIE_TOLERANCE)
    tied = tuple(o for o in usable if o.predicted_ms <= limit)
    return min(tied, key=lambda o: SIMPLICITY_RANK[o.strategy]), tied


def advise(shape: M.Shape, scenario: str, compute_ms: float, table: PrimitiveTable,
           budget_bytes: float | None = None, strategies: Iterable[str] | None = None,
           epoch_form: str | None = None) -> Advice:
    """Every strategy of `strategies` (default: every one the model has an entry for), run at
    `epoch_form` (None: each entry as written; cost_model.at_form)."""
    names = list(strategies) if strategies is not None else list(M.MODELS)
    opts = [option(n, scenario, shape, compute_ms, table, budget_bytes, epoch_form)
            for n in names]
    opts.sort(key=lambda o: (not o.usable, o.prediction is None,
                             o.predicted_ms if o.usable else 0.0, SIMPLICITY_RANK[o.strategy]))
    recommended, tied = choose(opts)
    return Advice(shape, scenario, compute_ms, budget_bytes, tuple(opts), recommended, tied)


def why(o: Option) -> str:
    """One line: what the recommended strategy moves, through what, and what it costs."""
    p = o.prediction
    sem = p.semantics
    c = M.fmt_ms(p.compute_ms)
    if not o.moved_bytes:
        return f"{sem.assumption} = {c} ms (nothing moves in a steady epoch)"
    prims = ", ".join(sorted({m.primitive for m in sem.per_unit + sem.per_epoch}))
    moves = f"transfers of {o.moved_bytes / 1e6:.1f} MB/epoch ({prims}) take " \
            f"{M.fmt_ms(p.transfer_ms)} ms"
    if sem.form == M.OVERLAP:
        return f"{moves}, overlapped with {c} ms of compute: {M.fmt_ms(o.movement_ms)} ms exposed"
    return f"{moves} on the compute stream, added to {c} ms of compute"


# ---- several GPUs: analysis/scaling_model.py's terms ------------------------------------------

def global_steps(samples: int, batch: int, gpus: int) -> int:
    """The steps of an epoch on `gpus` GPUs of `batch` rows each (ShardPlan::global_batches:
    ⌈samples / (gpus x batch)⌉); one GPU: Shape.batches."""
    return -(-samples // (gpus * batch))


def parameter_layers(parameters: int) -> list[int]:
    """Layer sizes for scaling_model whose one layer holds `parameters` floats (parameters - 1
    weights into one unit, and its bias): bucket_floats and combine_us then cut the gradients
    as the trainer cuts one layer, into buckets of at most 4 MiB of floats. A stand-in for the
    user's own layers, which the trainer never merges into one bucket."""
    if parameters < 2:
        raise ValueError(f"--parameters {parameters}: at least 2")
    return [parameters - 1, 1]


def parameter_buckets(parameters: int) -> list[int]:
    """The ring buckets (floats each, in reduction order) of `parameters` floats cut as one
    layer: scaling_model.bucket_floats of parameter_layers."""
    return SM.bucket_floats(parameter_layers(parameters))


def pinned_transfer_us(shape: M.Shape, c: dict[str, SM.Curve]) -> float:
    """scaling_model.transfer_us's pinned term (one batch's images and labels on h2d-all's
    per-GPU curve) at the user's bytes per sample: transfer_us itself ships an MNIST image."""
    SM.need(c, "h2d-all")
    return c["h2d-all"].time_us(one_batch(shape))


@dataclasses.dataclass(frozen=True)
class GpusOption:
    """One strategy on several GPUs: scaling_model's terms per step (None: no several-GPU model,
    `no_model` says why), the epoch and whether one GPU's footprint fits the budget. `usable`
    and `predicted_ms` make it an option choose() ranks."""
    strategy: str
    terms: dict[str, float] | None   # step_us, transfer_us, combine_us, step_n_us, efficiency
    epoch_ms: float | None
    no_model: str | None
    device_bytes: int | None
    footprint: str | None
    fits: bool

    @property
    def usable(self) -> bool:
        return self.terms is not None and self.fits

    @property
    def predicted_ms(self) -> float | None:
        return self.epoch_ms


@dataclasses.dataclass(frozen=True)
class GpusAdvice:
    shape: M.Shape
    scenario: str
    gpus: int
    parameters: int
    reduce: str
    step_us: float
    budget_bytes: float | None       # per GPU; None: no limit
    options: tuple[GpusOption, ...]  # fitting by prediction, then not fitting, then no model
    recommended: GpusOption | None
    tied: tuple[GpusOption, ...]

    @property
    def steps(self) -> int:
        return global_steps(self.shape.samples, self.shape.batch, self.gpus)

    @property
    def compute_ms(self) -> float:
        """Every GPU's compute-only epoch: steps x X."""
        return self.steps * self.step_us / 1e3

    @property
    def is_tie(self) -> bool:
        return len(self.tied) > 1


def gpus_option(strategy: str, scenario: str, shape: M.Shape, step_us: float, gpus: int,
                parameters: int, reduce: str, c: dict[str, SM.Curve],
                budget_bytes: float | None) -> GpusOption:
    """`strategy` on `gpus` GPUs; AdviceError with scaling_model's message where the primitives
    lack a curve the terms need."""
    if strategy not in SM.STRATEGIES:
        return GpusOption(strategy, None, None, "analysis/scaling_model.py models "
                          f"{' and '.join(SM.STRATEGIES)} only", None, None, False)
    if strategy == "resident" and scenario == "refresh":
        return GpusOption(strategy, None, None, "refresh uploads the set to every GPU each "
                          "epoch; scaling_model counts no transfer for resident", None, None,
                          False)
    fp = FOOTPRINTS[strategy]
    need = fp.nbytes(shape)
    try:
        move = pinned_transfer_us(shape, c) if strategy == "pinned" else 0.0
        comb = SM.combine_us(parameter_layers(parameters), gpus, reduce, c)
    except KeyError as e:
        raise AdviceError(e.args[0]) from None
    total = step_us + move + comb
    terms = {"step_us": step_us, "transfer_us": move, "combine_us": comb, "step_n_us": total,
             "efficiency": step_us / total}
    return GpusOption(strategy, terms, global_steps(shape.samples, shape.batch, gpus) * total
                      / 1e3, None, need, fp.what + ", on every GPU",
                      budget_bytes is None or need <= budget_bytes)


def advise_gpus(shape: M.Shape, scenario: str, step_us: float, gpus: int, parameters: int,
                reduce: str, c: dict[str, SM.Curve], budget_bytes: float | None = None,
                strategies: Iterable[str] | None = None) -> GpusAdvice:
    """Every strategy of `strategies` (default: every one the one-GPU model has an entry for) on
    `gpus` GPUs (scaling_model's terms, `c`: its curves at `gpus`), the budget per GPU, and the
    recommendation by the one-GPU rule (choose)."""
    names = list(strategies) if strategies is not None else list(M.MODELS)
    opts = [gpus_option(n, scenario, shape, step_us, gpus, parameters, reduce, c, budget_bytes)
            for n in names]
    opts.sort(key=lambda o: (not o.usable, o.terms is None,
                             o.epoch_ms if o.usable else 0.0, SIMPLICITY_RANK[o.strategy]))
    recommended, tied = choose(opts)  # type: ignore[arg-type]
    return GpusAdvice(shape, scenario, gpus, parameters, reduce, step_us, budget_bytes,
                      tuple(opts), recommended, tied)  # type: ignore[arg-type]


def why_gpus(a: GpusAdvice, o: GpusOption) -> str:
    """One line: the recommended strategy's terms per step."""
    t = o.terms
    comb = (f"{len(parameter_buckets(a.parameters))} all-reduce(s)" if a.reduce == "ring"
            else "one all-gather")
    moved = f"{one_batch(a.shape):,} B at h2d-all's per-GPU rate" if t["transfer_us"] \
        else "nothing moves"
    return (f"step({a.gpus}) = {t['step_us']:.4g} µs + transfer {t['transfer_us']:.4g} µs "
            f"({moved}) + combine {t['combine_us']:.4g} µs ({comb}) = {t['step_n_us']:.4g} µs; "
            f"efficiency {t['efficiency']:.3f}; {a.steps} steps")


# ---- primitives -------------------------------------------------------------------------------

def load_table(files: Sequence[str]) -> tuple[PrimitiveTable, str]:
    """(table, GPU name) of primitive record files of one GPU; AdviceError otherwise."""
    try:
        tables = PrimitiveTable.load_all(files)
    except RecordError as e:
        raise AdviceError(str(e)) from None
    if len(tables) > 1:
        raise AdviceError(f"primitive records of several GPUs ({', '.join(tables)}): pass the "
                          "files of one GPU, the one you will train on or one like it")
    gpu, table = next(iter(tables.items()))
    return table, gpu


def find_memstrat(explicit: str | None) -> str:
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise AdviceError(f"--memstrat {explicit}: no such executable; {NO_PRIMITIVES_HINT}")
        return explicit
    built = REPO / "build" / "memstrat"
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    found = shutil.which("memstrat")
    if found is None:
        raise AdviceError(f"no memstrat found (--memstrat, {built}, PATH) to measure the "
                          f"transfer primitives; {NO_PRIMITIVES_HINT}")
    return found


def run_primitives(memstrat: str, out: Path, extra: Sequence[str] = (),
                   env: dict[str, str] | None = None, shown: str = "") -> None:
    """Run `memstrat primitives --json OUT EXTRA...` (with `env`; `shown` is printed before the
    command, e.g. the environment it sets); AdviceError when it fails or writes nothing."""
    cmd = [memstrat, "primitives", "--json", str(out), *extra]
    print(f"measuring the transfer primitives: {shown}{' '.join(cmd)}", file=sys.stderr)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise AdviceError(f"cannot run {memstrat}: {e.strerror}; {NO_PRIMITIVES_HINT}") \
            from None
    if res.returncode != 0 or not out.is_file():
        said = (res.stderr.strip() or res.stdout.strip() or "no message").splitlines()[-1]
        raise AdviceError(f"`{memstrat} primitives` failed (exit {res.returncode}: {said}); "
                          f"{NO_PRIMITIVES_HINT}")


def measure_primitives(memstrat: str) -> tuple[PrimitiveTable, str]:
    """Run `memstrat primitives --json` on this machine's GPU and load what it wrote."""
    with tempfile.TemporaryDirectory(prefix="advise-") as tmp:
        out = Path(tmp) / "primitives.jsonl"
        run_primitives(memstrat, out)
        return load_table([str(out)])


def gpus_patterns(reduce: str) -> list[str]:
    """The `memstrat primitives --gpus G` patterns scaling_model's terms read at `reduce`."""
    return ["h2d-all", "nccl-all-reduce" if reduce == "ring" else "nccl-all-gather"]


def load_gpus_curves(files: Sequence[str], gpus: int) -> tuple[dict[str, SM.Curve], str]:
    """(scaling_model.curves at `gpus`, "GPU name xG") of `memstrat primitives --gpus G` record
    files; AdviceError for unreadable files or records of several GPU models."""
    try:
        recs = [r for f in files for _, r in read_jsonl(f) if isinstance(r, dict)]
    except RecordError as e:
        raise AdviceError(str(e)) from None
    names = sorted({str((r.get("env") or {}).get("gpu_name")) for r in recs
                    if r.get("record") == "multi-gpu-primitive"
                    and (r.get("config") or {}).get("gpus") == gpus})
    if len(names) > 1:
        raise AdviceError(f"--gpus {gpus} primitive records of several GPUs ({', '.join(names)})"
                          ": pass the files of one machine, the one you will train on or one "
                          "like it")
    try:
        c = SM.curves(recs, gpus)
    except (KeyError, TypeError, ValueError) as e:
        raise AdviceError(f"--gpus {gpus} primitive records scaling_model cannot read: "
                          f"{e!r}") from None
    return c, f"{names[0]} x{gpus}" if names else f"{gpus} GPUs"


def measure_gpus_primitives(memstrat: str, gpus: int, reduce: str
                            ) -> tuple[dict[str, SM.Curve], str]:
    """Run `memstrat primitives --gpus G -p <what the terms read>` on this machine's GPUs, with
    NVLink multicast off (NCCL_NVLS_ENABLE=0, as memstrat's several-GPU runs need) unless the
    environment says otherwise, and load what it wrote."""
    env = dict(os.environ)
    shown = "" if "NCCL_NVLS_ENABLE" in env else "NCCL_NVLS_ENABLE=0 "
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    with tempfile.TemporaryDirectory(prefix="advise-") as tmp:
        out = Path(tmp) / "primitives.jsonl"
        run_primitives(memstrat, out, ["--gpus", str(gpus), "-p", ",".join(gpus_patterns(reduce))],
                       env, shown)
        return load_gpus_curves([str(out)], gpus)


# ---- outputs ----------------------------------------------------------------------------------

def mib(nbytes: float) -> str:
    return f"{nbytes / MIB:,.1f} MiB"


def text_lines(a: Advice, gpu: str) -> list[str]:
    s = a.shape
    budget = "no limit" if a.budget_bytes is None else mib(a.budget_bytes)
    lines = [f"{s.samples} samples x {s.image_bytes_per_sample} B ({s.transfer}) + "
             f"{LABEL_BYTES} B label, batch {s.batch} ({s.batches} batches), {a.scenario}, "
             f"device budget {budget}, primitives of {gpu}",
             f"compute-only epoch C = {s.batches} batches x {a.compute_ms / s.batches * 1e3:.4g} "
             f"µs = {M.fmt_ms(a.compute_ms)} ms", "",
             f"{'strategy':<20} {'predicted ms':>12} {'movement ms':>12} {'of C':>7}  "
             "device memory for data"]
    for o in a.options:
        if o.usable:
            lines.append(f"{o.strategy:<20} {M.fmt_ms(o.predicted_ms):>12} "
                         f"{M.fmt_ms(o.movement_ms):>12} {o.movement_ms / a.compute_ms:>7.1%}  "
                         f"{mib(o.device_bytes)}: {o.footprint}")
        elif o.prediction is not None:
            lines.append(f"{o.strategy:<20} does not fit: needs {mib(o.device_bytes)} "
                         f"({o.footprint}), the budget is {budget}")
        else:
            lines.append(f"{o.strategy:<20} no model: {o.no_model}")
    r = a.recommended
    return lines + recommendation_lines(
        r, r and r.predicted_ms, a.tied if a.is_tie else (), r and why(r),
        "no strategy with a prediction fits the budget", NOT_MODELLED)


def recommendation_lines(r: Any, epoch_ms: float | None, tied: Sequence[Any],
                         why_text: str | None, none_text: str, not_modelled: str) -> list[str]:
    """The text's closing lines: the recommendation (or why none), its tie and why, the
    simplicity order and what the model leaves out."""
    lines = [""]
    if r is None:
        lines.append(f"no recommendation: {none_text}")
    else:
        lines.append(f"recommended: {r.strategy} ({M.fmt_ms(epoch_ms)} ms per epoch)")
        if tied:
            others = [o.strategy for o in tied if o is not r]
            lines.append(f"  tie: {r.strategy} and {', '.join(others)} are predicted within "
                         f"{TIE_TOLERANCE:.0%} of the fastest; {r.strategy} is the simplest")
        lines.append(f"  why: {why_text}")
    return lines + ["", "simplicity order (a tie goes to the first): "
                    + " < ".join(n for n, _ in SIMPLICITY), not_modelled]


def as_json(a: Advice, gpu: str, inputs: dict[str, Any]) -> dict[str, Any]:
    def opt(o: Option) -> dict[str, Any]:
        return {"strategy": o.strategy, "predicted_ms": o.predicted_ms,
                "data_movement_ms": o.movement_ms,
                "data_movement_of_c": o.movement_ms / a.compute_ms if o.prediction else None,
                "transfer_ms": o.prediction.transfer_ms if o.prediction else None,
                "form": o.prediction.semantics.form if o.prediction else None,
                "moved_bytes": o.moved_bytes, "fits": o.fits, "device_bytes": o.device_bytes,
                "footprint": o.footprint, "no_model": o.no_model,
                "simplicity": SIMPLICITY_RANK[o.strategy]}
    r = a.recommended
    return {"inputs": inputs, "gpu": gpu, "compute_ms": a.compute_ms,
            "batches": a.shape.batches, "tie_tolerance": TIE_TOLERANCE,
            "strategies": [opt(o) for o in a.options],
            "recommendation": None if r is None else {
                "strategy": r.strategy, "predicted_ms": r.predicted_ms,
                "tie": [o.strategy for o in a.tied] if a.is_tie else [], "why": why(r)},
            "simplicity_order": [n for n, _ in SIMPLICITY], "not_modelled": NOT_MODELLED}


def gpus_text_lines(a: GpusAdvice, gpu: str) -> list[str]:
    """The several-GPU table: each strategy's epoch and its terms per step, or why none."""
    s = a.shape
    budget = "no limit" if a.budget_bytes is None else mib(a.budget_bytes) + " per GPU"
    buckets = parameter_buckets(a.parameters)
    comb = (f"{len(buckets)} all-reduce(s), one per bucket of at most {mib(4 * buckets[0])} "
            "(cut as one layer)" if a.reduce == "ring"
            else f"one all-gather of {a.gpus} x {a.parameters} floats")
    lines = [f"{s.samples} samples x {s.image_bytes_per_sample} B ({s.transfer}) + "
             f"{LABEL_BYTES} B label over {a.gpus} GPUs, batch {s.batch} per GPU ({a.steps} "
             f"steps), {a.scenario}, device budget {budget}, primitives of {gpu}",
             f"gradients: {a.parameters} parameters, --reduce {a.reduce}: {comb}",
             f"compute-only epoch C = {a.steps} steps x {a.step_us:.4g} µs = "
             f"{M.fmt_ms(a.compute_ms)} ms", "",
             f"{'strategy':<20} {'predicted ms':>12} {f'step({a.gpus}) µs':>11} "
             f"{'transfer µs':>11} {'combine µs':>11} {'effic.':>6}  device memory per GPU"]
    for o in a.options:
        if o.terms is None:
            lines.append(f"{o.strategy:<20} no several-GPU model: {o.no_model}")
        elif o.fits:
            t = o.terms
            lines.append(f"{o.strategy:<20} {M.fmt_ms(o.epoch_ms):>12} {t['step_n_us']:>11.4g} "
                         f"{t['transfer_us']:>11.4g} {t['combine_us']:>11.4g} "
                         f"{t['efficiency']:>6.3f}  {mib(o.device_bytes)}: {o.footprint}")
        else:
            lines.append(f"{o.strategy:<20} does not fit: needs {mib(o.device_bytes)} "
                         f"({o.footprint}), the budget is {budget}")
    r = a.recommended
    return lines + recommendation_lines(
        r, r and r.epoch_ms, a.tied if a.is_tie else (), r and why_gpus(a, r),
        "no strategy with a several-GPU prediction fits the budget", GPUS_NOT_MODELLED)


def gpus_json(a: GpusAdvice, gpu: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """as_json's object for several GPUs, with scaling_model's terms per strategy."""
    def opt(o: GpusOption) -> dict[str, Any]:
        t = o.terms or {}
        return {"strategy": o.strategy, "predicted_ms": o.epoch_ms,
                **{k: t.get(k) for k in ("step_n_us", "transfer_us", "combine_us",
                                         "efficiency")},
                "fits": o.fits, "device_bytes": o.device_bytes, "footprint": o.footprint,
                "no_model": o.no_model, "simplicity": SIMPLICITY_RANK[o.strategy]}
    r = a.recommended
    return {"inputs": inputs, "gpu": gpu, "gpus": a.gpus, "parameters": a.parameters,
            "reduce": a.reduce, "buckets": parameter_buckets(a.parameters),
            "step_us": a.step_us, "compute_ms": a.compute_ms, "batches": a.steps,
            "tie_tolerance": TIE_TOLERANCE, "strategies": [opt(o) for o in a.options],
            "recommendation": None if r is None else {
                "strategy": r.strategy, "predicted_ms": r.epoch_ms,
                "tie": [o.strategy for o in a.tied] if a.is_tie else [], "why": why_gpus(a, r)},
            "simplicity_order": [n for n, _ in SIMPLICITY], "not_modelled": GPUS_NOT_MODELLED}


# ---- command line -----------------------------------------------------------------------------

class OneLineParser(argparse.ArgumentParser):
    """Bad input: one line on stderr and exit 2 (argparse prints the usage too)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(v) or v <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
        return v
    parse.__name__ = kind.__name__
    return parse


def parser() -> OneLineParser:
    ap = OneLineParser(
        prog="advise.py",
        description="\n\n".join(textwrap.fill(t, 78) for t in (
            "Recommend a memory strategy for your model: each strategy's steady epoch predicted "
            "by analysis/cost_model.py from your compute-only step time, your data and the "
            "GPU's transfer primitives; the fastest that fits your device budget, or the "
            f"simplest of those predicted within {TIE_TOLERANCE:.0%} of it.", NOT_MODELLED)),
        epilog="example:\n  analysis/advise.py --step-us 180 --bytes-per-sample 3072 --samples "
               "50000 --budget-gib 2 \\\n      --primitives "
               "docs/results/nvidia-h200/records/primitives.jsonl\n\n" + textwrap.fill(
                   "A batch larger than --samples is one batch of every sample, as memstrat "
                   "runs it. Without --primitives, `memstrat primitives` is run on this "
                   "machine's GPU (build/memstrat or --memstrat).", 78) + "\n\n"
               "several GPUs:\n  analysis/advise.py --step-us 180 --bytes-per-sample 3072 "
               "--samples 50000 --budget-gib 2 \\\n      --gpus 2 --parameters 203530 "
               "--primitives results/primitives_x2.jsonl\n\n" + textwrap.fill(
                   "With --gpus G >= 2 the epoch is analysis/scaling_model.py's: ⌈samples / "
                   "(G x batch)⌉ steps of step(G) = X + transfer + combine(G), for resident (the "
                   "whole set on every GPU, so it must fit the budget of each) and pinned; the "
                   "other strategies have no several-GPU model. --primitives then holds records "
                   "of `memstrat primitives --gpus G` (h2d-all and nccl-all-reduce, or "
                   "nccl-all-gather for --reduce exact); without it they are measured now, "
                   "with NCCL_NVLS_ENABLE=0 unless it is set.", 78),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--step-us", type=positive(float), metavar="X", required=True,
                    help="your training step in µs with the batch already on the GPU (the "
                         "compute-only step); C = X x batches")
    ap.add_argument("--bytes-per-sample", type=positive(int), metavar="Y", required=True,
                    help="bytes of one sample's input as stored and shipped (labels: 4 B more)")
    ap.add_argument("--samples", type=positive(int), metavar="N", required=True,
                    help="samples per epoch")
    ap.add_argument("--budget-gib", type=positive(float), metavar="W", required=True,
                    help="device memory (GiB) the data may take beside your model")
    ap.add_argument("--batch", type=positive(int), default=DEFAULT_BATCH, metavar="B",
                    help=f"rows per step (default {DEFAULT_BATCH})")
    ap.add_argument("--scenario", choices=("static", "refresh"), default="static",
                    help="static: the data set does not change between epochs (default); "
                         "refresh: the host rewrites/augments it every epoch")
    ap.add_argument("--input", choices=("u8", "f32"), default="f32",
                    help="how samples are stored and shipped: u8 is normalised once on the GPU, "
                         "f32 is read by the forward and the weight-gradient GEMM (zero-copy's "
                         "reads per step, cost_model.X_READS); default f32")
    ap.add_argument("--copy-chunk", type=positive(int), default=M.DEFAULT_COPY_CHUNK_MIB,
                    metavar="MIB", help="MiB per copy of the graph and staged forms (default "
                                        f"{M.DEFAULT_COPY_CHUNK_MIB}, memstrat's --copy-chunk)")
    ap.add_argument("--prefetch-chunk", type=positive(int), default=M.DEFAULT_PREFETCH_CHUNK_MIB,
                    metavar="MIB", help="MiB per prefetch of um-prefetch-coarse (default "
                                        f"{M.DEFAULT_PREFETCH_CHUNK_MIB})")
    ap.add_argument("--primitives", action="append", metavar="FILE",
                    help="records of `memstrat primitives --json` of one GPU (with --gpus G: "
                         "of `memstrat primitives --gpus G --json`; repeat for more files); "
                         "default: measure them now with memstrat")
    ap.add_argument("--memstrat", metavar="PATH",
                    help="the memstrat binary that measures the primitives (default: "
                         "build/memstrat in the repository, else memstrat on PATH)")
    ap.add_argument("--gpus", type=positive(int), default=1, metavar="G",
                    help="GPUs of data-parallel training, each with its own --batch rows per "
                         "step (default 1); G >= 2 needs --parameters and predicts resident and "
                         "pinned only, from analysis/scaling_model.py")
    ap.add_argument("--parameters", type=positive(int), metavar="P",
                    help="your model's trainable parameters (floats), the gradients the GPUs "
                         "combine; required with --gpus >= 2. They are cut into ring buckets "
                         "of at most 4 MiB as if one layer: an approximation of the trainer's "
                         "cut, which never merges layers (more, smaller buckets)")
    ap.add_argument("--reduce", choices=("ring", "exact"), default="ring",
                    help="with --gpus >= 2: ring, one all-reduce per gradient bucket (default), "
                         "or exact, one all-gather of G x P floats (memstrat train's --reduce)")
    ap.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    return ap


INPUTS = ("step_us", "bytes_per_sample", "samples", "budget_gib", "batch", "scenario", "input",
          "copy_chunk", "prefetch_chunk", "primitives")
GPUS_INPUTS = INPUTS + ("gpus", "parameters", "reduce")


def main_gpus(args: argparse.Namespace) -> int:
    """--gpus G >= 2: scaling_model's terms for every strategy it models."""
    try:
        c, gpu = (load_gpus_curves(args.primitives, args.gpus) if args.primitives
                  else measure_gpus_primitives(find_memstrat(args.memstrat), args.gpus,
                                               args.reduce))
        shape = user_shape(args.samples, args.batch, args.bytes_per_sample, args.input,
                           args.copy_chunk, args.prefetch_chunk)
        a = advise_gpus(shape, args.scenario, args.step_us, args.gpus, args.parameters,
                        args.reduce, c, args.budget_gib * GIB)
    except AdviceError as e:
        print(f"advise.py: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        inputs = {k: getattr(args, k) for k in GPUS_INPUTS}
        print(json.dumps(gpus_json(a, gpu, inputs), indent=1))
    else:
        print("\n".join(gpus_text_lines(a, gpu)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.gpus >= 2:
        if args.parameters is None:
            ap.error(f"--gpus {args.gpus} needs --parameters P: your model's trainable "
                     "parameter count, the gradients the GPUs combine every step")
        if args.parameters < 2:
            ap.error(f"argument --parameters: {args.parameters} must be >= 2")
        return main_gpus(args)
    try:
        table, gpu = (load_table(args.primitives) if args.primitives
                      else measure_primitives(find_memstrat(args.memstrat)))
    except AdviceError as e:
        print(f"advise.py: error: {e}", file=sys.stderr)
        return 2
    shape = user_shape(args.samples, args.batch, args.bytes_per_sample, args.input,
                       args.copy_chunk, args.prefetch_chunk)
    a = advise(shape, args.scenario, args.step_us * shape.batches / 1e3, table,
               args.budget_gib * GIB)
    if args.json:
        inputs = {k: getattr(args, k) for k in INPUTS}
        print(json.dumps(as_json(a, gpu, inputs), indent=1))
    else:
        print("\n".join(text_lines(a, gpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
