"""Bandwidth of a collective as nccl-tests defines it (doc/PERFORMANCE.md of NVIDIA/nccl-tests),
so that memstrat's multi-GPU figures read like nccl-tests' and can be set beside them.

    algbw = S / t
    busbw = algbw * factor(collective, n)

with S the operation's size in bytes, t its time and n the number of ranks. nccl-tests' factors
("To obtain a bus bandwidth which should be independent of the number of ranks n, we apply a
correction factor to the algorithm bandwidth"):

    allreduce      2(n-1)/n
    reducescatter  (n-1)/n
    allgather      (n-1)/n
    broadcast      1
    reduce         1
    alltoall       (n-1)/n

S is what nccl-tests' getBw counts: for allreduce, broadcast and reduce the buffer
(count * element size); for allgather "the size in bytes of the total array ... equal to
sendcount*sizeof(datatype)*n" (the gathered output), and likewise the full (input) array for
reducescatter. Bandwidths are in GB/s of 10^9 bytes, as nccl-tests prints them.

    from analysis.collective_bandwidth import algbw_gbps, busbw_gbps
    busbw_gbps("allreduce", 1 << 30, 0.0065, ranks=2)   # GB/s
"""
from __future__ import annotations

import math
from fractions import Fraction

#: The collectives nccl-tests defines a bus-bandwidth factor for, by the name it uses.
COLLECTIVES = ("allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall")


def _check_ranks(ranks: int) -> None:
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a whole number >= 1, got {ranks!r}")


def bus_factor(collective: str, ranks: int) -> Fraction:
    """nccl-tests' correction factor from algbw to busbw, exact (a Fraction)."""
    _check_ranks(ranks)
    n = ranks
    if collective == "allreduce":
        return Fraction(2 * (n - 1), n)
    if collective in ("reducescatter", "allgather", "alltoall"):
        return Fraction(n - 1, n)
    if collective in ("broadcast", "reduce"):
        return Fraction(1)
    raise ValueError(f"unknown collective {collective!r}; one of {', '.join(COLLECTIVES)}")


def algbw_gbps(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth S/t in GB/s (10^9 bytes per second)."""
    if not (math.isfinite(size_bytes) and size_bytes >= 0):
        raise ValueError(f"size must be a finite number of bytes >= 0, got {size_bytes!r}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"time must be finite and > 0 seconds, got {seconds!r}")
    return size_bytes / 1e9 / seconds


def busbw_gbps(collective: str, size_bytes: float, seconds: float, ranks: int) -> float:
    """Bus bandwidth algbw * bus_factor(collective, ranks) in GB/s; S as the module says."""
    return algbw_gbps(size_bytes, seconds) * float(bus_factor(collective, ranks))
