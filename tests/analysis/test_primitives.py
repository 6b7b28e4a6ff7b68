"""analysis/primitives.py: primitive records (good, malformed, missing or wrong fields), knees
on hand values (the same as tests/cpu/test_primitives.cpp), interpolation, fixed cost, the PCIe
raw rate, and the CSV + plot the CLI writes."""
import itertools
import json
import math
import re

import pytest

from analysis import primitives as P
from analysis.records import RecordError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
K = 1024


RUN_IDS = itertools.count()   # every record its own run (records read twice count once)


def record(name="pinned-h2d", points=((4 * K, 1.0), (8 * K, 2.0), (16 * K, 6.0), (32 * K, 8.0)),
           status="ok", gpu="NVIDIA H200", pcie=(5, 16), started_at="2026-11-24T10:00:00Z",
           timed_by="cuda-events"):
    """A record as `memstrat primitives --json` writes it; points are (bytes, GB/s)."""
    results = []
    for size, gbps in points if status == "ok" else ():
        us = size / (gbps * 1e3)
        results.append({"bytes": size, "median_us": us, "p25_us": us * 0.98, "p75_us": us * 1.03,
                        "min_us": us * 0.95, "max_us": us * 1.1, "gbps": gbps,
                        "samples_us": [us] * 3, "verified_samples": 5})
    return {
        "schema_version": 1, "record": "primitive", "run_id": f"20261124T100000Z-{name}-{next(RUN_IDS)}",
        "started_at": started_at, "status": status,
        "error": "CUDA error" if status == "failed" else None,
        "waived_reason": "no managed memory" if status == "waived" else None,
        "argv": ["memstrat", "primitives"],
        "env": {"gpu_name": gpu, "pcie_gen": pcie[0], "pcie_width": pcie[1]},
        "config": {"primitive": name, "min_bytes": 4 * K, "max_bytes": 32 * K,
                   "sizes_per_octave": 1, "warmup": 2, "samples": 3, "device": 0},
        "primitive": {"name": name, "description": "test", "timed_by": timed_by,
                      "direction": "host-to-device"},
        "results": results, "summary": None, "self_check": None,
    }


def write(tmp_path, records, name="p.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


# ---- parsing ----------------------------------------------------------------------------------

def test_good_records_load_with_their_source(tmp_path):
    path = write(tmp_path, [record(), record("um-fault-h2d", status="waived"),
                            record("pinned-d2h", status="failed")])
    recs = P.load_primitive_records(path)
    assert [r["status"] for r in recs] == ["ok", "waived", "failed"]
    assert recs[1]["_source"] == f"{path}:2"
    with pytest.raises(RecordError, match="no such file"):
        P.load_primitive_records(tmp_path)  # a folder is not a record file


def test_malformed_line_names_file_and_line(tmp_path):
    path = write(tmp_path, [record(), '{"schema_version": 1, "record": "primitive", "run'])
    with pytest.raises(RecordError, match=r"p\.jsonl:2: not valid JSON"):
        P.load_primitive_records(path)


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.pop("primitive"), "missing required field 'primitive'"),
    (lambda r: r["results"][1].pop("median_us"), "missing required field 'results[1].median_us'"),
    (lambda r: r["config"].pop("primitive"), "missing required field 'config.primitive'"),
    (lambda r: r["results"][0].update(gbps="fast"), "'results[0].gbps' is string 'fast'; expected a finite number"),
    (lambda r: r["results"][0].update(bytes=4096.5), "'results[0].bytes' is number"),
    (lambda r: r["results"][2].update(bytes=4 * K), "increasing size"),
    (lambda r: r["results"][0].update(median_us=0), "must be > 0"),
    (lambda r: r.update(results=[]), "'results' is empty"),
    (lambda r: r.update(status="meh"), "'status' must be one of ok, failed, waived"),
    (lambda r: r.update(schema_version=2), "schema_version 2 is not supported"),
    (lambda r: r.pop("record"), "not a primitive record"),
    (lambda r: r["primitive"].update(name="other"), "differs from config.primitive"),
    (lambda r: r["env"].update(pcie_gen="5"), "'env.pcie_gen' is string"),
])
def test_bad_records_say_what_is_wrong(tmp_path, mutate, message):
    rec = record()
    mutate(rec)
    with pytest.raises(RecordError, match=re.escape(message)):
        P.load_primitive_records(write(tmp_path, [rec]))


