#!/usr/bin/env python3
"""pytorch_gpu_resident.py in JAX: the uint8 data set resident on the GPU, each epoch's
permutation and augmentation made there in jnp, and the epoch's steps as one jax.jit of a
lax.scan over its full batches (the last, partial batch one more jitted step).

    python3 experiments/baselines/jax_gpu_resident.py --augment heavy --epochs 21 \\
        --json results/jax_gpu_resident.jsonl

Same model (Linear/ReLU, mean softmax cross-entropy, SGD with PyTorch's momentum form
v = mu*v + g; p -= lr*v), initial weights (--init DIR, memstrat's W [in x out] layout as is),
order and draws as memstrat's stream scenario (the draws computed with numpy and uploaded once
per epoch). Matmuls at "highest" precision (no TF32). light's bytes are exact (integer ops);
heavy follows memstrat's float32 operation order, but XLA fuses the elementwise ops into one
kernel and may contract a multiply and an add into an FMA: gpu_augment_check.py measures how
many bytes agree.

--measure (config.measure): epoch (permutation upload, augmentation and steps), pipeline (the
epoch's data made, each batch touched by one small read instead of a step; --consumer none), or
step (the data made before the timer starts). Time: the host clock around the epoch, ending
when its results are ready (block_until_ready); gpu_ms is that same time (JAX has no CUDA
events). Options, record and exit codes as pytorch_gpu_resident.py (config.framework "jax",
strategy "jax-gpu-resident-jit"); exit 2 also when jax is not installed.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_options  # noqa: E402
import baseline_record as br  # noqa: E402
import pytorch_run as pr  # noqa: E402  (the epoch entry, exit codes; imports no torch)
import torch_augment as ta  # noqa: E402  (epoch_draws: numpy only)
from memstrat_inputs import UsageError, normalize  # noqa: E402
from memstrat_stream import epoch_order  # noqa: E402

PROG = "jax_gpu_resident.py"


def build_parser() -> argparse.ArgumentParser:
    return baseline_options.gpu_resident_parser(PROG, __doc__)


Settings = baseline_options.GpuResidentSettings


def import_jax():
    try:
        import jax  # noqa: PLC0415
    except ImportError:
        raise UsageError("JAX is not installed (pip install jax[cuda12])") from None
    jax.config.update("jax_default_matmul_precision", "highest")
    return jax


# ---------------------------------------------------------------------------------------------
# augmentation in jnp (torch_augment.py's ops, in the same order)

def _take(jnp, flat, yy, xx, h, w):
    inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
    idx = (jnp.clip(yy, 0, h - 1) * w + jnp.clip(xx, 0, w - 1)).reshape(flat.shape[0], -1)
    return inside, jnp.take_along_axis(flat, idx, axis=1).reshape(inside.shape)


def augment(jnp, kind: str, src, draws):
    """src uint8 [n, h, w], draws as torch_augment.epoch_draws: the augmented images."""
    n, h, w = src.shape
    flat = src.reshape(n, -1)
    ys = jnp.arange(h, dtype=jnp.int32).reshape(1, h, 1)
    xs = jnp.arange(w, dtype=jnp.int32).reshape(1, 1, w)
    if kind == "none":
        return src
    if kind == "light":
        dx, dy = (draws[i].astype(jnp.int32).reshape(n, 1, 1) for i in range(2))
        inside, got = _take(jnp, flat, ys - dy, xs - dx, h, w)
        return jnp.where(inside, got, jnp.uint8(0))
    f32 = jnp.float32
    t, scale, k, tx, ty = (draws[i].reshape(n, 1, 1) for i in range(5))
    t2 = t * t
    den = f32(1.0) + t2
    c = (f32(1.0) - t2) / den
    sn = (f32(2.0) * t) / den
    inv_s = f32(1.0) / scale
    a00, a01 = (c + k * sn) * inv_s, (sn - k * c) * inv_s
    a10, a11 = (-sn) * inv_s, c * inv_s
    cx, cy = f32(w - 1) * f32(0.5), f32(h - 1) * f32(0.5)
    v = (ys.astype(f32) - cy) - ty
    u = (xs.astype(f32) - cx) - tx
    sx = (a00 * u + a01 * v) + cx
    sy = (a10 * u + a11 * v) + cy
    x0, y0 = jnp.floor(sx), jnp.floor(sy)
    fx, fy = sx - x0, sy - y0
    ix, iy = x0.astype(jnp.int32), y0.astype(jnp.int32)

    def pixel(yy, xx):
        inside, got = _take(jnp, flat, yy, xx, h, w)
        return jnp.where(inside, got.astype(f32), f32(0.0))

    p00, p01, p10, p11 = pixel(iy, ix), pixel(iy, ix + 1), pixel(iy + 1, ix), pixel(iy + 1, ix + 1)
    top = p00 + fx * (p01 - p00)
    bottom = p10 + fx * (p11 - p10)
    val = top + fy * (bottom - top)
    return jnp.clip(jnp.floor(val + f32(0.5)), 0.0, 255.0).astype(jnp.uint8)


# ---------------------------------------------------------------------------------------------
# model and epoch

def init_params(s: Settings) -> list[tuple[np.ndarray, np.ndarray]]:
    if s.init is not None:
        return [tuple(np.asarray(v, np.float32) for v in s.init.layer(l))
                for l in range(len(s.layers) - 1)]
    rng = np.random.default_rng(s.seed)   # memstrat's distribution, not its numbers
    return [(rng.normal(0, math.sqrt(2.0 / i), (i, o)).astype(np.float32),
             np.zeros(o, np.float32)) for i, o in zip(s.layers[:-1], s.layers[1:])]


def build(jax, kind: str, batch: int, lr: float, mu: float):
    """(make_epoch, train_epoch, touch, evaluate) as jitted functions."""
    jnp, lax = jax.numpy, jax.lax

    def forward(params, x):
        h = x
        for l, (w, b) in enumerate(params):
            h = h @ w + b
            if l + 1 < len(params):
                h = jnp.maximum(h, 0.0)
        return h

    def loss_fn(params, x, y):
        logits = forward(params, x)
        xent = jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0]
        return jnp.mean(xent), logits

    def step(carry, xy):
        params, vel = carry
        x, y = xy
        (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(
            params, x.astype(jnp.float32) / jnp.float32(255.0), y)
        vel = jax.tree.map(lambda v, gi: mu * v + gi, vel, g)
        params = jax.tree.map(lambda p, v: p - lr * v, params, vel)
        return (params, vel), (loss, jnp.sum(jnp.argmax(logits, 1) == y))

    @jax.jit
    def make_epoch(images, labels, order, draws):
        src = images[order]
        return augment(jnp, kind, src, draws).reshape(order.shape[0], -1), labels[order]

    @jax.jit
    def train_epoch(params, vel, x, y):
        n = x.shape[0]
        full = n // batch
        carry, (losses, correct) = lax.scan(
            step, (params, vel), (x[:full * batch].reshape(full, batch, -1),
                                  y[:full * batch].reshape(full, batch)))
        if n % batch:
            carry, (l_t, c_t) = step(carry, (x[full * batch:], y[full * batch:]))
            losses, correct = jnp.append(losses, l_t), jnp.append(correct, c_t)
        return carry[0], carry[1], losses, correct

    @jax.jit
    def touch(x):   # one byte of each batch
        return jnp.sum(x[jnp.minimum(jnp.arange(batch - 1, x.shape[0] + batch - 1, batch),
                                     x.shape[0] - 1), -1].astype(jnp.int32))

    @jax.jit
    def evaluate(params, x, y):
        logits = forward(params, x)
        xent = jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0]
        return jnp.mean(xent), jnp.mean((jnp.argmax(logits, 1) == y).astype(jnp.float32))

    return make_epoch, train_epoch, touch, evaluate


def train(s: Settings, argv: list[str], out=None, err=None) -> tuple[int, dict | None]:
    out, err = out or sys.stdout, err or sys.stderr
    a, d, n = s.args, s.data, len(s.data.train_y)
    jax = import_jax()
    jnp = jax.numpy
    if not any(dv.platform == "gpu" for dv in jax.devices()):
        print(f"{PROG}: jax sees no GPU ({jax.devices()}); this needs an NVIDIA GPU", file=err)
        return pr.EXIT_NO_DEVICE, None
    dev = jax.devices()[0]
    env = br.common_environment("jax", "cuda")
    env.update({"jax_version": jax.__version__, "gpu_name": getattr(dev, "device_kind", None),
                "driver_version": br._driver_version()})
    rec = {"schema_version": pr.SCHEMA_VERSION, "run_id": br.make_run_id(),
           "started_at": br.iso_utc_now(), "status": "ok", "error": None,
           "argv": argv, "env": env,
           "config": {"strategy": "jax-gpu-resident-jit", "framework": "jax",
                      "augment": a.augment, "scenario": "stream", "transfer": "u8",
                      "batch": s.batch, "hidden": s.hidden, "epochs": a.epochs, "lr": s.lr,
                      "momentum": s.momentum, "seed": s.seed, "gemm": "xla", "tf32": False,
                      "graphs": False, "fused": False, "fused_off_reason": "JAX",
                      "step": "layer-by-layer", "single_launch_off_reason": "JAX",
                      "epoch_launch": False, "epoch_launch_off_reason": "JAX", "depth": None,
                      "streams": None, "advise": None, "profile": False, "run_tag": a.run_tag,
                      "device": "cuda", "eager": False, "train_acc_in_loop": True,
                      "step_form": "jit-scan", "measure": s.measure,
                      "consumer": "none" if s.measure == "pipeline" else "train",
                      "augment_device": "gpu", "workers": None, "prefetch": None,
                      "init": str(Path(a.init).resolve()) if a.init else None,
                      "order": s.order_source,
                      "dataset": {"name": d.name, "path": d.source, "train_samples": n,
                                  "test_samples": len(d.test_y)}},
           "epochs": [], "api_totals": None}
    if not a.quiet:
        print(f"{PROG}: jax {jax.__version__} on {env['gpu_name']} | {a.augment} | batch "
              f"{s.batch} | measure {s.measure} | {a.epochs} epochs", file=out)
    curve = None
    try:
        t_setup = time.perf_counter()
        make_epoch, train_epoch, touch, evaluate = build(jax, a.augment, s.batch, s.lr,
                                                         s.momentum)
        images = jax.device_put(d.train_x.reshape(-1, d.rows, d.cols), dev)
        labels = jax.device_put(d.train_y.astype(np.int32), dev)
        test_x = jax.device_put(normalize(d.test_x), dev)
        test_y = jax.device_put(d.test_y.astype(np.int32), dev)
        params = [tuple(jax.device_put(v, dev) for v in pv) for pv in init_params(s)]
        vel = jax.tree.map(jnp.zeros_like, params)
        jax.block_until_ready((images, labels, test_x, test_y, params, vel))
        rec["setup"] = {"ms": (time.perf_counter() - t_setup) * 1000.0, "api_calls": None,
                        "h2d_bytes": int(images.nbytes + labels.nbytes + test_x.nbytes +
                                         test_y.nbytes)}
        if a.loss_curve:
            curve = open(a.loss_curve, "w")
            curve.write("epoch,batch,loss\n")
        rows = np.array([min(s.batch, n - lo) for lo in range(0, n, s.batch)], np.float64)
        empty = np.zeros((0,), np.float32)
        for epoch in range(1, a.epochs + 1):
            order = epoch_order(n, s.seed, epoch).astype(np.int32)
            draws_np = ta.epoch_draws(a.augment, s.seed, epoch, n)
            draws_np = empty if draws_np is None else draws_np
            if draws_np.dtype == np.int64:
                draws_np = draws_np.astype(np.int32)
            h2d = order.nbytes + draws_np.nbytes
            if s.measure == "step":
                x, y = jax.block_until_ready(make_epoch(images, labels, jax.device_put(order, dev),
                                                        jax.device_put(draws_np, dev)))
            t0 = time.perf_counter()
            # ---- timed ------------------------------------------------------------------
            if s.measure != "step":
                x, y = make_epoch(images, labels, jax.device_put(order, dev),
                                  jax.device_put(draws_np, dev))
            if s.measure == "pipeline":
                done = touch(x)
            else:
                params, vel, losses, correct = train_epoch(params, vel, x, y)
                done = (params, vel, losses, correct)
            jax.block_until_ready(done)
            wall_ms = (time.perf_counter() - t0) * 1000.0
            # ---- outside the timed region -----------------------------------------------
            if s.measure == "pipeline":
                batch_losses, train_acc = np.zeros(len(rows)), None
            else:
                batch_losses = np.asarray(losses, np.float64)
                train_acc = float(np.sum(np.asarray(correct))) / n
            test_loss, test_acc = (float(v) for v in evaluate(params, test_x, test_y))
            train_loss = float(np.sum(batch_losses * rows)) / n
            if not all(math.isfinite(v) for v in (train_loss, test_loss)):
                raise RuntimeError(f"epoch {epoch}: loss is not finite")
            rec["epochs"].append(pr.epoch_entry(epoch, wall_ms, wall_ms, h2d, train_loss,
                                                train_acc, test_loss, test_acc))
            if curve is not None:
                curve.writelines(f"{epoch},{b},{v:.9g}\n" for b, v in enumerate(batch_losses))
            if not a.quiet:
                print(f"epoch {epoch:3d}/{a.epochs}  wall {wall_ms:9.2f} ms  loss "
                      f"{train_loss:.4f}  test {100 * test_acc:.2f}%", file=out, flush=True)
        fin_loss, fin_acc = (float(v) for v in evaluate(params, test_x, test_y))
        rec["summary"] = br.summary_json(rec["epochs"], n)
        rec["final"] = {"test_loss": fin_loss, "test_acc": fin_acc,
                        "samples_per_s": rec["summary"]["samples_per_s"]}
        rec["profiler_notes"] = []
    except Exception as ex:  # noqa: BLE001 -- any failure becomes a "failed" record
        rec["status"], rec["error"] = "failed", f"{type(ex).__name__}: {ex}"
        print(f"{PROG}: run failed: {rec['error']}", file=err)
        if a.json:
            br.append_jsonl(a.json, rec)
        return pr.EXIT_RUN_FAILED, rec
    finally:
        if curve is not None:
            curve.close()
    sm = rec["summary"]
    print(f"summary: jax-gpu-resident-jit {a.augment} batch {s.batch}: median epoch "
          f"{sm['wall_ms_median']:.2f} ms, epoch 1 {sm['epoch1_wall_ms']:.2f} ms, "
          f"{sm['samples_per_s'] / 1e6:.2f} M samples/s", file=out, flush=True)
    if a.json:
        br.append_jsonl(a.json, rec)
    return pr.EXIT_OK, rec


run, main = pr.entry_points(build_parser, Settings, train, PROG)


if __name__ == "__main__":
    sys.exit(main())
