"""memstrat's stream-scenario data in numpy: the per-epoch sample order and the per-sample
augmentations (none, light, heavy), bit for bit as memory_strategies/epoch_order.cpp and
memory_strategies/augment.cpp compute them (no torch needed).

A sample's draws depend only on (seed, epoch, row), row being its position in the epoch's
order, so any split of the rows over processes gives the same bytes. `heavy` is computed in
float32 with the C++ file's operation order: numpy rounds every ufunc result to float32 and
never fuses a multiply with an add, which is what -ffp-contract=off makes the C++ do; cos and
sin come from tan(θ/2) by +, −, ×, ÷ only, so no libm call is involved.
"""
from __future__ import annotations

import numpy as np

from memstrat_inputs import MASK64, splitmix64_order

AUGMENTS = ("none", "light", "heavy")

_U64 = np.uint64
_F32 = np.float32
# augment.cpp's draw ranges, as float32 constants.
HALF_TAN_MAX = _F32(0.131652497587395853)  # tan(7.5°): |θ| <= 15°
SCALE_MIN, SCALE_MAX = _F32(0.9), _F32(1.1)
SHEAR_MAX = _F32(0.176326980708464973)     # tan(10°)
SHIFT_MAX = _F32(2.0)


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """EpochOrder::set_epoch(epoch) (and EpochWriter::order in refresh): int32 permutation."""
    return splitmix64_order(n, (seed * 0x100000001B3 + epoch) & MASK64)


def _splitmix64(state: np.ndarray) -> np.ndarray:
    """Advances `state` (uint64 array, in place) and returns the next values (wrapping
    arithmetic: numpy arrays of uint64 wrap silently, scalars would warn)."""
    with np.errstate(over="ignore"):
        state += _U64(0x9E3779B97F4A7C15)
        z = state.copy()
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def augment_stream(seed: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """augment_stream(): the splitmix64 state each row's draws start from (uint64 array)."""
    epoch_seed = (seed ^ ((0xA5A5A5A5 + epoch * 0x9E37) & MASK64)) & MASK64
    with np.errstate(over="ignore"):
        return _U64(epoch_seed) + np.asarray(rows, dtype=np.int64).astype(_U64) * \
            _U64(0xD1B54A32D192ED03)


def _uniform(r: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
    u = (r >> _U64(40)).astype(_F32) * _F32(2.0 ** -24)
    return lo + (hi - lo) * u


def light_shift(seed: int, epoch: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dy) per row, each in [-2, 2]."""
    r = _splitmix64(augment_stream(seed, epoch, rows))
    return (r % _U64(5)).astype(np.int64) - 2, ((r // _U64(5)) % _U64(5)).astype(np.int64) - 2


def heavy_params(seed: int, epoch: int, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The five float32 draws per row, in augment.cpp's order."""
    st = augment_stream(seed, epoch, rows)
    out = {}
    for name, lo, hi in (("half_tan", -HALF_TAN_MAX, HALF_TAN_MAX),
                         ("scale", SCALE_MIN, SCALE_MAX), ("shear", -SHEAR_MAX, SHEAR_MAX),
                         ("tx", -SHIFT_MAX, SHIFT_MAX), ("ty", -SHIFT_MAX, SHIFT_MAX)):
        out[name] = _uniform(_splitmix64(st), lo, hi)
    return out


def shift_images(src: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """src [n, rows, cols] uint8; dst(x, y) = src(x - dx, y - dy), 0 outside."""
    n, h, w = src.shape
    ys, xs = np.arange(h)[None, :, None], np.arange(w)[None, None, :]
    sy, sx = ys - dy[:, None, None], xs - dx[:, None, None]
    inside = (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
    flat = src.reshape(n, -1)
    idx = np.clip(sy, 0, h - 1) * w + np.clip(sx, 0, w - 1)
    got = np.take_along_axis(flat, idx.reshape(n, -1), axis=1).reshape(n, h, w)
    return np.where(inside, got, 0).astype(np.uint8)


def affine_warp(src: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """src [n, rows, cols] uint8, p = heavy_params(): augment.cpp's affine_warp per image."""
    n, h, w = src.shape
    col = {k: np.asarray(v, dtype=_F32).reshape(n, 1, 1) for k, v in p.items()}
    t = col["half_tan"]
    t2 = t * t
    den = _F32(1.0) + t2
    c = (_F32(1.0) - t2) / den
    sn = (_F32(2.0) * t) / den
    inv_s = _F32(1.0) / col["scale"]
    k = col["shear"]
    a00 = (c + k * sn) * inv_s
    a01 = (sn - k * c) * inv_s
    a10 = (-sn) * inv_s
    a11 = c * inv_s
    cx = _F32(w - 1) * _F32(0.5)
    cy = _F32(h - 1) * _F32(0.5)
    v = (np.arange(h, dtype=_F32)[None, :, None] - cy) - col["ty"]
    u = (np.arange(w, dtype=_F32)[None, None, :] - cx) - col["tx"]
    sx = (a00 * u + a01 * v) + cx
    sy = (a10 * u + a11 * v) + cy
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = sx - x0, sy - y0
    ix, iy = x0.astype(np.int64), y0.astype(np.int64)
    flat = src.reshape(n, -1)

    def pixel(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        idx = (np.clip(yy, 0, h - 1) * w + np.clip(xx, 0, w - 1)).reshape(n, -1)
        got = np.take_along_axis(flat, idx, axis=1).reshape(n, h, w).astype(_F32)
        return np.where(inside, got, _F32(0.0))

    p00, p01 = pixel(iy, ix), pixel(iy, ix + 1)
    p10, p11 = pixel(iy + 1, ix), pixel(iy + 1, ix + 1)
    top = p00 + fx * (p01 - p00)
    bottom = p10 + fx * (p11 - p10)
    val = top + fy * (bottom - top)
    r = np.floor(val + _F32(0.5))
    return np.clip(r, _F32(0.0), _F32(255.0)).astype(np.uint8)


def augment(kind: str, src: np.ndarray, seed: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """augment_image() for a stack of images: src [n, rows, cols] uint8, rows [n] = each image's
    position in the epoch's order. Returns a new uint8 array of the same shape."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    if src.ndim != 3 or src.dtype != np.uint8 or src.shape[0] != rows.size:
        raise ValueError(f"augment: expected uint8 images [n, rows, cols] and n row numbers, got "
                         f"{src.dtype} {src.shape} and {rows.size} rows")
    if kind == "none":
        return src.copy()
    if kind == "light":
        return shift_images(src, *light_shift(seed, epoch, rows))
    if kind == "heavy":
        return affine_warp(src, heavy_params(seed, epoch, rows))
    raise ValueError(f"augment: unknown kind {kind!r} (expected one of {', '.join(AUGMENTS)})")
