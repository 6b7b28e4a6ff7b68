"""analysis/scaling_check.py: the N-GPU scaling model against measured --gpus N runs, on hand
values: the one-GPU counterpart found by configuration (only gpus, reduce and processes differ),
steps per epoch from the global batch, the measured efficiency's interval, the prediction from
step(1)'s median and its ends, agreement within the tolerance, and what is not checked, why."""
import json

import pytest

from analysis import scaling_check as sc
from analysis import scaling_model as sm

MIB = 1 << 20


def run(strategy="resident", gpus=1, wall_ms=10.0, reduce=None, processes=None, graphs=False,
        batch=256, samples=6000, epochs=(50.0,), seed=0):
    cfg = {"strategy": strategy, "scenario": "static", "transfer": "u8", "batch": batch,
           "hidden": [256], "gemm": "cublas", "epochs": 1 + len(epochs), "graphs": graphs,
           "step": "layer-by-layer", "fused": False, "epoch_form": "per-batch",
           "dataset": {"train_samples": samples}, "profile": False}
    if gpus > 1:
        cfg.update(gpus=gpus, emulate_gpus=1, reduce=reduce or "exact",
                   processes=processes or "one")
    return {"status": "ok", "run_id": f"{strategy}-{gpus}-{seed}-{wall_ms}",
            "config": cfg, "env": {"gpu_name": "NVIDIA H100 80GB HBM3"},
            "epochs": [{"wall_ms": 99.0}] + [{"wall_ms": wall_ms} for _ in epochs]}


def prims(gpus=2, gather_us=100.0, reduce_us=40.0, h2d_gbps=40.0):
    def rec(pattern, points):
        return {"record": "multi-gpu-primitive", "status": "ok", "implementation": "memstrat",
                "started_at": "2026-11-28T00:00:00Z", "config": {"pattern": pattern, "gpus": gpus},
                "results": [dict(bytes=b, median_us=u, per_gpu_gbps=[h2d_gbps] * gpus)
                            for b, u in points]}
    return [rec("nccl-all-gather", [(4096, gather_us), (64 * MIB, gather_us)]),
            rec("nccl-all-reduce", [(4096, reduce_us), (64 * MIB, reduce_us)]),
            rec("h2d-all", [(4096, 1.0), (64 * MIB, 64 * MIB / (h2d_gbps * 1e3))])]


def one_and_two(one_ms, two_ms, n=5, **kw):
    # 6000 samples: 24 steps of 256 on one GPU, 12 global steps of 2 x 256 on two
    return ([run(wall_ms=one_ms + 0.01 * i, seed=i, **kw) for i in range(n)]
            + [run(gpus=2, wall_ms=two_ms + 0.01 * i, seed=i, **kw) for i in range(n)])


def test_measured_steps_efficiency_and_the_prediction():
    # step(1) = 2.4 ms / 24 = 100 us; step(2) = 2.4 ms / 12 = 200 us: efficiency 0.5
    checks = sc.check(one_and_two(2.4, 2.4), prims(gather_us=100.0))
    assert len(checks) == 1
    c = checks[0]
    assert c.not_checked is None and c.gpus == 2 and c.reduce == "exact"
    assert c.step1.median == pytest.approx(1e3 * 2.42 / 24)
    assert c.measured.median == pytest.approx(1e3 * 2.42 / 12)
    assert c.efficiency == pytest.approx(0.5, rel=1e-3)
    assert c.efficiency_ci.low <= c.efficiency <= c.efficiency_ci.high
    # the model: step(1) + one all-gather (100 us at every size here) for resident
    assert c.predicted["step_n_us"] == pytest.approx(c.step1.median + 100.0)
    lo, hi = c.predicted_range
    assert lo <= c.predicted["step_n_us"] <= hi
    assert c.ratio == pytest.approx((c.step1.median + 100.0) / c.measured.median)
    assert c.agrees


def test_disagreement_beyond_the_tolerance():
    # measured step(2) 400 us against predicted 100 + 100 = 200 us
    c = sc.check(one_and_two(2.4, 4.8), prims(gather_us=100.0))[0]
    assert c.ratio == pytest.approx(0.5, rel=0.01)
    assert c.agrees is False
    assert "disagrees" in sc.lines([c])[0]


def test_the_counterpart_is_the_same_configuration_and_nothing_else():
    # graphs on at 2 GPUs, off at 1: not like with like
    recs = ([run(wall_ms=2.4, seed=i) for i in range(3)]
            + [run(gpus=2, wall_ms=2.4, seed=i, graphs=True, processes="per-gpu")
               for i in range(3)])
    c = sc.check(recs, prims())[0]
    assert c.not_checked.startswith("no one-GPU run") and c.predicted is None
    # per-gpu processes and ring find the one-GPU run with the same graphs
    recs = ([run(wall_ms=2.4, seed=i, graphs=True) for i in range(3)]
            + [run(gpus=2, wall_ms=2.4, seed=i, graphs=True, processes="per-gpu",
                   reduce="ring") for i in range(3)])
    c = sc.check(recs, prims())[0]
    assert c.not_checked is None and c.processes == "per-gpu" and c.reduce == "ring"
    assert c.predicted["combine_us"] == pytest.approx(
        sum(40.0 for _ in sm.bucket_floats(sm.layer_sizes([256]))))


