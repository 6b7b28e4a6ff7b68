#!/usr/bin/env python3
"""The JAX anchor of `memstrat train --gpus N --strategy resident --scenario static`, beside the
PyTorch DistributedDataParallel one (pytorch_ddp.py): data-parallel training of the same MLP on N
GPUs of one host, from one process.

    NCCL_NVLS_ENABLE=0 python3 experiments/baselines/jax_data_parallel.py --gpus 2 \\
        --epochs 21 --json results/jax_dp.jsonl

As memstrat (experiments/core/shard_plan.h, ddp_plan.py): a global batch is N x --batch rows of
the epoch's order, GPU r's shard its rows [r*B, (r+1)*B); the last global batch fills the shards
in order (full ones, at most one partial, the rest empty). The static scenario keeps ONE order for
every epoch (--init's order_epoch1.i32, else the splitmix64 shuffle of --seed). Every GPU holds
the whole data set (u8 pixels, normalised in the step as memstrat's float(pixel) / 255.0f;
--transfer f32: the normalised floats) and the rows of its own shards; each step gathers its
shard's rows on the GPU, as the DDP anchor does.

The epoch: one jax.jit of a jax.shard_map over a one-axis mesh of the N GPUs ("gpus"). Inside, a
lax.scan over the full global batches: each GPU's step takes the gradient of its shard's part of
the global batch's mean loss (its rows' softmax cross-entropy summed, x 1/R for a global batch of
R rows), and lax.psum sums the N gradients (XLA lowers it to an NCCL all-reduce); the SGD update
with momentum (v = mu*v + g; p -= lr*v, as memstrat and PyTorch) then runs on every GPU on equal
values, so the replicated parameters stay equal. The parameters enter the step cast to
"varying" over the mesh (lax.pcast), so the gradient is each GPU's own and the psum is the one
sum: left invariant, shard_map's own transpose would sum them already. A partial last global
batch runs once more in the same jit, its shards padded to B rows whose weight is 0. Parameters
and momentum are donated to each call. Matmuls at "highest" precision (no TF32). The epoch is
compiled ahead (jit(...).lower(...).compile(), its time in config.jax_data_parallel.compile_ms
and setup.ms), so epoch 1 holds first-run costs only (XLA makes its NCCL communicators then).

Timing: the host clock around the epoch's call, ending when its results are ready
(jax.block_until_ready); gpu_ms is that same time (JAX has no CUDA events). Epoch 1 apart, the
summary is the median of epochs 2..E. The loss curve (--loss-curve, CSV epoch,batch,loss) has one
line per global batch: its mean loss over its rows (the GPUs' parts summed in rank order). The
test set is evaluated on the first GPU.

--json appends one record (docs/schema/run_record.schema.json, schema 1), config.strategy
"jax-data-parallel-jit", config.framework "jax", with config.gpus, per_gpu_batch, global_batch,
jax_data_parallel, env.jax_version, env.jaxlib_version and env.nccl. Refuses to start unless
NCCL_NVLS_ENABLE=0. Exit codes: 0 ok, 1 run failed, 2 bad option (before jax is imported), 3 no
JAX, no GPU, or fewer GPUs than --gpus.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import math
import os
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_options  # noqa: E402
import baseline_record as br  # noqa: E402
import ddp_plan as dp  # noqa: E402
import pytorch_run as pr  # noqa: E402  (the epoch entry, exit codes; imports no torch)
from jax_gpu_resident import init_params  # noqa: E402  (imports no jax)
from memstrat_inputs import UsageError, normalize  # noqa: E402

PROG = "jax_data_parallel.py"
STRATEGY = "jax-data-parallel-jit"
AXIS = "gpus"  # the mesh's one axis
EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_NO_DEVICE = (pr.EXIT_OK, pr.EXIT_RUN_FAILED,
                                                        pr.EXIT_USAGE, pr.EXIT_NO_DEVICE)


class NoDevice(RuntimeError):
    """No JAX, no GPU, or fewer GPUs than asked: exit code 3."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, metavar="N",
                   help="GPUs 0..N-1 of those JAX sees, N >= 2 (default: every one)")
    baseline_options.add_data_parallel_run_options(p)
    return p