def test_waived_and_failed_records_need_their_reason(tmp_path):
    waived = record(status="waived")
    waived.pop("waived_reason")
    with pytest.raises(RecordError, match="waived_reason"):
        P.load_primitive_records(write(tmp_path, [waived]))
    failed = record(status="failed")
    failed["error"] = None
    with pytest.raises(RecordError, match="'error' is null"):
        P.load_primitive_records(write(tmp_path, [failed]))


def test_a_run_record_is_refused_with_a_pointer_to_the_right_tool(tmp_path):
    run = {"schema_version": 1, "run_id": "x", "status": "ok", "epochs": []}
    with pytest.raises(RecordError, match="report.py"):
        P.load_primitive_records(write(tmp_path, [run]))


# ---- knees and the rest, on hand values ---------------------------------------------------------

def curve(points=((4 * K, 1.0), (8 * K, 2.0), (16 * K, 6.0), (32 * K, 8.0))):
    return P._curve(record(points=points))


def test_knees_interpolate_in_log_size():
    c = curve()
    assert P.peak(c) == (8.0, 32 * K)
    assert P.knee(c, 0.5) == pytest.approx(2 ** 13.5)   # level 4: halfway from 8 KiB to 16 KiB
    assert P.knee(c, 0.9) == pytest.approx(2 ** 14.6)   # level 7.2: 0.6 of 16 KiB -> 32 KiB
    assert P.latency_us(c) == pytest.approx(4.096)


def test_knee_is_the_first_crossing_or_the_smallest_size():
    sizes = [4 * K, 8 * K, 16 * K, 32 * K]
    assert P.knee_bytes(sizes, [1, 5, 3, 10], 0.5) == pytest.approx(8 * K)
    assert P.knee_bytes(sizes, [1, 5, 3, 10], 0.9) == pytest.approx(2 ** (14 + 6 / 7))
    assert P.knee_bytes(sizes, [9, 9.5, 10, 10], 0.9) == 4 * K
    with pytest.raises(ValueError):
        P.knee_bytes([], [], 0.5)
    assert P.latency_us(curve(((8 * K, 1.0), (16 * K, 2.0)))) is None


def test_bandwidth_interpolates_time_in_log_log():
    c = curve(((4 * K, 1.0), (8 * K, 2.0), (16 * K, 2.0)))  # times 4.096, 4.096, 8.192 us
    for size, gbps in ((4 * K, 1.0), (8 * K, 2.0), (16 * K, 2.0)):
        assert P.bandwidth_at(c, size) == pytest.approx(gbps)
    mid = 4 * K * math.sqrt(2)                               # flat time between 4 and 8 KiB
    assert P.time_us_at(c, mid) == pytest.approx(4.096)
    assert P.bandwidth_at(c, mid) == pytest.approx(math.sqrt(2))
    assert P.time_us_at(c, 12 * K) == pytest.approx(4.096 * 2 ** math.log2(1.5))  # slope 1
    assert P.time_us_at(c, 1 * K) == pytest.approx(4.096)   # below range: latency
    assert P.bandwidth_at(c, 64 * K) == pytest.approx(2.0)  # above range: the last bandwidth


def test_fixed_cost_is_the_smallest_time_beyond_its_bytes_at_peak():
    c = curve(((4 * K, 4096 / 10e3), (1 << 20, 8.0)))       # 4 KiB takes 10 us; peak 8 GB/s
    assert P.fixed_cost_us(c) == pytest.approx(10 - 4096 / 8e3)
    with pytest.raises(ValueError, match="waived"):
        P.fixed_cost_us(P._curve(record(status="waived")))