def test_what_is_not_checked_says_why():
    recs = one_and_two(2.4, 2.4, strategy="double-buffer-graph")
    assert "the model covers resident, pinned" in sc.check(recs, prims())[0].not_checked
    c = sc.check(one_and_two(2.4, 2.4), prims(gpus=4))[0]
    assert "no ok memstrat 'nccl-all-gather' record" in c.not_checked
    assert sc.check([run(wall_ms=2.4)], prims()) == []   # no data-parallel run: nothing to check


def test_pinned_adds_the_contended_transfer():
    c = sc.check(one_and_two(2.4, 2.4, strategy="pinned"), prims(h2d_gbps=40.0))[0]
    want = 256 * (784 + 4) / 40e3
    assert c.predicted["transfer_us"] == pytest.approx(want, rel=1e-3)


def test_command_exit_status_and_refusals(tmp_path, capsys, monkeypatch):
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in prims()) + "\n")
    monkeypatch.setattr("analysis.records.load_records",
                        lambda inputs, notes=None: one_and_two(2.4, 2.4))
    assert sc.main(["runs.jsonl", "--primitives", str(p)]) == 0
    out = capsys.readouterr().out
    assert "1/1 checked configurations agree within 15%" in out
    monkeypatch.setattr("analysis.records.load_records",
                        lambda inputs, notes=None: one_and_two(2.4, 4.8))
    assert sc.main(["runs.jsonl", "--primitives", str(p)]) == 1
    monkeypatch.setattr("analysis.records.load_records",
                        lambda inputs, notes=None: [run(wall_ms=1.0)])
    assert sc.main(["runs.jsonl", "--primitives", str(p)]) == 2
    assert "no data-parallel run" in capsys.readouterr().err
    assert sc.main(["runs.jsonl", "--primitives", str(tmp_path / "missing.jsonl")]) == 2
    with pytest.raises(SystemExit):
        sc.main(["runs.jsonl"])   # --primitives is required


def strong_runs(one_ms, two_ms, n=5, one_batch=512, **kw):
    """One GPU at a global batch of `one_batch` rows beside two GPUs at 256 rows each."""
    return ([run(wall_ms=one_ms + 0.01 * i, seed=i, batch=one_batch, **kw) for i in range(n)]
            + [run(gpus=2, wall_ms=two_ms + 0.01 * i, seed=i, **kw) for i in range(n)])


def test_strong_scaling_pairs_n_gpus_with_one_gpu_at_the_same_global_batch():
    # 6000 samples: 12 steps of 512 rows on one GPU, 12 global steps of 2 x 256 on two
    rows = sc.strong_scaling(strong_runs(3.0, 2.0))
    assert len(rows) == 1
    c = rows[0]
    assert (c.gpus, c.key.batch, c.reduce) == (2, 256, "exact")
    assert c.epoch_1.median == pytest.approx(3.02) and c.epoch_n.median == pytest.approx(2.02)
    assert c.speedup == pytest.approx(3.0 / 2.0, rel=0.01)
    assert c.efficiency == pytest.approx(0.75, rel=0.01)
    assert c.speedup_ci.low <= c.speedup <= c.speedup_ci.high
    line = sc.strong_lines(rows)[0]
    assert "global batch 512" in line and "efficiency 0.748" in line   # 3.02 / 2.02 / 2


def test_strong_scaling_needs_the_one_gpu_run_at_n_times_the_batch():
    # one GPU at 256 rows is weak scaling's counterpart, not strong scaling's
    assert sc.strong_scaling(one_and_two(2.4, 2.4)) == []
    # at 1024 rows it is neither
    assert sc.strong_scaling(strong_runs(3.0, 2.0, one_batch=1024)) == []
    # too few processes: listed, no speedup
    rows = sc.strong_scaling(strong_runs(3.0, 2.0, n=2))
    assert rows[0].speedup is None and "not computed" in sc.strong_lines(rows)[0]


def test_the_command_prints_strong_scaling_without_changing_its_status(tmp_path, capsys,
                                                                        monkeypatch):
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in prims()) + "\n")
    monkeypatch.setattr("analysis.records.load_records",
                        lambda inputs, notes=None: one_and_two(2.4, 2.4) + strong_runs(3.0, 2.4)[:5])
    assert sc.main(["runs.jsonl", "--primitives", str(p)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("strong scaling, ") for ln in out)
    assert out[-1].startswith("1/1 checked configurations agree")
