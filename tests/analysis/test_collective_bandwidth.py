"""nccl-tests' bandwidth definitions (analysis/collective_bandwidth.py) against hand values."""
from fractions import Fraction

import pytest

from analysis.collective_bandwidth import COLLECTIVES, algbw_gbps, bus_factor, busbw_gbps


@pytest.mark.parametrize("collective, ranks, factor", [
    ("allreduce", 2, Fraction(1)),        # 2(2-1)/2
    ("allreduce", 4, Fraction(3, 2)),     # 2*3/4
    ("allreduce", 8, Fraction(7, 4)),     # 2*7/8
    ("allreduce", 1, Fraction(0)),        # one rank moves nothing
    ("allgather", 2, Fraction(1, 2)),
    ("allgather", 4, Fraction(3, 4)),
    ("allgather", 8, Fraction(7, 8)),
    ("reducescatter", 4, Fraction(3, 4)),
    ("alltoall", 8, Fraction(7, 8)),
    ("broadcast", 2, Fraction(1)),
    ("broadcast", 8, Fraction(1)),
    ("reduce", 4, Fraction(1)),
])
def test_bus_factor_by_hand(collective, ranks, factor):
    assert bus_factor(collective, ranks) == factor


def test_every_listed_collective_has_a_factor():
    for c in COLLECTIVES:
        assert 0 <= bus_factor(c, 4) <= 2


def test_algbw_is_bytes_per_time_in_decimal_gigabytes():
    assert algbw_gbps(1e9, 1.0) == 1.0
    assert algbw_gbps(2**30, 0.01) == pytest.approx(107.3741824, rel=1e-12)
    assert algbw_gbps(0, 1e-6) == 0.0


def test_busbw_by_hand():
    # 1 GiB all-reduce in 10 ms: algbw 107.374 GB/s; on 2 ranks busbw = algbw, on 4 1.5x.
    assert busbw_gbps("allreduce", 2**30, 0.01, 2) == pytest.approx(107.3741824, rel=1e-12)
    assert busbw_gbps("allreduce", 2**30, 0.01, 4) == pytest.approx(161.0612736, rel=1e-12)
    # all-gather of 8 ranks x 1 MiB (S = the 8 MiB output) in 100 us: 83.886 * 7/8 GB/s
    assert busbw_gbps("allgather", 8 * 2**20, 1e-4, 8) == pytest.approx(73.40032, rel=1e-12)
    assert busbw_gbps("broadcast", 1e9, 0.5, 4) == 2.0


@pytest.mark.parametrize("call", [
    lambda: bus_factor("allreduce", 0),
    lambda: bus_factor("allreduce", 2.0),
    lambda: bus_factor("allreduce", True),
    lambda: bus_factor("gather", 2),
    lambda: algbw_gbps(1e9, 0),
    lambda: algbw_gbps(1e9, float("nan")),
    lambda: algbw_gbps(-1, 1.0),
    lambda: busbw_gbps("allreduce", 1e9, -1.0, 2),
])
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call()