@pytest.mark.parametrize("gen, width, gbps", [
    (1, 1, 0.25), (2, 16, 8.0), (3, 16, 8 * 128 / 130 * 2), (4, 16, 16 * 128 / 130 * 2),
    (5, 16, 32 * 128 / 130 * 2), (6, 8, 64 * 128 / 130), (None, 16, None), (5, None, None),
    (7, 16, None)])
def test_pcie_raw_link_rate(gen, width, gbps):
    assert P.pcie_raw_gbps(gen, width) == (pytest.approx(gbps) if gbps else None)


def test_table_uses_the_latest_ok_record_of_one_gpu(tmp_path):
    old = record(points=((4 * K, 1.0), (8 * K, 1.0)), started_at="2026-11-24T09:00:00Z")
    new = record(points=((4 * K, 3.0), (8 * K, 3.0)), started_at="2026-11-24T11:00:00Z")
    newer_failed = record(status="failed", started_at="2026-11-24T12:00:00Z")
    other_gpu = record(gpu="NVIDIA H100")
    path = write(tmp_path, [old, new, newer_failed, other_gpu])
    with pytest.raises(ValueError, match="several GPUs"):
        P.PrimitiveTable.load(path)
    t = P.PrimitiveTable.load(path, gpu="NVIDIA H200")
    assert t.peak_gbps("pinned-h2d") == pytest.approx(3.0)
    assert t.bandwidth_at("pinned-h2d", 6 * K) == pytest.approx(3.0)
    assert t.fixed_cost_us("pinned-h2d") == pytest.approx(0.0)
    with pytest.raises(KeyError, match="pinned-d2h"):
        t.time_us_at("pinned-d2h", 4096)


# ---- outputs -----------------------------------------------------------------------------------

def test_cli_writes_csvs_and_a_plot(tmp_path, capsys):
    recs = [record(), record("pageable-h2d", timed_by="steady-clock",
                             points=((4 * K, 0.4), (8 * K, 0.8), (16 * K, 1.5), (32 * K, 3.0))),
            record("um-fault-h2d", status="waived")]
    out = tmp_path / "out"
    assert P.main([str(write(tmp_path, recs)), "--out", str(out)]) == 0
    png = (out / "primitives.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    rows = (out / "primitives.csv").read_text().splitlines()
    assert rows[0].startswith("gpu_name,primitive,timed_by")
    assert len(rows) == 1 + 8  # two measured primitives x 4 sizes; the waived one has none
    summary = (out / "primitives_summary.csv").read_text()
    assert "um-fault-h2d" in summary and "waived" in summary
    assert "pinned-h2d" in capsys.readouterr().out


def test_plot_without_pcie_and_with_nothing_measured(tmp_path):
    c = P._curve(record(pcie=(None, None)))
    assert P.plot_primitives([c], tmp_path / "a.png").exists()
    assert P.plot_primitives([P._curve(record(status="waived"))], tmp_path / "b.png") is None
    assert not (tmp_path / "b.png").exists()


def test_cli_reports_bad_input_with_exit_2(tmp_path, capsys):
    assert P.main([str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_file_given_twice_counts_each_record_once(tmp_path):
    path = write(tmp_path, [record(), record(name="pageable-h2d")])
    assert len(P.load_primitive_records([path, path])) == 2


def test_size_text_names_its_unit():
    assert P.size_text(512) == "512 B"
    assert P.size_text(4 * K) == "4 KiB"
    assert P.size_text(248 * K + 100) == "248 KiB"
    assert P.size_text(5.73 * (1 << 20)) == "5.73 MiB"
    assert P.size_text(3 << 30) == "3 GiB"


def test_tables_by_gpu_from_loaded_records_match_the_files(fixtures_dir):
    from_files = P.PrimitiveTable.load_all(fixtures_dir / "primitives.jsonl")
    from_records = P.PrimitiveTable.by_gpu(P.load_primitive_records(
        [fixtures_dir / "primitives.jsonl"]))
    assert list(from_records) == list(from_files) and from_records
    for gpu, table in from_files.items():
        assert from_records[gpu].curves == table.curves
    assert P.PrimitiveTable.by_gpu([]) == {}
