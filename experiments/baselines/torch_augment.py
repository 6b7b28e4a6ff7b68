"""memstrat's stream-scenario augmentations (memstrat_stream.py, memory_strategies/augment.cpp) as
torch ops on whole epochs, for the baselines that keep the data on the GPU.

The draws (a function of (seed, epoch, row) by splitmix64) are computed on the host with numpy,
once per epoch, and uploaded: `epoch_draws` (a few ms for 60000 rows; 2 int64 or 5 float32 per
row). The pixels are then made on the device:
  light  a gather with the shifted index, 0 outside: integer ops only, so the bytes are exact;
  heavy  the affine warp with bilinear sampling, in float32, in memstrat_stream.affine_warp's
         operation order, one elementwise op per kernel (eager torch: no kernel fuses a multiply
         with an add, so nothing is contracted into an FMA), divisions by device tensors (torch
         turns a division by a host scalar into a multiply by its reciprocal, which rounds
         differently). gpu_augment_check.py measures how many bytes equal memstrat's.
"""
from __future__ import annotations

import numpy as np

from memstrat_stream import AUGMENTS, heavy_params, light_shift

HEAVY_KEYS = ("half_tan", "scale", "shear", "tx", "ty")


def epoch_draws(kind: str, seed: int, epoch: int, n: int) -> np.ndarray | None:
    """The draws of rows 0..n-1 of an epoch: light int64 [2, n] (dx, dy); heavy float32 [5, n]
    (HEAVY_KEYS); none: None."""
    rows = np.arange(n, dtype=np.int64)
    if kind == "light":
        return np.stack(light_shift(seed, epoch, rows)).astype(np.int64)
    if kind == "heavy":
        p = heavy_params(seed, epoch, rows)
        return np.stack([p[k] for k in HEAVY_KEYS]).astype(np.float32)
    if kind == "none":
        return None
    raise ValueError(f"unknown augmentation {kind!r} (expected one of {', '.join(AUGMENTS)})")


def _take(torch, flat, yy, xx, h: int, w: int):
    """flat [n, h*w]; (yy, xx) int64 [n, h, w] source coordinates -> the pixels there (0 outside,
    as a bool mask and the gathered values)."""
    n = flat.shape[0]
    inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
    idx = (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).reshape(n, -1)
    return inside, torch.gather(flat, 1, idx).reshape(n, h, w)


def shift(torch, src, dx, dy):
    """src uint8 [n, h, w] on the device, dx/dy int64 [n]: dst(x, y) = src(x - dx, y - dy)."""
    n, h, w = src.shape
    ys = torch.arange(h, device=src.device).view(1, h, 1)
    xs = torch.arange(w, device=src.device).view(1, 1, w)
    inside, got = _take(torch, src.reshape(n, -1), ys - dy.view(n, 1, 1), xs - dx.view(n, 1, 1),
                        h, w)
    return got.masked_fill(~inside, 0)


def affine_warp(torch, src, p):
    """src uint8 [n, h, w], p float32 [5, n] (HEAVY_KEYS) on the same device: augment.cpp's
    warp, in memstrat_stream.affine_warp's order of float32 operations."""
    n, h, w = src.shape
    dev, f32 = src.device, torch.float32
    one = torch.ones((), dtype=f32, device=dev)  # a device divisor: a true division
    t, scale, k, tx, ty = (p[i].view(n, 1, 1) for i in range(5))
    t2 = t * t
    den = t2 + 1.0
    c = (1.0 - t2) / den
    sn = (t * 2.0) / den
    inv_s = one / scale
    a00 = (c + k * sn) * inv_s
    a01 = (sn - k * c) * inv_s
    a10 = (-sn) * inv_s
    a11 = c * inv_s
    cx, cy = float(np.float32(w - 1) * np.float32(0.5)), float(np.float32(h - 1) * np.float32(0.5))
    v = (torch.arange(h, dtype=f32, device=dev).view(1, h, 1) - cy) - ty
    u = (torch.arange(w, dtype=f32, device=dev).view(1, 1, w) - cx) - tx
    sx = (a00 * u + a01 * v) + cx
    sy = (a10 * u + a11 * v) + cy
    x0, y0 = torch.floor(sx), torch.floor(sy)
    fx, fy = sx - x0, sy - y0
    ix, iy = x0.to(torch.int64), y0.to(torch.int64)
    flat = src.reshape(n, -1)

    def pixel(yy, xx):
        inside, got = _take(torch, flat, yy, xx, h, w)
        return got.to(f32).masked_fill(~inside, 0.0)

    p00, p01 = pixel(iy, ix), pixel(iy, ix + 1)
    p10, p11 = pixel(iy + 1, ix), pixel(iy + 1, ix + 1)
    top = p00 + fx * (p01 - p00)
    bottom = p10 + fx * (p11 - p10)
    val = top + fy * (bottom - top)
    return torch.floor(val + 0.5).clamp_(0.0, 255.0).to(torch.uint8)


def augment(torch, kind: str, src, draws):
    """src uint8 [n, h, w] on the device, draws = epoch_draws(...) uploaded (a tensor on the same
    device, or None for none): the augmented images, a new uint8 tensor [n, h, w]."""
    if kind == "none":
        return src.clone()
    if kind == "light":
        return shift(torch, src, draws[0], draws[1])
    if kind == "heavy":
        return affine_warp(torch, src, draws)
    raise ValueError(f"unknown augmentation {kind!r} (expected one of {', '.join(AUGMENTS)})")


def agreement(got: np.ndarray, want: np.ndarray) -> dict[str, float | int]:
    """How close two uint8 arrays of the same shape are: the fraction of equal bytes, the count of
    unequal ones and the largest absolute difference."""
    if got.shape != want.shape:
        raise ValueError(f"shapes differ: {got.shape} vs {want.shape}")
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
    unequal = int(np.count_nonzero(diff))
    return {"bytes": int(diff.size), "unequal": unequal,
            "equal_fraction": 1.0 - unequal / diff.size if diff.size else 1.0,
            "max_abs_diff": int(diff.max()) if diff.size else 0}