class Settings(baseline_options.Settings):
    """The checked options (no jax, no device): the shared ones against --init's static export,
    --gpus and NCCL_NVLS_ENABLE."""

    def __init__(self, a: argparse.Namespace, environ: Mapping[str, str] = os.environ):
        why = dp.anchor_refusal(a, environ)
        if why:
            raise UsageError(why)
        self.environ = dict(environ)
        super().__init__(a, ("static",))


def import_jax():
    try:
        import jax  # noqa: PLC0415  (only once the options are checked)
    except ImportError:
        raise NoDevice("JAX is not installed (pip install jax[cuda12]); this needs CUDA GPUs") \
            from None
    jax.config.update("jax_default_matmul_precision", "highest")
    return jax


def open_gpus(jax, wanted: int | None) -> list:
    """The first `wanted` GPUs JAX sees (every one when None); NoDevice when there are fewer
    than 2 or fewer than asked."""
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no CUDA backend: a CPU-only jaxlib, or no driver
        gpus = []
    if not gpus:
        raise NoDevice(f"jax sees no GPU ({jax.devices()}); this needs NVIDIA GPUs and a "
                       "jax with CUDA (pip install jax[cuda12])")
    if len(gpus) < 2:
        raise NoDevice(f"{len(gpus)} GPU visible to jax; this needs at least 2")
    n = len(gpus) if wanted is None else wanted
    if n > len(gpus):
        raise NoDevice(f"--gpus {n}, but only {len(gpus)} GPUs are visible to jax")
    return gpus[:n]


def nccl_version() -> str | None:
    """The version of the NCCL that jax's CUDA plugin loads: ncclGetVersion of the nvidia-nccl
    wheel's library (else of libnccl.so.2 on the loader's path), else the wheel's version."""
    paths = []
    try:
        import nvidia.nccl  # noqa: PLC0415  (the wheel jax[cuda] installs)
        paths += [os.path.join(p, "lib", "libnccl.so.2") for p in nvidia.nccl.__path__]
    except ImportError:
        pass
    for path in [*paths, "libnccl.so.2"]:
        try:
            lib = ctypes.CDLL(path)
            v = ctypes.c_int(0)
            if lib.ncclGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
                return dp.format_nccl_version(v.value)
        except (OSError, AttributeError):
            continue
    for dist in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


# ---------------------------------------------------------------------------------------------
# the epoch's layout: which rows each GPU takes (numpy, no jax)

class Layout:
    """Rows of the epoch's order per global batch and GPU: `full` [F, N, B] for the F global
    batches whose N shards hold B rows each; for a partial last global batch `last_rows` [N, B]
    (padded with row 0) and `last_weight` [N, B] (1/R for the R rows it holds, 0 for padding);
    `rows` the rows of each global batch."""

    def __init__(self, order: np.ndarray, batch: int, gpus: int):
        n, B, N = len(order), batch, gpus
        G, F = dp.global_batches(n, B, N), dp.full_global_batches(n, B, N)
        order = np.asarray(order, np.int32)
        self.full = order[:F * N * B].reshape(F, N, B)
        self.rows = np.array([dp.global_rows(n, B, N, g) for g in range(G)], np.float64)
        self.last_rows = self.last_weight = None
        if F < G:
            R = dp.global_rows(n, B, N, G - 1)
            self.last_rows = np.zeros((N, B), np.int32)
            self.last_weight = np.zeros((N, B), np.float32)
            for r in range(N):
                s = dp.shard(n, B, N, G - 1, r)
                self.last_rows[r, :s.rows] = order[s.first:s.first + s.rows]
                self.last_weight[r, :s.rows] = np.float32(1.0 / R)
        self.batch, self.gpus, self.global_batches = B, N, G


# ---------------------------------------------------------------------------------------------
# the step and the epoch

def to_varying(jax, tree):
    """tree cast from invariant to varying over the mesh axis (lax.pcast; lax.pvary in the JAX
    releases before pcast), so that a gradient with respect to it is this GPU's alone."""
    lax = jax.lax
    if hasattr(lax, "pcast"):
        return jax.tree.map(lambda t: lax.pcast(t, AXIS, to="varying"), tree)
    return lax.pvary(tree, AXIS)


