"""analysis/multi_gpu_primitives.py: memstrat's and PyTorch's multi-GPU primitive records paired
by case and size, the ratio against the 95% target, the host->device contention table, and the
refusals (missing file, broken line, nothing to pair)."""
import json

import pytest

from analysis import multi_gpu_primitives as mg


def rec(impl, pattern, src=None, dst=None, gpus=2, points=(), started="2026-11-27T10:00:00Z",
        status="ok"):
    return {"record": "multi-gpu-primitive", "implementation": impl, "status": status,
            "started_at": started,
            "config": {"pattern": pattern, "gpus": gpus, "src": src, "dst": dst},
            "results": [dict(bytes=b, algbw_gbps=g, busbw_gbps=bus, per_gpu_gbps=per)
                        for b, g, bus, per in points]}


def write(tmp_path, name, records):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(p)


GIB = 1 << 30


def test_pairs_at_the_largest_common_size_and_judge_the_target():
    recs = [
        rec("memstrat", "d2d-ce", 0, 1, points=[(GIB // 2, 300, None, None), (GIB, 380, None, None)]),
        rec("pytorch", "d2d-ce", 0, 1, points=[(GIB // 2, 310, None, None), (GIB, 395, None, None),
                                              (2 * GIB, 396, None, None)]),
        rec("memstrat", "nccl-all-reduce", points=[(GIB, 150, 150, None)]),
        rec("pytorch", "nccl-all-reduce", points=[(GIB, 165, 165, None)]),
        rec("memstrat", "d2d-ce", 1, 0, points=[(GIB, 390, None, None)]),  # no PyTorch side
    ]
    rows = {r["case"]: r for r in mg.pairs(recs)}
    assert set(rows) == {"d2d-ce 0->1", "nccl-all-reduce x2"}
    d2d = rows["d2d-ce 0->1"]
    assert d2d["bytes"] == GIB and d2d["ratio"] == pytest.approx(380 / 395) and d2d["reaches"]
    ar = rows["nccl-all-reduce x2"]
    assert ar["ratio"] == pytest.approx(150 / 165) and not ar["reaches"]  # 0.909 < 0.95
    md = mg.markdown(mg.pairs(recs), [])
    assert "| nccl-all-reduce x2 | 1 GiB | 150.0 (150.0) | 165.0 (165.0) | 0.909 | NO |" in md


def test_the_latest_record_of_a_side_wins_and_failed_ones_are_skipped(tmp_path):
    f = write(tmp_path, "r.jsonl", [
        rec("memstrat", "d2d-ce", 0, 1, points=[(GIB, 100, None, None)], started="2026-01-01T00:00:00Z"),
        rec("memstrat", "d2d-ce", 0, 1, points=[(GIB, 390, None, None)], started="2026-01-02T00:00:00Z"),
        rec("memstrat", "d2d-ce", 0, 1, points=[(GIB, 1, None, None)], started="2026-01-03T00:00:00Z",
            status="failed"),
        rec("pytorch", "d2d-ce", 0, 1, points=[(GIB, 400, None, None)]),
        {"record": "primitive", "status": "ok"},
    ])
    (row,) = mg.pairs(mg.load([f]))
    assert row["ratio"] == pytest.approx(390 / 400)


def test_contention_is_each_gpus_rate_together_over_alone():
    recs = [rec("memstrat", "h2d-alone", None, 0, points=[(GIB, 55, None, None)]),
            rec("memstrat", "h2d-alone", None, 1, points=[(GIB, 50, None, None)]),
            rec("memstrat", "h2d-all", points=[(GIB // 2, 80, None, [40, 40]),
                                               (GIB, 100, None, [55, 45])])]
    rows = mg.contention(recs)
    assert [(r["gpu"], r["fraction"]) for r in rows] == [(0, pytest.approx(1.0)),
                                                          (1, pytest.approx(0.9))]
    assert "| 1 | 1 GiB | 50.0 | 45.0 | 0.900 |" in mg.markdown([], rows)


def test_cli_writes_the_tables_and_refuses_what_it_cannot_use(tmp_path, capsys):
    ours = write(tmp_path, "m.jsonl", [rec("memstrat", "d2d-ce", 0, 1, points=[(GIB, 390, None, None)])])
    theirs = write(tmp_path, "t.jsonl", [rec("pytorch", "d2d-ce", 0, 1, points=[(GIB, 400, None, None)])])
    out = tmp_path / "sub" / "t.md"
    assert mg.main([ours, theirs, "--out-md", str(out)]) == 0
    assert "d2d-ce 0->1" in out.read_text()
    assert mg.main([ours]) == 2
    assert "no case was measured by both" in capsys.readouterr().err
    assert mg.main([str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"record": "multi-gpu-primitive", "status": "ok"}\n')
    assert mg.main([str(bad)]) == 2
    assert "without 'implementation'" in capsys.readouterr().err
