"""analysis/scaling_model.py: data-parallel steps from one GPU's step and the measured collectives,
on hand values: the ring buckets as gradient_buckets.cpp cuts them, the curve's interpolation,
the terms per --reduce and strategy, and the command's refusals."""
import json

import pytest

from analysis import scaling_model as sm

MIB = 1 << 20


def test_buckets_follow_the_trainer_cut():
    # 784-256-10: W1+b1 = 200960 floats, W2+b2 = 2570; the last layer first
    assert sm.bucket_floats(sm.layer_sizes([256])) == [2570, 200960]
    # a layer over the bucket size splits at multiples of 4 floats, never across layers
    assert sm.bucket_floats([784, 4096, 10], max_floats=1_000_001) == [
        40970, 1_000_000, 1_000_000, 1_000_000, 215_360]
    assert sum(sm.bucket_floats([784, 1024, 1024, 10])) == 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 10250
    with pytest.raises(ValueError):
        sm.bucket_floats([784])


def test_the_curve_interpolates_in_log_log_and_extends_at_its_ends():
    c = sm.Curve([(1 * MIB, 10.0), (4 * MIB, 40.0), (64 * 1024, 5.0)])
    assert c.time_us(4 * MIB) == 40.0
    assert c.time_us(2 * MIB) == pytest.approx(20.0)          # linear in log-log between 1 and 4
    assert c.time_us(1024) == 5.0                              # below: the latency floor
    assert c.time_us(8 * MIB) == pytest.approx(80.0)           # above: the largest's bandwidth
    assert c.time_us(0) == 0.0
    with pytest.raises(ValueError):
        sm.Curve([])


def record(pattern, points, gpus=2, impl="memstrat", started="2026-11-27T00:00:00Z"):
    return {"record": "multi-gpu-primitive", "status": "ok", "implementation": impl,
            "started_at": started, "config": {"pattern": pattern, "gpus": gpus},
            "results": [dict(bytes=b, median_us=u, per_gpu_gbps=per[0] if per else None)
                        for b, u, *per in points]}


def test_terms_per_reduce_and_strategy():
    recs = [record("nccl-all-reduce", [(4096, 10.0), (4 * MIB, 40.0)]),
            record("nccl-all-gather", [(4096, 8.0), (8 * MIB, 30.0)]),
            record("h2d-all", [(1 * MIB, 0, [50.0, 40.0])]),
            record("nccl-all-reduce", [(4096, 999.0)], gpus=4),          # another N
            record("nccl-all-reduce", [(4096, 999.0)], impl="pytorch")]  # another side
    c = sm.curves(recs, 2)
    ring = sm.predict(50.0, [256], 2, "ring", "resident", 256, "u8", c)
    # two buckets: 2570 floats (10280 B) and 200960 floats (803840 B), each on the all-reduce curve
    want = c["nccl-all-reduce"].time_us(10280) + c["nccl-all-reduce"].time_us(803840)
    assert ring["combine_us"] == pytest.approx(want) and ring["transfer_us"] == 0
    assert ring["efficiency"] == pytest.approx(50.0 / (50.0 + want))
    exact = sm.predict(50.0, [256], 2, "exact", "resident", 256, "u8", c)
    assert exact["combine_us"] == pytest.approx(c["nccl-all-gather"].time_us(2 * 4 * 203530))
    pinned = sm.predict(50.0, [256], 2, "ring", "pinned", 256, "u8", c)
    # 256 x (784 + 4) bytes at the slower GPU's 40 GB/s (the 1 MiB point extends linearly below
    # it to its floor: the smallest size's time)
    assert pinned["transfer_us"] == pytest.approx(MIB / 40e3)
    assert sm.predict(50.0, [256], 1, "ring", "pinned", 256, "u8", c)["efficiency"] == 1.0


def test_the_command_prints_the_terms_and_refuses_what_it_cannot_model(tmp_path, capsys):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(record("nccl-all-reduce", [(4096, 10.0), (4 * MIB, 40.0)])) + "\n")
    assert sm.main(["--primitives", str(f), "--gpus", "2", "--step-us", "50"]) == 0
    out = capsys.readouterr().out
    assert "203530 parameters" in out and "weak-scaling efficiency" in out
    assert sm.main(["--primitives", str(f), "--gpus", "2", "--step-us", "50",
                    "--reduce", "exact"]) == 2
    assert "no ok memstrat 'nccl-all-gather' record" in capsys.readouterr().err
    assert sm.main(["--primitives", str(f), "--gpus", "4", "--step-us", "50"]) == 2
    assert sm.main(["--primitives", str(tmp_path / "none.jsonl"), "--gpus", "2",
                    "--step-us", "50"]) == 2
    for bad in (["--gpus", "1"], ["--step-us", "0"], ["--step-us", "nan"]):
        args = ["--primitives", str(f), "--gpus", "2", "--step-us", "50"]
        args[args.index(bad[0]) + 1] = bad[1]
        with pytest.raises(SystemExit) as e:
            sm.main(args)
        assert e.value.code == 2