def build(jax, mesh, batch: int, lr: float, mu: float, u8: bool, has_full: bool, has_last: bool):
    """(epoch, evaluate): epoch(params, vel, images, labels, full, *last) -> (params, vel, parts)
    is a jitted shard_map, parts [N, G] each GPU's part of each global batch's mean loss;
    evaluate(params, x, y) -> (mean loss, accuracy) a jitted function of one device's arrays."""
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    N = mesh.devices.size
    full_weight = np.float32(1.0 / (N * batch))  # a full global batch's 1/R

    def forward(params, x):
        h = x
        for l, (w, b) in enumerate(params):
            h = h @ w + b
            if l + 1 < len(params):
                h = jnp.maximum(h, 0.0)
        return h

    def xent(logits, y):
        return jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0]

    def part(params, x, y, weight):  # this GPU's part of the global batch's mean loss
        return jnp.sum(xent(forward(params, x), y) * weight)

    def step(params, vel, images, labels, rows, weight):
        x = images[rows]
        x = x.astype(jnp.float32) / jnp.float32(255.0) if u8 else x
        loss, g = jax.value_and_grad(part)(to_varying(jax, params), x, labels[rows], weight)
        g = lax.psum(g, AXIS)  # the all-reduce: the gradient of the global batch's mean loss
        vel = jax.tree.map(lambda v, gi: mu * v + gi, vel, g)
        params = jax.tree.map(lambda p, v: p - lr * v, params, vel)
        return params, vel, loss

    def epoch(params, vel, images, labels, full, *last):
        parts = jnp.zeros((0,), jnp.float32)
        if has_full:
            def body(carry, rows):  # rows [1, B]: this GPU's shard of one global batch
                p, v, loss = step(*carry, images, labels, rows[0], full_weight)
                return (p, v), loss
            (params, vel), parts = lax.scan(body, (params, vel), full)
        if has_last:
            rows, weight = last
            params, vel, loss = step(params, vel, images, labels, rows[0], weight[0])
            parts = jnp.append(parts, loss)
        return params, vel, parts[None, :]

    in_specs = (P(), P(), P(), P(), P(None, AXIS)) + ((P(AXIS), P(AXIS)) if has_last else ())
    sharded = jax.shard_map(epoch, mesh=mesh, in_specs=in_specs,
                            out_specs=(P(), P(), P(AXIS)))
    train_epoch = jax.jit(sharded, donate_argnums=(0, 1))

    @jax.jit
    def evaluate(params, x, y):
        logits = forward(params, x)
        return jnp.mean(xent(logits, y)), jnp.mean((jnp.argmax(logits, 1) == y).astype(jnp.float32))

    return train_epoch, evaluate


# ---------------------------------------------------------------------------------------------
# the run

def environment(jax, devices: Sequence, environ: Mapping[str, str]) -> dict:
    gpu = devices[0].platform == "gpu"
    env = br.common_environment("jax", "cuda" if gpu else "cpu")
    env["jax_version"] = jax.__version__
    try:
        env["jaxlib_version"] = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        import jaxlib  # noqa: PLC0415
        env["jaxlib_version"] = getattr(jaxlib, "__version__", "unknown")
    if gpu:
        dev = devices[0]
        env["gpu_name"] = getattr(dev, "device_kind", None)
        env["compute_capability"] = getattr(dev, "compute_capability", None)
        env["driver_version"] = br._driver_version()
        env["driver_release"] = br.driver_release(br._first_line("/proc/driver/nvidia/version"))
        env["nccl"] = {"version": nccl_version() or "unknown",
                       "settings": dp.nccl_settings(environ)}
    return env


