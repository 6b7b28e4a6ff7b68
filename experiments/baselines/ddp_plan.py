"""The torch-free parts of pytorch_ddp.py (the PyTorch DistributedDataParallel anchor of
`memstrat train --gpus N --strategy resident --scenario static`): memstrat's cut of an epoch into
global batches and shards (experiments/core/shard_plan.h), the factor each rank's loss carries so
that DDP's average of the ranks' gradients is the gradient of the global batch's mean loss, the
NVLink-multicast refusal and the NCCL settings a record keeps (nccl_env.py, shared with the
multi-GPU primitives' anchor).
"""
from __future__ import annotations

from typing import Mapping, NamedTuple

from nccl_env import format_nccl_version, nccl_at_least, nccl_settings, nvls_refusal  # noqa: F401


class Shard(NamedTuple):
    """Shard r of global batch g: the single-GPU batch g*N + r, `first` row in the epoch's order,
    `rows` of them (0 for a shard past the end of the epoch)."""
    batch: int
    first: int
    rows: int


def global_batches(samples: int, batch: int, shards: int) -> int:
    """ceil(samples / (N x batch)) (ShardPlan::global_batches)."""
    if samples < 0 or batch < 1 or shards < 1:
        raise ValueError("samples >= 0, batch >= 1 and shards >= 1")
    g = shards * batch
    return (samples + g - 1) // g


def global_rows(samples: int, batch: int, shards: int, g: int) -> int:
    """Rows of global batch g: N x batch except perhaps the last (ShardPlan::global_rows)."""
    if not 0 <= g < global_batches(samples, batch, shards):
        raise IndexError(f"global batch {g} of {global_batches(samples, batch, shards)}")
    return min(shards * batch, samples - g * shards * batch)


def shard(samples: int, batch: int, shards: int, g: int, r: int) -> Shard:
    """Shard r of global batch g (ShardPlan::shard): the first shards of the last global batch
    take full `batch` rows, one may be partial, those past the end are empty."""
    if not 0 <= r < shards:
        raise IndexError(f"shard {r} of {shards}")
    rows = global_rows(samples, batch, shards, g)
    inside = rows - r * batch
    return Shard(g * shards + r, g * shards * batch + r * batch, max(0, min(inside, batch)))


def full_global_batches(samples: int, batch: int, shards: int) -> int:
    """The global batches whose N shards all hold `batch` rows (the captured graph's)."""
    return samples // (shards * batch)


def loss_weight(samples: int, batch: int, shards: int, g: int) -> float | None:
    """What rank r's loss is in global batch g, for DDP's gradient average (the sum over ranks
    divided by N) to be the gradient of the mean over the global batch's R rows, as memstrat's
    shards' sum with their factor 1/R is: None when every shard holds `batch` rows (each rank's
    local mean: (1/N) sum_r (1/B) sum_i = (1/R) sum_i); else the factor N / R on each rank's sum
    of its rows' losses ((1/N) sum_r (N/R) sum_i = (1/R) sum_i; an empty shard adds 0)."""
    R = global_rows(samples, batch, shards, g)
    return None if R == shards * batch else shards / R


def anchor_refusal(a, environ: Mapping[str, str]) -> str | None:
    """Why an anchor of --gpus N (pytorch_ddp.py, jax_data_parallel.py) cannot run these parsed
    options in this environment, checked before the framework is imported; None when it can."""
    if a.gpus is not None and a.gpus < 2:
        return f"--gpus {a.gpus}: this trains on several GPUs, give 2 or more"
    if a.device != "cuda":
        return "this anchor trains on GPUs: it needs --device cuda"
    if a.train_acc:
        return "--train-acc: this anchor does not count training accuracy"
    return nvls_refusal(environ)


def launcher_env(environ: Mapping[str, str]) -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when torchrun started this process, else None. Raises
    ValueError when the variables are there but not integers."""
    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    if not all(k in environ for k in keys):
        return None
    try:
        rank, world, local = (int(environ[k]) for k in keys)
    except ValueError:
        raise ValueError("RANK, WORLD_SIZE and LOCAL_RANK must be integers") from None
    if not (0 <= rank < world and local >= 0):
        raise ValueError(f"RANK {rank}, WORLD_SIZE {world}, LOCAL_RANK {local}: out of range")
    return rank, world, local