def make_record(jax, s: Settings, argv: list[str], devices: Sequence, layout: Layout) -> dict:
    a, d, N, B = s.args, s.data, len(devices), s.batch
    gpu = devices[0].platform == "gpu"
    env = environment(jax, devices, s.environ)
    why = "JAX data parallel (XLA fuses as it likes)"
    return {
        "schema_version": pr.SCHEMA_VERSION, "run_id": br.make_run_id(),
        "started_at": br.iso_utc_now(), "status": "ok", "error": None, "argv": argv, "env": env,
        "config": {
            "strategy": STRATEGY, "framework": "jax", "scenario": "static",
            "transfer": a.transfer, "batch": B, "hidden": s.hidden, "epochs": a.epochs,
            "lr": s.lr, "momentum": s.momentum, "seed": s.seed, "gemm": "xla", "tf32": False,
            "graphs": False, "fused": False, "fused_off_reason": why, "step": "layer-by-layer",
            "single_launch_off_reason": why, "epoch_launch": False,
            "epoch_launch_off_reason": why, "depth": None, "streams": None, "advise": None,
            "profile": False, "run_tag": a.run_tag, "device": "cuda" if gpu else "cpu",
            "eager": False, "train_acc_in_loop": False, "step_form": "jit-scan",
            "gpus": N, "per_gpu_batch": B, "global_batch": N * B, "reduce": "ring",
            "jax_data_parallel": {
                "api": "jax.shard_map", "collective": "lax.psum", "mesh_axis": AXIS,
                "params": "replicated, cast to varying for the gradient",
                "data": "replicated: every GPU holds the whole set and gathers its shard's rows",
                "last_batch": "masked" if layout.last_rows is not None else "none",
                "loss": "each GPU: its rows' cross-entropy summed x 1/R (R: the global batch's "
                        "rows), gradients psum'd",
                "donate": True, "matmul_precision": "highest", "compile_ms": None,
                "xla_flags": s.environ.get("XLA_FLAGS"),
                "xla_python_client_preallocate": s.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
                "xla_python_client_mem_fraction":
                    s.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")},
            "init": str(Path(a.init).resolve()) if a.init else None,
            "order": s.order_source,
            "dataset": {"name": d.name, "path": d.source, "train_samples": len(d.train_y),
                        "test_samples": len(d.test_y)}},
        "epochs": [], "api_totals": None}


def train(s: Settings, argv: list[str], devices: Sequence, out=None, err=None
          ) -> tuple[int, dict]:
    """One run on `devices` (the GPUs; the tests pass CPU devices): the exit code and the
    record, appended to --json."""
    out, err = out or sys.stdout, err or sys.stderr
    jax = import_jax()
    jnp = jax.numpy
    a, d, N, B = s.args, s.data, len(devices), s.batch
    n = len(d.train_y)
    layout = Layout(s.order, B, N)
    rec = make_record(jax, s, argv, devices, layout)
    env = rec["env"]
    for w in s.warnings:
        print(f"{PROG}: warning: " + w, file=err)
    if not a.quiet:
        print(f"{PROG}: {STRATEGY} | {a.transfer} | batch {B} | hidden "
              f"{','.join(map(str, s.hidden))} | {a.epochs} epochs | "
              f"{env['gpu_name'] or devices[0].platform} | jax {jax.__version__} | {n} train, "
              f"{len(d.test_y)} test from {d.source} | {N} GPUs, global batch {N * B}, "
              f"shard_map + psum", file=out)
    curve = None
    try:
        t_setup = time.perf_counter()
        mesh = jax.sharding.Mesh(np.array(devices), (AXIS,))
        named = jax.sharding.NamedSharding
        P = jax.sharding.PartitionSpec
        replicated, by_gpu = named(mesh, P()), named(mesh, P(AXIS))
        u8 = a.transfer == "u8"
        images = jax.device_put(d.train_x if u8 else normalize(d.train_x), replicated)
        labels = jax.device_put(d.train_y.astype(np.int32), replicated)
        full = jax.device_put(layout.full, named(mesh, P(None, AXIS)))
        last = () if layout.last_rows is None else (
            jax.device_put(layout.last_rows, by_gpu), jax.device_put(layout.last_weight, by_gpu))
        params = [tuple(jax.device_put(v, replicated) for v in pv) for pv in init_params(s)]
        vel = jax.tree.map(jnp.zeros_like, params)
        first = devices[0]
        test_x = jax.device_put(normalize(d.test_x), first)
        test_y = jax.device_put(d.test_y.astype(np.int32), first)
        train_epoch, evaluate = build(jax, mesh, B, s.lr, s.momentum, u8,
                                      layout.full.shape[0] > 0, bool(last))
        jax.block_until_ready((images, labels, full, last, params, vel, test_x, test_y))
        t_compile = time.perf_counter()
        train_epoch = train_epoch.lower(params, vel, images, labels, full, *last).compile()
        rec["config"]["jax_data_parallel"]["compile_ms"] = \
            (time.perf_counter() - t_compile) * 1000.0

        def test_metrics(params) -> tuple[float, float]:
            if len(d.test_y) == 0:
                return 0.0, 0.0
            mine = jax.tree.map(lambda t: t.addressable_data(0), params)  # the first GPU's copy
            return tuple(float(v) for v in evaluate(mine, test_x, test_y))

        rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                        "h2d_bytes": int(N * (images.nbytes + labels.nbytes)  # replicated
                                         + layout.full.nbytes
                                         + sum(int(t.nbytes) for t in last)
                                         + test_x.nbytes + test_y.nbytes)}
        if a.loss_curve:
            curve = open(a.loss_curve, "w")
            curve.write("epoch,batch,loss\n")
        for epoch in range(1, a.epochs + 1):
            t0 = time.perf_counter()
            # ---- timed ------------------------------------------------------------------
            params, vel, parts = train_epoch(params, vel, images, labels, full, *last)
            jax.block_until_ready((params, vel, parts))
            wall_ms = (time.perf_counter() - t0) * 1000.0
            # ---- outside the timed region -----------------------------------------------
            per_gpu = np.asarray(parts, np.float64).reshape(N, -1)
            losses = per_gpu[0].copy()
            for r in range(1, N):  # rank order
                losses += per_gpu[r]
            train_loss = float(np.sum(losses * layout.rows)) / n
            test_loss, test_acc = test_metrics(params)
            if not all(math.isfinite(v) for v in (train_loss, test_loss)):
                raise RuntimeError(f"epoch {epoch}: loss is not finite (train {train_loss}, "
                                   f"test {test_loss})")
            rec["epochs"].append(pr.epoch_entry(epoch, wall_ms, wall_ms, 0, train_loss, None,
                                                test_loss, test_acc))
            if curve is not None:
                curve.writelines(f"{epoch},{b},{v:.9g}\n" for b, v in enumerate(losses))
            if not a.quiet:
                print(f"epoch {epoch:3d}/{a.epochs}  wall {wall_ms:9.2f} ms  gpu {wall_ms:9.2f} "
                      f"ms  loss {train_loss:.4f}  train -  test {100 * test_acc:.2f}%",
                      file=out, flush=True)
        fin_loss, fin_acc = test_metrics(params)
        rec["summary"] = br.summary_json(rec["epochs"], n)
        rec["final"] = {"test_loss": fin_loss, "test_acc": fin_acc,
                        "samples_per_s": rec["summary"]["samples_per_s"]}
        rec["profiler_notes"] = []
    except Exception as ex:  # noqa: BLE001 -- any failure becomes a "failed" record
        rec["status"], rec["error"] = "failed", f"{type(ex).__name__}: {ex}"
        print(f"{PROG}: run failed: {rec['error']}", file=err)
        if a.json:
            try:
                br.append_jsonl(a.json, rec)
                print(f"{PROG}: a record marked \"failed\" was appended to {a.json}", file=err)
            except OSError as e2:
                print(f"{PROG}: could not write the failed record: {e2}", file=err)
        return EXIT_RUN_FAILED, rec
    finally:
        if curve is not None:
            curve.close()
    sm = rec["summary"]
    print(f"summary: {STRATEGY} {a.transfer} batch {B} x {N} GPUs hidden "
          f"{','.join(map(str, s.hidden))}: median epoch {sm['wall_ms_median']:.2f} ms (min "
          f"{sm['wall_ms_min']:.2f}, max {sm['wall_ms_max']:.2f}, epochs 2..{a.epochs}), epoch 1 "
          f"{sm['epoch1_wall_ms']:.2f} ms, {sm['samples_per_s'] / 1e6:.2f} M samples/s, test acc "
          f"{100 * rec['final']['test_acc']:.2f}%", file=out, flush=True)
    if a.json:
        br.append_jsonl(a.json, rec)
    return EXIT_OK, rec


def run(argv: Sequence[str], out=None, err=None, environ: Mapping[str, str] = os.environ
        ) -> tuple[int, dict | None]:
    """Parse, check, find the GPUs and train: (exit code, record or None)."""
    out, err = out or sys.stdout, err or sys.stderr
    argv = list(argv)
    try:
        s = Settings(build_parser().parse_args(argv), environ)
        devices = open_gpus(import_jax(), s.args.gpus)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return (EXIT_OK if e.code in (0, None) else EXIT_USAGE), None
    except (UsageError, NoDevice) as e:
        print(f"{PROG}: {e}", file=err)
        return (EXIT_USAGE if isinstance(e, UsageError) else EXIT_NO_DEVICE), None
    return train(s, [f"experiments/baselines/{PROG}", *argv], devices, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv)[0]


if __name__ == "__main__":
    sys.exit(main())
